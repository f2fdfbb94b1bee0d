package serve

// Benchmarks (none runs in plain `go test`):
//
//	go test -run '^$' -bench . -benchtime 2s ./pkg/serve/
//
// BenchmarkRSS15M needs the 15M-row snapshot: set
// SERVINGSNAP_BENCH_LAKE=ROOT/DATASET to a dataset built with
//
//	snapbuild gen --out /tmp/blake --series 100000
//	snapbuild build --input /tmp/blake --out /tmp/bsnap/SYN
//
// or name it explicitly (-bench RSS15M) and it builds one in a temporary
// directory first (about a minute). It is skipped otherwise.

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// benchRoot returns a root holding one dataset "B" of `series` series with
// `rows` monthly rows each, built once per process (testsnap.Uniform).
func benchRoot(b *testing.B, series, rows int) string {
	b.Helper()
	return testsnap.Uniform(b, series, rows)
}

// BenchmarkOpen: opening a dataset (pkg/snapshot.Open plus the server's
// view) with a warm page cache, by series and rows per series. Rows cost
// nothing; series cost the index load (a copy and a checksum of
// index.arrow, ~60-80 bytes a series).
func BenchmarkOpen(b *testing.B) {
	for _, c := range []struct{ series, rows int }{
		{10_000, 1}, {10_000, 150}, {100_000, 1}, {100_000, 150}, {1_000_000, 1},
	} {
		b.Run(fmt.Sprintf("series=%d/rows=%d", c.series, c.series*c.rows), func(b *testing.B) {
			r := benchRoot(b, c.series, c.rows)
			b.ReportAllocs()
			for b.Loop() {
				svc, err := Open(r, Options{})
				if err != nil {
					b.Fatal(err)
				}
				svc.Close()
			}
		})
	}
}

// benchIDs lists every series id of the dataset.
func benchIDs(b *testing.B, v *served.View) []string {
	ids := make([]string, v.Snapshot().Index().Len())
	for i := range ids {
		ids[i] = strings.Clone(v.Snapshot().Index().SeriesID(i))
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// BenchmarkLookupSlice: the in-process core of a query on the 100k-series
// / 15M-row dataset, random series, snapshot acquired and released each
// time:
//
//   - lookup+range: binary search of the id in the index, binary search of
//     the period range in the mapped period column (what GetFlightInfo and
//     the row limit need);
//   - lookup+slice: that plus zero-copy slices of the period and value
//     columns (what DoGet does before the Flight writer serialises them);
//   - snapshot.Rows: pkg/snapshot's Lookup + Rows, which slices every column
//     into a new record batch.
func BenchmarkLookupSlice(b *testing.B) {
	svc, err := Open(benchRoot(b, 100_000, 150), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	d := svc.datasets["B"]
	v := acquireView(d)
	ids := benchIDs(b, v)
	v.Release()
	from, to := day(b, "2003-01-01"), day(b, "2008-12-31")
	for _, rng := range []string{"all", "range"} {
		lo, hi := int32(math.MinInt32), int32(math.MaxInt32)
		if rng == "range" {
			lo, hi = from, to
		}
		for _, how := range []string{"lookup+range", "lookup+slice", "snapshot.Rows"} {
			b.Run(rng+"/"+how, func(b *testing.B) {
				b.ReportAllocs()
				i, rows := 0, int64(0)
				for b.Loop() {
					v := acquireView(d)
					code, ok := v.Snapshot().Lookup(ids[i%len(ids)])
					if !ok {
						b.Fatal("not found")
					}
					switch how {
					case "snapshot.Rows":
						rec, err := v.Snapshot().Rows(code, lo, hi)
						if err != nil {
							b.Fatal(err)
						}
						rows += rec.NumRows()
						rec.Release()
					default:
						bt, r0, r1, err := v.Snapshot().Range(v.Snapshot().Index().Entry(code), lo, hi)
						if err != nil {
							b.Fatal(err)
						}
						rows += r1 - r0
						if how == "lookup+slice" {
							batch := v.Snapshot().Batch(bt)
							p := array.NewSlice(batch.Column(1), r0, r1)
							x := array.NewSlice(batch.Column(2), r0, r1)
							p.Release()
							x.Release()
						}
					}
					v.Release()
					i++
				}
				b.ReportMetric(float64(rows)/float64(i), "rows/op")
			})
		}
	}
}

// BenchmarkPlanAndRecord: the server's whole in-process path for one
// series without the network: parse the ticket, plan, build the record
// batch (dictionary, slices) — everything DoGet does before gRPC.
func BenchmarkPlanAndRecord(b *testing.B) {
	svc, ids := benchService(b)
	tickets := make([][]byte, 1024)
	for i := range tickets {
		tickets[i] = []byte(`{"dataset":"B","series":["` + ids[i] + `"]}`)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q, err := ParseTicket(tickets[i%len(tickets)], 1<<20, 1000)
		if err != nil {
			b.Fatal(err)
		}
		v, _ := svc.acquire(q.Dataset)
		p, err := svc.plan(v, q)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Stream(context.Background(), svc.mem, DefaultLimits.BatchBytes, func(r arrow.RecordBatch) error { return nil }); err != nil {
			b.Fatal(err)
		}
		v.Release()
		i++
	}
}

// doGetRows runs one DoGet and counts its rows.
func doGetRows(ctx context.Context, c flight.Client, tk []byte) (int64, error) {
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: tk})
	if err != nil {
		return 0, err
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		return 0, err
	}
	defer rd.Release()
	var n int64
	for rd.Next() {
		n += rd.RecordBatch().NumRows()
	}
	return n, rd.Err()
}

func percentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.90), "p90-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(at(0.999), "p99.9-µs")
}

// BenchmarkDoGet150: one 150-row series per DoGet with the Go Flight
// client on loopback, sequentially; reports latency percentiles. The
// server runs in this process ("in-process") or, as in production, in a
// process of its own ("subprocess": this test binary re-executed as a
// server). "floor" is the read floor in this process: a bare Flight
// server sending the same answers, encoded before the benchmark starts,
// so in-process ÷ floor is what the server's work adds to gRPC's.
func BenchmarkDoGet150(b *testing.B) {
	r := benchRoot(b, 100_000, 150)
	for _, where := range []string{"in-process", "subprocess", "floor"} {
		b.Run(where, func(b *testing.B) {
			c := benchClient(b, r, where)
			ids := testlake.UniformIDs(100_000)
			ctx := context.Background()
			for i := 0; i < 200; i++ { // warm up the connection
				doGetRows(ctx, c, []byte(`{"dataset":"B","series":["`+ids[i]+`"]}`))
			}
			b.ReportAllocs()
			percentiles(b, timeDoGets(b, ctx, c, ids))
		})
	}
}

// benchClient connects to a server on root, in this process or another,
// or to the read floor of root's dataset B.
func benchClient(b *testing.B, root, where string) flight.Client {
	switch where {
	case "subprocess":
		return dialAddr(b, startHelper(b, root))
	case "floor":
		return dialAddr(b, startFloor(b, root))
	}
	return dial(b, startServer(b, Config{Root: root}))
}

// startFloor runs, in this process, a Flight server with the Server's gRPC
// options and no middleware, whose DoGet sends the messages the Service
// sent for the same one-series ticket of dataset B, recorded before it
// starts; it returns its address.
func startFloor(b *testing.B, root string) string {
	b.Helper()
	svc, err := Open(root, Options{Limits: DefaultLimits})
	if err != nil {
		b.Fatal(err)
	}
	v := acquireView(svc.datasets["B"])
	ids := benchIDs(b, v)
	v.Release()
	answers := make(map[string][]*flight.FlightData, len(ids))
	for _, id := range ids {
		tk := `{"dataset":"B","series":["` + id + `"]}`
		st := &recordStream{ctx: context.Background()}
		if err := svc.DoGet(&flight.Ticket{Ticket: []byte(tk)}, st); err != nil {
			b.Fatal(err)
		}
		answers[tk] = st.msgs
	}
	svc.Close()
	srv := flight.NewServerWithMiddleware(nil,
		grpc.MaxSendMsgSize(sendMsgBytes),
		grpc.NumStreamWorkers(uint32(4*runtime.GOMAXPROCS(0))),
	)
	if err := srv.Init("127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	srv.RegisterFlightService(&floorService{answers: answers})
	go srv.Serve()
	b.Cleanup(srv.Shutdown)
	return srv.Addr().String()
}

// floorService answers from recorded messages.
type floorService struct {
	flight.BaseFlightServer
	answers map[string][]*flight.FlightData
}

func (f *floorService) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	msgs, ok := f.answers[string(t.GetTicket())]
	if !ok {
		return fmt.Errorf("no recorded answer for ticket %q", t.GetTicket())
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

// recordStream is a DoGet stream keeping copies of what is sent.
type recordStream struct {
	flight.FlightService_DoGetServer // nil: only Context and Send are called
	ctx                              context.Context
	msgs                             []*flight.FlightData
}

func (r *recordStream) Context() context.Context { return r.ctx }
func (r *recordStream) Send(d *flight.FlightData) error {
	r.msgs = append(r.msgs, &flight.FlightData{DataHeader: bytes.Clone(d.DataHeader), DataBody: bytes.Clone(d.DataBody)})
	return nil
}

// BenchmarkDoGetConcurrent: 4 clients (own connections) issuing 150-row
// DoGets back to back against a server in its own process; ns/op is wall
// time per query over all clients.
func BenchmarkDoGetConcurrent(b *testing.B) {
	r := benchRoot(b, 100_000, 150)
	for _, where := range []string{"in-process", "subprocess"} {
		b.Run(where, func(b *testing.B) {
			var addr string
			if where == "subprocess" {
				addr = startHelper(b, r)
			} else {
				addr = startServer(b, Config{Root: r}).FlightAddr().String()
			}
			ids := testlake.UniformIDs(100_000)
			const clients = 4
			work := make(chan int, 1024)
			var wg sync.WaitGroup
			var failed atomic.Value
			lats := make([][]time.Duration, clients)
			for w := 0; w < clients; w++ {
				c := dialAddr(b, addr)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						t0 := time.Now()
						n, err := doGetRows(context.Background(), c, []byte(`{"dataset":"B","series":["`+ids[i%len(ids)]+`"]}`))
						lats[w] = append(lats[w], time.Since(t0))
						if err != nil || n != 150 {
							failed.Store(fmt.Sprintf("%d rows, %v", n, err))
						}
					}
				}()
			}
			start := time.Now()
			i := 0
			for b.Loop() {
				work <- i
				i++
			}
			close(work)
			wg.Wait()
			el := time.Since(start)
			if f := failed.Load(); f != nil {
				b.Fatal(f)
			}
			b.ReportMetric(float64(i)/el.Seconds(), "queries/s")
			b.ReportMetric(float64(i)*150/el.Seconds(), "rows/s")
			var all []time.Duration
			for _, l := range lats {
				all = append(all, l...)
			}
			percentiles(b, all)
		})
	}
}

// procStatus reads a kB field of /proc/self/status, in MiB.
func procStatus(b *testing.B, field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

// explicitBench reports whether -test.bench names this benchmark literally
// (not just "." or a broad pattern).
func explicitBench(name string) bool {
	f := flag.Lookup("test.bench")
	return f != nil && strings.Contains(f.Value.String(), name)
}

// BenchmarkRSS15M: anonymous RSS of the serving process (server and Go
// client in this one process) after opening the 15M-row / 100k-series
// snapshot and after 100k queries (one series each, half with a period
// range), sequentially over loopback.
func BenchmarkRSS15M(b *testing.B) {
	ds := os.Getenv("SERVINGSNAP_BENCH_LAKE")
	if ds == "" {
		if !explicitBench("RSS15M") {
			b.Skip("set SERVINGSNAP_BENCH_LAKE=ROOT/DATASET (a built 15M-row dataset) or run -bench RSS15M to build one")
		}
		dir := b.TempDir()
		lake := filepath.Join(dir, "lake")
		if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 100_000, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		ds = filepath.Join(dir, "root", "SYN")
		if _, err := sortwrite.Build(context.Background(), sortwrite.Options{Input: lake, Out: ds}); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(lake)
	}
	// The root may hold other datasets: serve a root with just this one.
	r := b.TempDir()
	abs, _ := filepath.Abs(ds)
	if err := os.Symlink(abs, filepath.Join(r, filepath.Base(ds))); err != nil {
		b.Fatal(err)
	}
	name := filepath.Base(ds)
	runtime.GC()
	debug.FreeOSMemory()
	base := procStatus(b, "RssAnon")
	srv := startServer(b, Config{Root: r})
	runtime.GC()
	afterOpen := procStatus(b, "RssAnon")
	c := dial(b, srv)
	v := acquireView(srv.svc.datasets[name])
	ids := benchIDs(b, v)
	rows := v.Manifest().Stats.Rows
	v.Release()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	query := func(i int) {
		tk := `{"dataset":"` + name + `","series":["` + ids[i%len(ids)] + `"]`
		if i%2 == 1 {
			y := 2000 + rng.IntN(20)
			tk += fmt.Sprintf(`,"start":"%d","end":"%d"`, y, y+rng.IntN(5))
		}
		if _, err := doGetRows(ctx, c, []byte(tk+"}")); err != nil {
			b.Fatal(err)
		}
	}
	const queries = 100_000
	lat := make([]time.Duration, 0, queries)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		query(i)
		lat = append(lat, time.Since(t0))
		i++
	}
	for ; i < queries; i++ {
		query(i)
	}
	afterQueries := procStatus(b, "RssAnon")
	runtime.GC()
	debug.FreeOSMemory()
	afterGC := procStatus(b, "RssAnon")
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(base, "MiB-anon-before")
	b.ReportMetric(afterOpen, "MiB-anon-open")
	b.ReportMetric(afterQueries, "MiB-anon-100k-queries")
	b.ReportMetric(afterGC, "MiB-anon-after-gc")
	b.ReportMetric(procStatus(b, "RssFile"), "MiB-file")
	percentiles(b, lat)
}

// BenchmarkDoGetDuringFlips: DoGet latency of a 150-row series (10k
// series, 1.5M rows; Go client, server in this process, sequential) in
// steady state and while CURRENT flips between two vintages every 100 ms,
// each flip followed by a reload (open, checksum every file, swap). Reports
// p50/p99 and, for "flipping", the number of swaps during the run. Use
// -benchtime 5s or more so that "flipping" sees dozens of flips.
func BenchmarkDoGetDuringFlips(b *testing.B) {
	dir := b.TempDir()
	lake := filepath.Join(dir, "lake")
	testlake.WriteUniform(b, lake, 10_000, 150)
	root := filepath.Join(dir, "root")
	ds := filepath.Join(root, "B")
	for i := 0; i < 2; i++ { // vintages 1 and 2, same rows
		if _, err := sortwrite.Build(context.Background(), sortwrite.Options{Input: lake, Out: ds, Parallel: runtime.GOMAXPROCS(0)}); err != nil {
			b.Fatal(err)
		}
	}
	srv := startServer(b, Config{Root: root})
	svc := srv.Service()
	c := dial(b, srv)
	ids := testlake.UniformIDs(10_000)
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		doGetRows(ctx, c, []byte(`{"dataset":"B","series":["`+ids[i]+`"]}`))
	}
	mds, err := dsdir.Open(ds)
	if err != nil {
		b.Fatal(err)
	}
	flip := func(to uint64) {
		w, err := mds.LockForWrite()
		if err != nil {
			b.Error(err)
			return
		}
		_, err = w.Rollback(to, dsdir.Change{Tool: "bench", Reason: "flip"})
		w.Close()
		if err != nil {
			b.Error(err)
			return
		}
		if r, err := svc.Reload("B"); err != nil || r[0].Result != ReloadSwapped {
			b.Errorf("reload: %+v %v", r, err)
		}
	}
	for _, mode := range []string{"steady", "flipping"} {
		b.Run(mode, func(b *testing.B) {
			var swaps atomic.Int64
			done := make(chan struct{})
			var wg sync.WaitGroup
			if mode == "flipping" {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t := time.NewTicker(100 * time.Millisecond)
					defer t.Stop()
					for {
						select {
						case <-done:
							return
						case <-t.C:
						}
						to := uint64(1)
						if servedID(svc.datasets["B"]) == 1 {
							to = 2
						}
						flip(to)
						swaps.Add(1)
					}
				}()
			}
			lat := timeDoGets(b, ctx, c, ids)
			close(done)
			wg.Wait()
			percentiles(b, lat)
			if mode == "flipping" {
				b.ReportMetric(float64(swaps.Load()), "flips")
			}
		})
	}
}

// timeDoGets runs one 150-row DoGet of dataset B per benchmark iteration,
// cycling through ids, and returns each call's latency.
func timeDoGets(b *testing.B, ctx context.Context, c flight.Client, ids []string) []time.Duration {
	lat := make([]time.Duration, 0, 1<<16)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		n, err := doGetRows(ctx, c, []byte(`{"dataset":"B","series":["`+ids[i%len(ids)]+`"]}`))
		lat = append(lat, time.Since(t0))
		if err != nil || n != 150 {
			b.Fatalf("%d rows, %v", n, err)
		}
		i++
	}
	return lat
}

// discardStream is a DoGet stream that drops every message: a benchmark
// through it counts only the server's work and allocations.
type discardStream struct {
	flight.FlightService_DoGetServer // nil: only Context and Send are called
	ctx                              context.Context
	msgs                             int
}

func (d *discardStream) Context() context.Context      { return d.ctx }
func (d *discardStream) Send(*flight.FlightData) error { d.msgs++; return nil }

// BenchmarkDoGetServerSide: the Service's DoGet handler for one 150-row
// series of the 100k-series dataset, the stream discarding its messages:
// allocs/op and B/op are the server's alone (ticket, plan, batch, IPC
// encoding), without gRPC or a client.
//
// The batch100 and latest1000 cases are the harness's "100-series batch"
// and "latest values, 1000 series" (answered from the index);
// one-attributes is one series with its attribute columns.
//
// SERVINGSNAP_DOGET_ROOT=ROOT runs it on the one dataset of ROOT instead
// (a seed-scale snapshot, say, or one index version against another).
func BenchmarkDoGetServerSide(b *testing.B) {
	root := os.Getenv("SERVINGSNAP_DOGET_ROOT")
	if root == "" {
		root = benchRoot(b, 100_000, 150)
	}
	svc, ds, ids := benchServiceAt(b, root)
	ticket := func(extra string, sel []string) *flight.Ticket {
		return &flight.Ticket{Ticket: []byte(`{"dataset":"` + ds + `",` + extra + `"series":["` + strings.Join(sel, `","`) + `"]}`)}
	}
	one := make([]*flight.Ticket, 1024)
	for i := range one {
		one[i] = ticket("", ids[i:i+1])
	}
	latest := make([]*flight.Ticket, 64)
	for i := range latest {
		latest[i] = ticket(`"latest":true,`, ids[i*1000:(i+1)*1000])
	}
	batch := make([]*flight.Ticket, 64)
	for i := range batch {
		batch[i] = ticket("", ids[i*100:(i+1)*100])
	}
	withAttrs := make([]*flight.Ticket, len(one))
	for i := range withAttrs {
		withAttrs[i] = ticket(`"attributes":true,`, ids[i:i+1])
	}
	b.Run("one", func(b *testing.B) { benchDoGetTickets(b, svc, one) })
	b.Run("one-attributes", func(b *testing.B) { benchDoGetTickets(b, svc, withAttrs) })
	b.Run("batch100", func(b *testing.B) { benchDoGetTickets(b, svc, batch) })
	b.Run("latest1000", func(b *testing.B) { benchDoGetTickets(b, svc, latest) })
}

func benchDoGetTickets(b *testing.B, svc *Service, tickets []*flight.Ticket) {
	st := &discardStream{ctx: context.Background()}
	for i := range 100 { // warm up pools and caches
		if err := svc.DoGet(tickets[i%len(tickets)], st); err != nil {
			b.Fatal(err)
		}
	}
	st.msgs = 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := svc.DoGet(tickets[i%len(tickets)], st); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(st.msgs)/float64(i), "msgs/op")
}

// benchService opens the 100k-series benchmark root in process (closed
// when the benchmark ends) and returns it with dataset B's series ids.
func benchService(b *testing.B) (*Service, []string) {
	b.Helper()
	svc, _, ids := benchServiceAt(b, benchRoot(b, 100_000, 150))
	return svc, ids
}

// benchServiceAt opens root, which must hold one dataset, in process
// (closed when the benchmark ends) and returns it with the dataset's name
// and its series ids in random order.
func benchServiceAt(b *testing.B, root string) (*Service, string, []string) {
	b.Helper()
	svc, err := Open(root, Options{Limits: DefaultLimits})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	if len(svc.datasets) != 1 {
		b.Fatalf("%s holds %d datasets, want one", root, len(svc.datasets))
	}
	for name, d := range svc.datasets {
		v := acquireView(d)
		defer v.Release()
		return svc, name, benchIDs(b, v)
	}
	panic("unreachable")
}
