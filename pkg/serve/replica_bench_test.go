package serve

import (
	"context"
	"flag"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/served"
)

var (
	replicaRate   = flag.Int("replica.rate", 100_000, "BenchmarkReplica: rows per second written to the writer")
	replicaFollow = flag.Duration("replica.follow", served.DefaultFollowInterval, "BenchmarkReplica: the replica's --follow-interval")
)

// BenchmarkReplica: a writer and a --read-only replica, each a server
// process of its own on one root (a private copy of the 100k-series ×
// 150-row benchmark base), as in production. A client writes 10k-row
// batches of appends to the writer, paced at -replica.rate rows/s (100k by
// default); after each acknowledgement a second client polls the replica
// (a DoGet of the latest row of a series the batch wrote, back to back)
// until the write is visible. An op is one acknowledged batch. Reports:
//
//   - stale-p50/p99-ms: from the acknowledgement to the first answer of
//     the replica that shows the write;
//   - replica-/writer-p50/p99-µs: one-series DoGets (150 rows, random
//     series) asked of each server in turn while the writes go on.
//
// go test -run '^$' -bench Replica -benchtime 200x ./pkg/serve/
func BenchmarkReplica(b *testing.B) {
	root := liveBenchRoot(b, 100_000, 150)
	writerAddr := startHelper(b, root)
	writer := dialAddr(b, writerAddr)
	ctx := context.Background()
	ids := testlake.UniformIDs(100_000)
	// The first write creates the log, so the replica starts on a
	// dataset that has one; it then follows it from the start.
	first := testlake.UniformBatch(ids, 0, 10_000, false)
	if _, err := doPut(ctx, writer, "B", first); err != nil {
		b.Fatal(err)
	}
	first.Release()
	lines, _ := startHelperProcess(b, root, 1, helperEnv+"_READ_ONLY=1", helperEnv+"_FOLLOW="+replicaFollow.String())
	replica := dialAddr(b, lines[0])

	const batchRows = 10_000
	every := time.Duration(float64(time.Second) * batchRows / float64(*replicaRate))
	var (
		mu         sync.Mutex
		stale      []time.Duration
		onReplica  []time.Duration
		onWriter   []time.Duration
		stop       = make(chan struct{})
		queriesEnd sync.WaitGroup
	)
	// One-series queries of both servers in turn, while the writes go on.
	queriesEnd.Add(1)
	go func() {
		defer queriesEnd.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c, dst := writer, &onWriter
			if i%2 == 1 {
				c, dst = replica, &onReplica
			}
			tk := []byte(`{"dataset":"B","series":["` + ids[rng.IntN(len(ids))] + `"]}`)
			t0 := time.Now()
			if _, err := doGetRows(ctx, c, tk); err != nil {
				b.Error(err)
				return
			}
			d := time.Since(t0)
			mu.Lock()
			*dst = append(*dst, d)
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	b.ResetTimer()
	next := time.Now()
	k := batchRows
	for b.Loop() {
		time.Sleep(time.Until(next))
		next = next.Add(every)
		rec := testlake.UniformBatch(ids, k, batchRows, false)
		probe, want := ids[k%len(ids)], float64(k)
		k += batchRows
		if _, err := doPut(ctx, writer, "B", rec); err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		rec.Release()
		tk := []byte(`{"dataset":"B","series":["` + probe + `"],"latest":true}`)
		for {
			v, err := latestValue(ctx, replica, tk)
			if err != nil {
				b.Fatal(err)
			}
			if v == want {
				break
			}
			if time.Since(acked) > 30*time.Second {
				b.Fatalf("the replica did not show the write of %s in 30 s", probe)
			}
		}
		mu.Lock()
		stale = append(stale, time.Since(acked))
		mu.Unlock()
	}
	b.StopTimer()
	close(stop)
	queriesEnd.Wait()
	pct := func(lat []time.Duration, p float64) time.Duration {
		s := append([]time.Duration(nil), lat...)
		slices.Sort(s)
		if len(s) == 0 {
			return 0
		}
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	mu.Lock()
	defer mu.Unlock()
	b.ReportMetric(float64(pct(stale, 0.5).Microseconds())/1000, "stale-p50-ms")
	b.ReportMetric(float64(pct(stale, 0.99).Microseconds())/1000, "stale-p99-ms")
	b.ReportMetric(float64(pct(onReplica, 0.5).Microseconds()), "replica-p50-µs")
	b.ReportMetric(float64(pct(onReplica, 0.99).Microseconds()), "replica-p99-µs")
	b.ReportMetric(float64(pct(onWriter, 0.5).Microseconds()), "writer-p50-µs")
	b.ReportMetric(float64(pct(onWriter, 0.99).Microseconds()), "writer-p99-µs")
	b.ReportMetric(float64(*replicaRate), "rows/s-offered")
	b.Logf("%d batches, %d replica and %d writer queries", len(stale), len(onReplica), len(onWriter))
}

// latestValue is the value of a one-series latest ticket's one row (NaN
// without one).
func latestValue(ctx context.Context, c flight.Client, tk []byte) (float64, error) {
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: tk})
	if err != nil {
		return 0, err
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		return 0, err
	}
	defer rd.Release()
	v := -1.0
	for rd.Next() {
		rec := rd.RecordBatch()
		if rec.NumRows() > 0 {
			v = rec.Column(2).(*array.Float64).Value(int(rec.NumRows()) - 1)
		}
	}
	return v, rd.Err()
}
