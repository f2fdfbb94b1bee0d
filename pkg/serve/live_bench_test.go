package serve

// Benchmarks of live writes (issue: DoPut into a WAL-backed delta):
//
//	go test -run '^$' -bench 'DoPut|DoGetDelta|Compact|Replay' -benchtime 3x ./pkg/serve/
//
// They run on a copy (hard links) of the shared 100k-series × 150-row
// benchmark dataset, so the writes never reach the other benchmarks.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/served"
)

// liveBenchRoot is a private copy of benchRoot's dataset "B" (hard links).
func liveBenchRoot(b *testing.B, series, rows int) string {
	b.Helper()
	return testsnap.PrivateCopy(b, benchRoot(b, series, rows))
}

// BenchmarkDoPut: durable ingest over Flight with 10k-row batches, 1 and 4
// writers each on its own stream; an op is one acknowledged batch. Reports
// rows/s and the acknowledgement latency.
func BenchmarkDoPut(b *testing.B) {
	const batchRows = 10_000
	for _, writers := range []int{1, 4} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			root := liveBenchRoot(b, 100_000, 150)
			srv := startServer(b, Config{Root: root})
			ids := testlake.UniformIDs(100_000)
			recs := make([]arrow.RecordBatch, 16)
			for i := range recs {
				recs[i] = testlake.UniformBatch(ids, i*batchRows, batchRows, i%2 == 0)
			}
			var mu sync.Mutex
			var lat []time.Duration
			per := max(b.N/writers, 1)
			b.ResetTimer()
			t0 := time.Now()
			cpu0 := liveCPUTime()
			var wg sync.WaitGroup
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dial(b, srv)
					stream, err := c.DoPut(context.Background())
					if err != nil {
						b.Error(err)
						return
					}
					wr := flight.NewRecordWriter(stream, ipc.WithSchema(recs[0].Schema()))
					wr.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"B"}})
					var mine []time.Duration
					for i := 0; i < per; i++ {
						t := time.Now()
						if err := wr.Write(recs[(w+i)%len(recs)]); err != nil {
							b.Error(err)
							return
						}
						if _, err := stream.Recv(); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t))
					}
					wr.Close()
					stream.CloseSend()
					for {
						if _, err := stream.Recv(); err != nil {
							break
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			el := time.Since(t0)
			b.ReportMetric(float64(len(lat)*batchRows)/el.Seconds(), "rows/s")
			// The process's CPU per row (server and the in-process Go client
			// alike, GC included): what a loaded machine's wall clock hides.
			b.ReportMetric(float64(liveCPUTime()-cpu0)/float64(max(len(lat), 1)*batchRows), "cpu-ns/row")
			percentiles(b, lat)
		})
	}
}

// putDirect applies rows to dataset d through its write path (durably),
// in 10k-row batches of existing series.
func putDirect(b *testing.B, d *served.Dataset, ids []string, rows int, revise bool, seed int) {
	b.Helper()
	w, err := d.Writer()
	if err != nil {
		b.Fatal(err)
	}
	for k := 0; k < rows; k += 10_000 {
		rec := testlake.UniformBatch(ids, seed+k, min(10_000, rows-k), revise)
		_, err := d.Put(context.Background(), w, memory.DefaultAllocator, rec, 0)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDoGetDelta: one 150-row series per DoGet (Go client, in
// process) with a delta of 0, 1% and 10% of the base's rows merged on read
// (half revisions, half appends, spread over every series).
func BenchmarkDoGetDelta(b *testing.B) {
	for _, pct := range []int{0, 1, 10} {
		b.Run(fmt.Sprintf("delta=%d%%", pct), func(b *testing.B) {
			root := liveBenchRoot(b, 100_000, 150)
			srv := startServer(b, Config{Root: root})
			d := srv.svc.datasets["B"]
			ids := testlake.UniformIDs(100_000)
			n := 15_000_000 * pct / 100
			putDirect(b, d, ids, n/2, true, 0)
			putDirect(b, d, ids, n/2, false, 0)
			c := dial(b, srv)
			ctx := context.Background()
			for i := 0; i < 200; i++ {
				doGetRows(ctx, c, []byte(`{"dataset":"B","series":["`+ids[i]+`"]}`))
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t := time.Now()
				if _, err := doGetRows(ctx, c, []byte(`{"dataset":"B","series":["`+ids[i%len(ids)]+`"]}`)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			percentiles(b, lat)
			// what a read merges over: the delta's runs when timing ended
			// (the merger may still have been folding some)
			if ls, ok := d.LiveStats(); ok {
				b.ReportMetric(float64(ls.Runs), "runs")
			}
		})
	}
}

// BenchmarkCompact: folding a 150k-row delta (1% of 15M base rows; half
// revisions, half appends) into the next snapshot. Compare with
// BenchmarkBuild in pkg/sortwrite (a full build of the same base).
func BenchmarkCompact(b *testing.B) {
	root := liveBenchRoot(b, 100_000, 150)
	srv := startServer(b, Config{Root: root})
	d := srv.svc.datasets["B"]
	ids := testlake.UniformIDs(100_000)
	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		putDirect(b, d, ids, 75_000, true, i*150_000)
		putDirect(b, d, ids, 75_000, false, i*150_000)
		b.StartTimer()
		t := time.Now()
		res, err := d.Compact(context.Background())
		if err != nil || res.Result != "compacted" {
			b.Fatalf("%+v %v", res, err)
		}
		took = append(took, time.Since(t))
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
}

// liveCPUTime is the process's user and system CPU time in nanoseconds.
func liveCPUTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
