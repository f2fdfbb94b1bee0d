package serve

// Readers and writers during compactions and reloads (run it with -race):
// every answer must be consistent with one view of the dataset.
//
// The content marker: every write replaces every period of 1–3 series with
// one value, the write's marker (writer·10⁶ + its sequence number), and
// every lake build gives every row of every series its own negative
// marker. So in one answer
//
//   - all rows of one series carry one marker (a mix means rows of two
//     views, or a write applied in part);
//   - every series has exactly its periods (a lost or doubled row shows as
//     a count), and GetFlightInfo counts are exact;
//   - if series X shows write m, every other series m wrote shows m or a
//     write that did not happen before m (each write records which acks
//     its writer had seen when it was sent: a vector clock). Showing an
//     older write, or a base marker, means m was visible in part;
//   - a writer reading its series after the ack sees its write (or a
//     later one, or a lake build reloaded after the ack, which supersedes
//     what compactions folded), so a write that vanishes or never shows
//     is caught too.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

const (
	raceSeries   = 16
	racePeriods  = 24 // 2018-01 … 2019-12
	raceWriters  = 2
	raceWrites   = 60 // per writer
	raceMarkerOf = 1_000_000
)

func raceID(s int) string { return fmt.Sprintf("R%02d", s) }

func racePeriod(i int) string { return fmt.Sprintf("%04d-%02d", 2018+i/12, 1+i%12) }

// writeRaceLake writes every series with every value = marker (< 0).
func writeRaceLake(t testing.TB, dir string, marker float64) {
	var ids, periods, vals, cats []any
	for s := 0; s < raceSeries; s++ {
		for i := 0; i < racePeriods; i++ {
			ids = append(ids, raceID(s))
			periods = append(periods, racePeriod(i))
			vals = append(vals, marker)
			cats = append(cats, []string{"Even", "Odd"}[s%2])
		}
	}
	testlake.WriteParquet(t, dir, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids},
		testlake.Col{Name: "period", Vals: periods},
		testlake.Col{Name: "value", Vals: vals, Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "category", Vals: cats},
	)
}

// raceWrite is what a reader knows of a write: the series it replaced and
// the last ack of each writer its writer had seen when it sent it.
type raceWrite struct {
	series []int
	seen   [raceWriters]int64
}

type raceLog struct {
	writes sync.Map // marker (float64) → *raceWrite
	acked  [raceWriters]atomic.Int64
}

// before reports whether write a happened before write b (b's writer had
// seen a acknowledged when it sent b).
func (l *raceLog) before(a, b float64) bool {
	wa, ka := int(a)/raceMarkerOf, int64(a)%raceMarkerOf
	wb, kb := int(b)/raceMarkerOf, int64(b)%raceMarkerOf
	if wa == wb {
		return ka < kb
	}
	v, ok := l.writes.Load(b)
	return ok && ka <= v.(*raceWrite).seen[wa]
}

// raceQuery is a ticket and the rows per series its answer must have.
type raceQuery struct {
	tk        map[string]any
	series    int // how many series
	perSeries int
}

func raceQueries(r *rand.Rand) []raceQuery {
	picks := r.Perm(raceSeries)[:3]
	var ids []string
	for _, p := range picks {
		ids = append(ids, raceID(p))
	}
	return []raceQuery{
		{map[string]any{"dataset": "RACE", "prefix": ""}, raceSeries, racePeriods},
		{map[string]any{"dataset": "RACE", "series": ids}, 3, racePeriods},
		{map[string]any{"dataset": "RACE", "category": "Even"}, raceSeries / 2, racePeriods},
		{map[string]any{"dataset": "RACE", "prefix": "", "latest": true}, raceSeries, 1},
		{map[string]any{"dataset": "RACE", "prefix": "R0", "start": "2019", "end": "2019"}, 10, 12},
	}
}

// checkRace checks one answer: rows as (id, value) in output order.
func (l *raceLog) check(q raceQuery, ids []string, vals []float64) error {
	marker := map[string]float64{}
	count := map[string]int{}
	var order []string
	for i, id := range ids {
		if m, ok := marker[id]; ok && m != vals[i] {
			return fmt.Errorf("series %s carries markers %v and %v in one answer", id, m, vals[i])
		}
		if _, ok := marker[id]; !ok {
			order = append(order, id)
		}
		marker[id] = vals[i]
		count[id]++
	}
	if !slices.IsSorted(order) || len(order) != len(slices.Compact(slices.Clone(order))) {
		return fmt.Errorf("series out of order or split: %v", order)
	}
	if len(order) != q.series {
		return fmt.Errorf("%d series, want %d", len(order), q.series)
	}
	for id, n := range count {
		if n != q.perSeries {
			return fmt.Errorf("series %s has %d rows, want %d", id, n, q.perSeries)
		}
	}
	for x, m := range marker {
		if m < 0 {
			continue
		}
		v, ok := l.writes.Load(m)
		if !ok {
			return fmt.Errorf("series %s shows %v, which no write sent", x, m)
		}
		for _, s := range v.(*raceWrite).series {
			y := raceID(s)
			my, ok := marker[y]
			switch {
			case !ok:
			case my < 0:
				return fmt.Errorf("write %v shows in series %s but not in %s (base marker %v)", m, x, y, my)
			case my != m && l.before(my, m):
				return fmt.Errorf("write %v shows in series %s, but %s shows the older write %v", m, x, y, my)
			}
		}
	}
	return nil
}

func raceRecord(series []int, marker float64) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	ib, pb, vb := array.NewStringBuilder(mem), array.NewStringBuilder(mem), array.NewFloat64Builder(mem)
	defer ib.Release()
	defer pb.Release()
	defer vb.Release()
	for _, s := range series {
		for i := 0; i < racePeriods; i++ {
			ib.Append(raceID(s))
			pb.Append(racePeriod(i))
			vb.Append(marker)
		}
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	cols := []arrow.Array{ib.NewArray(), pb.NewArray(), vb.NewArray()}
	rec := array.NewRecordBatch(sc, cols, int64(cols[0].Len()))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// readAnswer decodes a DoGet stream into series ids and values.
func readAnswer(rd *flight.Reader) ([]string, []float64, error) {
	var ids []string
	var vals []float64
	for rd.Next() {
		rec := rd.RecordBatch()
		idc, valc := rec.Column(0), rec.Column(2).(*array.Float64)
		for j := 0; j < int(rec.NumRows()); j++ {
			ids = append(ids, value(idc, j).(string))
			vals = append(vals, valc.Value(j))
		}
	}
	return ids, vals, rd.Err()
}

func TestLiveReadersWritersCompactionsReloads(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	dir := filepath.Join(root, "RACE")
	lakes := 0
	var lakeGen atomic.Int64 // lake builds whose reload has returned
	build := func() {
		lakes++
		lake := filepath.Join(base, fmt.Sprintf("lake-%d", lakes))
		writeRaceLake(t, lake, -float64(lakes))
		testsnap.Build(t, lake, dir, func(o *sortwrite.Options) { o.BatchRows = 100 })
	}
	build()

	srv := startServer(t, Config{Root: root})
	svc := srv.Service()
	admin := dial(t, srv)
	ctx := context.Background()
	log := &raceLog{}

	var (
		writersDone atomic.Int32
		stopReaders atomic.Bool
		failures    atomic.Int64
		firstErr    atomic.Value
		answers     atomic.Int64
		wg          sync.WaitGroup
	)
	fail := func(err error) {
		if failures.Add(1) == 1 {
			firstErr.Store(err)
		}
	}

	// Writers: DoPut over Flight, one batch per stream.
	for w := 0; w < raceWriters; w++ {
		c := dial(t, srv)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			defer writersDone.Add(1)
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for k := int64(1); k <= raceWrites && failures.Load() == 0; k++ {
				series := r.Perm(raceSeries)[:1+r.IntN(3)]
				marker := float64(w*raceMarkerOf) + float64(k)
				rw := &raceWrite{series: series}
				for i := range rw.seen {
					rw.seen[i] = log.acked[i].Load()
				}
				log.writes.Store(marker, rw)
				// The lake builds reloaded before the write was sent: the
				// server acknowledges it on top of one of them or a later
				// base, so none of them may show through after the ack.
				// (Not the count at the client's ack: the server acks
				// before the stream's end reaches the client, and a lake
				// build reloaded in between supersedes a write compacted
				// meanwhile, as it should.)
				lakeBefore := lakeGen.Load()
				rec := raceRecord(series, marker)
				acks, err := doPut(ctx, c, "RACE", rec)
				rec.Release()
				if err != nil || len(acks) != 1 || acks[0]["rows"] != uint64(len(series)*racePeriods) {
					fail(fmt.Errorf("writer %d put %d: %v %v", w, k, acks, err))
					return
				}
				log.acked[w].Store(k)
				// Read your write: each series shows it, a write that did
				// not happen before it, or a lake build published after
				// it was sent (which supersedes what compactions folded).
				var ids []string
				for _, s := range series {
					ids = append(ids, raceID(s))
				}
				slices.Sort(ids)
				q := raceQuery{map[string]any{"dataset": "RACE", "series": ids}, len(ids), racePeriods}
				got, vals, err := func() ([]string, []float64, error) {
					stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: ticket(q.tk)})
					if err != nil {
						return nil, nil, err
					}
					rd, err := flight.NewRecordReader(stream)
					if err != nil {
						return nil, nil, err
					}
					defer rd.Release()
					return readAnswer(rd)
				}()
				if err == nil {
					err = log.check(q, got, vals)
				}
				for i := 0; err == nil && i < len(got); i++ {
					switch v := vals[i]; {
					case v < 0 && -v <= float64(lakeBefore):
						err = fmt.Errorf("series %s shows base marker %v, not the write %v acknowledged over it", got[i], v, marker)
					case v > 0 && v != marker && log.before(v, marker):
						err = fmt.Errorf("series %s shows the older write %v, not the write %v acknowledged after it", got[i], v, marker)
					}
				}
				if err != nil {
					fail(fmt.Errorf("writer %d, after put %d: %w", w, k, err))
					return
				}
			}
		}(w)
	}

	// Readers: over Flight, and in process.
	const flightReaders, localReaders = 2, 2
	for i := 0; i < flightReaders+localReaders; i++ {
		var c flight.Client
		if i < flightReaders {
			c = dial(t, srv)
		}
		wg.Add(1)
		go func(i int, c flight.Client) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(100+i), 2))
			for n := 0; !stopReaders.Load() && failures.Load() == 0; n++ {
				qs := raceQueries(r)
				q := qs[n%len(qs)]
				ids, vals, err := func() ([]string, []float64, error) {
					var rd *flight.Reader
					var err error
					if c != nil {
						stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: ticket(q.tk)})
						if err != nil {
							return nil, nil, err
						}
						if rd, err = flight.NewRecordReader(stream); err != nil {
							return nil, nil, err
						}
					} else {
						ms := &memStream{ctx: ctx}
						if err := svc.DoGet(&flight.Ticket{Ticket: ticket(q.tk)}, ms); err != nil {
							return nil, nil, err
						}
						if rd, err = flight.NewRecordReader(&memReader{msgs: ms.msgs}); err != nil {
							return nil, nil, err
						}
					}
					defer rd.Release()
					return readAnswer(rd)
				}()
				if err == nil {
					err = log.check(q, ids, vals)
				}
				if err == nil && c != nil && n%5 == 0 {
					fi, ferr := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"RACE"}})
					switch {
					case ferr != nil:
						err = ferr
					case fi.TotalRecords != raceSeries*racePeriods:
						err = fmt.Errorf("GetFlightInfo: %d rows, want %d", fi.TotalRecords, raceSeries*racePeriods)
					}
				}
				if err != nil {
					fail(fmt.Errorf("reader %d, query %v: %w", i, q.tk, err))
					return
				}
				answers.Add(1)
			}
		}(i, c)
	}

	// Compactions and reloads until the writers are done, then one more
	// of each.
	t0 := time.Now()
	compactions, reloads := 0, 0
	for round := 0; failures.Load() == 0; round++ {
		last := writersDone.Load() == raceWriters
		if _, err := runAction(ctx, admin, "compact", "RACE"); err != nil {
			fail(fmt.Errorf("compact: %w", err))
			break
		}
		compactions++
		if round%3 == 2 || last {
			build()
			body, err := runAction(ctx, admin, "reload", "RACE")
			if err != nil || !strings.Contains(string(body), `"result":"reloaded"`) {
				fail(fmt.Errorf("reload: %s %v", body, err))
				break
			}
			reloads++
			lakeGen.Store(int64(lakes))
		}
		if last {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Readers go on a little over the last view.
	time.Sleep(50 * time.Millisecond)
	stopReaders.Store(true)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d failures; first: %v", n, firstErr.Load())
	}
	t.Logf("%d writes, %d answers checked, %d compactions, %d reloads in %v",
		raceWriters*raceWrites, answers.Load(), compactions, reloads, time.Since(t0).Round(time.Millisecond))
	if answers.Load() < 100 || compactions < 3 || reloads < 2 {
		t.Fatalf("too little happened: %d answers, %d compactions, %d reloads", answers.Load(), compactions, reloads)
	}

	// A restart serves the same view.
	all := map[string]any{"dataset": "RACE", "prefix": ""}
	before := rowsOf(t, admin, all)
	srv.svc.Close()
	srv2 := startServer(t, Config{Root: root})
	if got := rowsOf(t, dial(t, srv2), all); got != before {
		t.Fatalf("after a restart:\n%s\nbefore:\n%s", got, before)
	}
}
