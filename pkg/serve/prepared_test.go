package serve

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/sqlq"
)

// likeStatement is prepared by the tests below: its one parameter is a
// prefix, so a large one binds and executes (and matches nothing).
const likeStatement = "SELECT value FROM MIX WHERE series_id LIKE ?"

// prepareBound prepares likeStatement on c, binds param and executes it
// (GetFlightInfo), returning the handle; the parameters are not kept on
// the client side.
func prepareBound(ctx context.Context, c *flightsql.Client, param string) ([]byte, error) {
	ps, err := c.Prepare(ctx, likeStatement)
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{{Name: "p1", Type: arrow.BinaryTypes.String}}, nil))
	b.Field(0).(*array.StringBuilder).Append(param)
	rec := b.NewRecordBatch()
	b.Release()
	ps.SetParameters(rec)
	rec.Release()
	_, err = ps.Execute(ctx)
	ps.SetParameters(nil)
	return ps.Handle(), err
}

// useHandle executes prepared statement h from client c (as a client that
// kept the handle would).
func useHandle(ctx context.Context, c *flightsql.Client, h []byte) error {
	ps, err := c.LoadPreparedStatementFromResult(&flightsql.CreatePreparedStatementResult{PreparedStatementHandle: h})
	if err != nil {
		return err
	}
	_, err = ps.Execute(ctx)
	return err
}

// heapInuse is the process's heap in use after a collection.
func heapInuse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// waitReleased waits until the store holds want bytes (a closed
// connection's ConnEnd reaches the server asynchronously).
func waitReleased(t *testing.T, st *preparedStore, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		total, _, _, _ := st.usage(nil)
		if total == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prepared statements still hold %d bytes after 10 s, want %d", total, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPreparedStatementsBounded: one client preparing 1,000 statements
// with 256 KiB parameters and closing none stays within its connection's
// budget (the rest are ResourceExhausted naming the flag); a second
// client then meets the server's budget; the first client's statements
// are released when its connection closes (the budget is free again, its
// handles NotFound), and the server's heap comes back near where it
// started.
func TestPreparedStatementsBounded(t *testing.T) {
	const (
		perClient = 64 << 20
		total     = 96 << 20
		attempts  = 1000
		param     = 256 << 10
	)
	lim := DefaultLimits
	lim.MaxPreparedBytes, lim.MaxPreparedBytesPerClient, lim.PreparedTTL = total, perClient, 0
	srv := startServer(t, Config{Options: Options{Limits: lim}})
	st := srv.mux.sqlSrv.prepared
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := srv.FlightAddr().String()
	big := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), param-1) + "%" }

	// warm up: connections, the plan path, the allocator's pools
	warm := dialSQL(t, addr)
	if _, err := prepareBound(ctx, warm, "X%"); err != nil {
		t.Fatal(err)
	}
	warm.Close()
	waitReleased(t, st, 0)
	before := heapInuse()

	// phase 1: 1,000 from one client, none closed
	a := dialSQL(t, addr)
	var handles [][]byte
	refused := 0
	for i := range attempts {
		h, err := prepareBound(ctx, a, big(i))
		switch {
		case err == nil:
			handles = append(handles, h)
		case status.Code(err) == codes.ResourceExhausted:
			refused++
			if !strings.Contains(err.Error(), "--max-prepared-bytes-per-client") {
				t.Fatalf("statement %d: refusal does not name the flag: %v", i, err)
			}
		default:
			t.Fatalf("statement %d: %v", i, err)
		}
	}
	held, open, _, _ := st.usage(nil)
	during := heapInuse()
	t.Logf("one client: %d of %d bound, %d refused; %d statements hold %.1f MiB; heap in use %.1f → %.1f MiB",
		len(handles), attempts, refused, open, float64(held)/(1<<20), float64(before)/(1<<20), float64(during)/(1<<20))
	if held > perClient || held < perClient-2*param {
		t.Errorf("one client's statements hold %d bytes, want the budget %d filled and not exceeded", held, perClient)
	}
	if want := perClient / param; len(handles) < want*9/10 || len(handles) > want || refused == 0 {
		t.Errorf("%d bound and %d refused, want about %d bound", len(handles), refused, want)
	}
	if n := counterValue(t, srv.metrics, "servingsnap_prepared_refused_total", "connection"); n != float64(refused) {
		t.Errorf("servingsnap_prepared_refused_total{limit=\"connection\"} %v, %d refused", n, refused)
	}
	if grown := during - before; grown < perClient*3/4 || grown > perClient+32<<20 {
		t.Errorf("heap in use grew by %.1f MiB holding %.1f MiB of statements", float64(grown)/(1<<20), float64(held)/(1<<20))
	}

	// phase 2: a second client meets the server's budget; the first's
	// handles are not its own
	b := dialSQL(t, addr)
	var bRefused error
	for i := range attempts {
		if _, err := prepareBound(ctx, b, big(i)); err != nil {
			bRefused = err
			break
		}
	}
	if status.Code(bRefused) != codes.ResourceExhausted || !strings.Contains(bRefused.Error(), "(--max-prepared-bytes)") {
		t.Errorf("second client: %v, want ResourceExhausted naming --max-prepared-bytes", bRefused)
	}
	if all, _, _, _ := st.usage(nil); all > total {
		t.Errorf("all statements hold %d bytes, over the budget %d", all, total)
	}
	if err := useHandle(ctx, b, handles[0]); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "another connection") {
		t.Errorf("another connection's handle: %v, want NotFound", err)
	}
	if err := useHandle(ctx, a, handles[0]); err != nil {
		t.Errorf("the handle on its own connection: %v", err)
	}

	// phase 3: the first client goes; its budget is free again
	bHeld, _, _, _ := st.usage(nil)
	bHeld -= held
	a.Close()
	waitReleased(t, st, bHeld)
	if n := counterValue(t, srv.metrics, "servingsnap_prepared_released_total", "disconnect"); n != float64(open+1) { // and the warm-up's
		t.Errorf("servingsnap_prepared_released_total{reason=\"disconnect\"} %v, want %d", n, open+1)
	}
	c := dialSQL(t, addr)
	for i := range perClient / param / 2 {
		if _, err := prepareBound(ctx, c, big(i)); err != nil {
			t.Fatalf("a new client after the first closed, statement %d: %v", i, err)
		}
	}
	if err := useHandle(ctx, c, handles[1]); status.Code(err) != codes.NotFound {
		t.Errorf("a handle of a closed connection: %v, want NotFound", err)
	}

	// phase 4: everyone goes; the heap comes back
	b.Close()
	c.Close()
	waitReleased(t, st, 0)
	handles = nil
	after := heapInuse()
	t.Logf("heap in use after the clients closed: %.1f MiB (%.1f MiB at the start)", float64(after)/(1<<20), float64(before)/(1<<20))
	if after > before+32<<20 {
		t.Errorf("heap in use %.1f MiB after the clients closed, %.1f MiB before they came", float64(after)/(1<<20), float64(before)/(1<<20))
	}
}

// TestPreparedTTL: a statement unused for the TTL is released (its handle
// NotFound); one in use stays; the sweep stops when none is left.
func TestPreparedTTL(t *testing.T) {
	const ttl = time.Second
	lim := DefaultLimits
	lim.PreparedTTL = ttl
	srv := startServer(t, Config{Options: Options{Limits: lim}})
	st := srv.mux.sqlSrv.prepared
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	idle, err := prepareBound(ctx, c, "A.%")
	if err != nil {
		t.Fatal(err)
	}
	used, err := prepareBound(ctx, c, "B.%")
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * ttl / 2); time.Now().Before(end); time.Sleep(ttl / 10) {
		if err := useHandle(ctx, c, used); err != nil {
			t.Fatalf("a statement in use: %v", err)
		}
	}
	if err := useHandle(ctx, c, idle); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "released after 1s unused") {
		t.Errorf("a statement idle for %s: %v, want NotFound", 5*ttl/2, err)
	}
	if _, open, _, _ := st.usage(nil); open != 1 {
		t.Errorf("%d statements open, want the one in use", open)
	}
	waitReleased(t, st, 0)
	st.mu.Lock()
	sweeping := st.sweep != nil
	st.mu.Unlock()
	if sweeping {
		t.Errorf("a sweep is still scheduled with no statement open")
	}
	if n := counterValue(t, srv.metrics, "servingsnap_prepared_released_total", "idle"); n != 2 {
		t.Errorf("servingsnap_prepared_released_total{reason=\"idle\"} %v, want 2", n)
	}
}

// TestPreparedStoreRefusals: the store's own refusals, without a server:
// the count per connection, a bind over the budget (the old parameters
// stay), a connection that ended, a shut-down store.
func TestPreparedStoreRefusals(t *testing.T) {
	st := newPreparedStore(Limits{MaxPreparedBytesPerClient: 64 << 20})
	ctx := context.Background()
	parsed, err := sqlq.Parse("SELECT * FROM MIX")
	if err != nil {
		t.Fatal(err)
	}
	stmt := func() (string, error) { return st.add(ctx, "SELECT * FROM MIX", parsed) }
	for range maxPrepared {
		if _, err := stmt(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stmt(); status.Code(toStatus(err)) != codes.ResourceExhausted || !strings.Contains(err.Error(), "4096 open prepared statements") {
		t.Errorf("statement %d: %v, want ResourceExhausted naming the count", maxPrepared+1, err)
	}
	st = newPreparedStore(Limits{MaxPreparedBytesPerClient: 1 << 20})
	h, err := stmt()
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.lookup(ctx, []byte(h))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.bind(p, []string{"small"}); err != nil {
		t.Fatal(err)
	}
	if err := st.bind(p, []string{strings.Repeat("x", 1<<20)}); status.Code(toStatus(err)) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-prepared-bytes-per-client") {
		t.Errorf("a bind over the budget: %v", err)
	}
	if got := st.params(p); len(got) != 1 || got[0] != "small" {
		t.Errorf("after a refused bind the parameters are %q, want the old ones", got)
	}
	conn := &clientConn{id: 1}
	conn.ended.Store(true)
	if _, err := st.add(context.WithValue(ctx, connKey{}, conn), "SELECT * FROM MIX", parsed); status.Code(toStatus(err)) != codes.Unavailable {
		t.Errorf("a statement for an ended connection: %v, want Unavailable", err)
	}
	st.shutdown()
	if total, open, _, _ := st.usage(nil); total != 0 || open != 0 {
		t.Errorf("after shutdown: %d bytes, %d statements", total, open)
	}
	if _, err := stmt(); status.Code(toStatus(err)) != codes.Unavailable {
		t.Errorf("a statement after shutdown: %v, want Unavailable", err)
	}
}
