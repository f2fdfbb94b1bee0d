package serve

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
)

// TestDoGetReleasesEverything: every buffer an answer allocates comes from
// the service's allocator and is released when the stream ends, for every
// kind of ticket (slices, coalesced copies, dictionaries sent whole and in
// deltas, answers from the index, gathers, limits, errors half-way). The
// small batch budget forces splitting and coalescing.
func TestDoGetReleasesEverything(t *testing.T) {
	count := &countingAllocator{Allocator: memory.NewGoAllocator()}
	mem := memory.NewCheckedAllocator(count)
	counted := count.n.Load
	lim := DefaultLimits
	lim.BatchBytes = 2048
	srv := startServer(t, Config{Options: Options{Allocator: mem, Limits: lim}})
	c := dial(t, srv)
	ctx := context.Background()
	v := acquireView(srv.svc.datasets["SYN"])
	syn := func(i int) string { return v.Snapshot().Index().SeriesID(i) }
	defer v.Release()
	tickets := []struct {
		name string
		q    map[string]any
	}{
		{"one series", map[string]any{"dataset": "SYN", "series": []string{syn(3)}}},
		{"several, not adjacent", map[string]any{"dataset": "SYN", "series": []string{syn(1), syn(7), syn(150)}}},
		{"whole dataset", map[string]any{"dataset": "SYN", "prefix": ""}},
		{"prefix with range", map[string]any{"dataset": "SYN", "prefix": "", "start": "2019", "end": "2020-06"}},
		{"category", map[string]any{"dataset": "MIX", "category": "Gas", "attributes": true}},
		{"category, list of codes", map[string]any{"dataset": "MIX", "category": "Crude", "attributes": true, "columns": []string{"note"}}},
		{"attributes, list", map[string]any{"dataset": "MIX", "series": []string{"A.ONE", "C.LONG"}, "attributes": true}},
		{"latest from the index", map[string]any{"dataset": "MIX", "prefix": "", "latest": true, "attributes": true}},
		{"latest from the index, list", map[string]any{"dataset": "MIX", "series": []string{"A.ONE", "C.LONG"}, "latest": true}},
		{"latest in a range", map[string]any{"dataset": "MIX", "prefix": "", "latest": true, "end": "2018-06"}},
		{"latest with a varying column", map[string]any{"dataset": "MIX", "prefix": "", "latest": true, "columns": []string{"value", "note"}}},
		{"limit", map[string]any{"dataset": "SYN", "prefix": "", "limit": 1001}},
		{"no columns", map[string]any{"dataset": "MIX", "prefix": "", "columns": []string{}}},
	}
	for _, tc := range tickets {
		t.Run(tc.name, func(t *testing.T) {
			before := counted()
			r, err := get(ctx, c, ticket(tc.q))
			if err != nil {
				t.Fatal(err)
			}
			if len(r.ids) == 0 {
				t.Fatal("no rows")
			}
			if lim, ok := tc.q["limit"]; ok && len(r.ids) != lim.(int) {
				t.Errorf("%d rows, limit %d", len(r.ids), lim)
			}
			if counted() == before { // else the check below proves nothing
				t.Error("the answer allocated nothing from the service's allocator")
			}
			if _, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: ticket(tc.q)}); err != nil {
				t.Fatal(err)
			}
			mem.AssertSize(t, 0)
		})
	}
	// A client that goes away half-way through a large answer.
	cctx, cancel := context.WithCancel(ctx)
	stream, err := c.DoGet(cctx, &flight.Ticket{Ticket: ticket(map[string]any{"dataset": "SYN", "prefix": ""})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	if !waitFor(5*time.Second, func() bool { return mem.CurrentAlloc() == 0 }) {
		mem.AssertSize(t, 0)
	}
}

// countingAllocator counts allocations, so the test knows the checked
// allocator saw the answer's buffers.
type countingAllocator struct {
	memory.Allocator
	n atomic.Int64
}

func (a *countingAllocator) Allocate(size int) []byte {
	a.n.Add(1)
	return a.Allocator.Allocate(size)
}

// TestListFlightsTicketStreamsEveryRow: the ticket ListFlights advertises
// for a dataset streams the whole dataset with the default limits, past
// --max-series (100,000): 150,000 series of 2 rows.
func TestListFlightsTicketStreamsEveryRow(t *testing.T) {
	const series, rows = 150_000, 2
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	testlake.WriteUniform(t, lake, series, rows)
	root := filepath.Join(dir, "root")
	testsnap.Build(t, lake, filepath.Join(root, "BIG"), nil)
	srv := startServer(t, Config{Root: root})
	c := dial(t, srv)
	ctx := context.Background()
	lf, err := c.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := lf.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if info.TotalRecords != series*rows || len(info.Endpoint) != 1 {
		t.Fatalf("FlightInfo: %d records, %d endpoints", info.TotalRecords, len(info.Endpoint))
	}
	stream, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var n int64
	distinct, last := 0, ""
	for rd.Next() {
		rec := rd.RecordBatch()
		n += rec.NumRows()
		ids := rec.Column(0).(*array.Dictionary)
		dict := ids.Dictionary().(*array.String)
		for i := 0; i < ids.Len(); i++ {
			if id := dict.Value(ids.GetValueIndex(i)); id != last {
				if id < last {
					t.Fatalf("series %q after %q: not in id order", id, last)
				}
				distinct, last = distinct+1, id
			}
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	if n != series*rows || distinct != series {
		t.Fatalf("%d rows of %d series, want %d of %d", n, distinct, series*rows, series)
	}
}

// maxOneSeriesAllocs bounds the heap allocations of the server side of a
// one-series DoGet (ticket, plan, batch, IPC encoding; issue 41's goal).
const maxOneSeriesAllocs = 50

// TestDoGetOneSeriesAllocs: a one-series DoGet of a flat answer allocates
// at most maxOneSeriesAllocs objects, sends its three messages (schema,
// dictionary, batch), and returns every buffer to the service's checked
// allocator.
func TestDoGetOneSeriesAllocs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	svc, err := Open(testsnap.Uniform(t, 1000, 150), Options{Limits: DefaultLimits, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	v := acquireView(svc.datasets["B"])
	tickets := make([]*flight.Ticket, 64)
	for i := range tickets {
		tickets[i] = &flight.Ticket{Ticket: []byte(`{"dataset":"B","series":["` + v.Snapshot().Index().SeriesID(i*7) + `"]}`)}
	}
	v.Release()
	st := &discardStream{ctx: context.Background()}
	i := 0
	allocs := testing.AllocsPerRun(500, func() {
		if err := svc.DoGet(tickets[i%len(tickets)], st); err != nil {
			t.Fatal(err)
		}
		i++
	})
	t.Logf("%.1f allocations a DoGet", allocs)
	if allocs > maxOneSeriesAllocs {
		t.Errorf("one-series DoGet: %.1f allocations, want at most %d", allocs, maxOneSeriesAllocs)
	}
	if st.msgs != 3*i {
		t.Errorf("%d messages for %d DoGets, want 3 each", st.msgs, i)
	}
	mem.AssertSize(t, 0)
}
