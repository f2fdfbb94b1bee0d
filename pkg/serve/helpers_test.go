package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/energyscope/servingsnap/internal/gctune"
	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

var (
	fixtureOnce sync.Once
	fixtureRoot string
	fixtureDir  string
)

func TestMain(m *testing.M) {
	if r := os.Getenv(helperEnv); r != "" {
		os.Exit(helperServer(r))
	}
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	testsnap.RemoveUniform()
	os.Exit(code)
}

// root returns a shared, read-only root with two datasets:
//
//   - SYN: the synthetic lake, 200 series 2015–2024, batches of ≤ 5000 rows
//     (so series sit in several batches);
//   - MIX: hand-written rows with a varying string column (note), nulls in
//     values (a series all null, one whose last rows are null), a null
//     attribute and a category attribute.
func root(t testing.TB) string {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "serve-test-")
		if err != nil {
			t.Fatal(err)
		}
		fixtureDir = dir
		fixtureRoot = filepath.Join(dir, "root")
		testsnap.Sample(t, fixtureRoot, "SYN", 200, 3, func(o *sortwrite.Options) { o.BatchRows = 5000 })
		lake := filepath.Join(dir, "lake-MIX")
		writeMixLake(t, lake)
		testsnap.Build(t, lake, filepath.Join(fixtureRoot, "MIX"), func(o *sortwrite.Options) { o.BatchRows = 7 })
	})
	if fixtureRoot == "" {
		t.Fatal("fixture build failed earlier")
	}
	return fixtureRoot
}

func writeMixLake(t testing.TB, dir string) {
	type s struct {
		id       string
		units    any
		category string
		n        int
		nullFrom int // values from this row on are null (n: none)
	}
	series := []s{
		{"A.ONE", "USD", "Crude", 1, 1},
		{"A.TWO", "USD", "Crude", 12, 12},
		{"B.NULLTAIL", "EUR", "Gas", 10, 7},
		{"B.ALLNULL", "EUR", "Gas", 5, 0},
		{"C.NOUNITS", nil, "Gas", 9, 9},
		{"C.LONG", "MWh", "Power", 40, 40},
	}
	var ids, periods, notes, units, cats []any
	var vals []any
	for _, x := range series {
		for i := 0; i < x.n; i++ {
			ids = append(ids, x.id)
			periods = append(periods, fmt.Sprintf("%04d-%02d", 2018+i/12, 1+i%12))
			if i >= x.nullFrom {
				vals = append(vals, nil)
			} else {
				vals = append(vals, float64(i)+0.5)
			}
			notes = append(notes, fmt.Sprintf("note %s %d", x.id, i))
			units = append(units, x.units)
			cats = append(cats, x.category)
		}
	}
	testlake.WriteParquet(t, dir, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids},
		testlake.Col{Name: "period", Vals: periods},
		testlake.Col{Name: "value", Vals: vals, Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "note", Vals: notes},
		testlake.Col{Name: "units", Vals: units, Typ: arrow.BinaryTypes.String},
		testlake.Col{Name: "category", Vals: cats},
	)
}

// helperEnv makes the test binary a plain server (for benchmarks that want
// the server in its own process, as in production): it serves the root the
// variable names on 127.0.0.1:0, prints the address on stdout and stops
// when stdin closes.
const helperEnv = "SERVINGSNAP_SERVE_HELPER"

func helperServer(root string) int {
	if os.Getenv(helperEnv+"_FLOOR") != "" {
		return floorServe()
	}
	cfg := Config{Root: root, Addr: "127.0.0.1:0", Options: Options{Limits: DefaultLimits}}
	// the fault suite's knobs (fault_test.go): a reload interval, an HTTP
	// listener (its address is a second line on stdout)
	if d, err := time.ParseDuration(os.Getenv(helperEnv + "_RELOAD")); err == nil {
		cfg.ReloadInterval = d
	}
	if os.Getenv(helperEnv+"_HTTP") != "" {
		cfg.HTTPAddr = "127.0.0.1:0"
	}
	if d, err := time.ParseDuration(os.Getenv(helperEnv + "_STREAM_TIMEOUT")); err == nil {
		cfg.Limits.StreamTimeout = d
	}
	if d, err := time.ParseDuration(os.Getenv(helperEnv + "_LEASE_TIMEOUT")); err == nil {
		cfg.Limits.LeaseTimeout = d
	}
	if n, err := strconv.Atoi(os.Getenv(helperEnv + "_WINDOW")); err == nil {
		cfg.WindowBytes = n
	}
	if n, err := strconv.ParseInt(os.Getenv(helperEnv+"_INFLIGHT"), 10, 64); err == nil {
		cfg.Limits.MaxInFlightBytes = n
	}
	if n, err := strconv.ParseInt(os.Getenv(helperEnv+"_COMPACT_ROWS"), 10, 64); err == nil {
		cfg.Compact.Rows = n // --compact-rows
	}
	// a replica (replica_bench_test.go): --read-only, --follow-interval
	cfg.ReadOnly = os.Getenv(helperEnv+"_READ_ONLY") != ""
	if d, err := time.ParseDuration(os.Getenv(helperEnv + "_FOLLOW")); err == nil {
		cfg.FollowInterval = d
	}
	// the collector as `serve` sets it (--gc-headroom, --gc-read-headroom;
	// _GC_HEADROOM=0 for the runtime's own)
	headroom, read := int64(gctune.DefaultHeadroom), int64(gctune.DefaultReadHeadroom)
	if n, err := strconv.ParseInt(os.Getenv(helperEnv+"_GC_HEADROOM"), 10, 64); err == nil {
		headroom, read = n, n
	}
	defer gctune.Start(headroom, read).Stop()
	// a CPU profile of the server process alone (the ingest benchmarks'
	// -cpuprofile would be the client's): SERVINGSNAP_SERVE_HELPER_CPUPROFILE=path
	if path := os.Getenv(helperEnv + "_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv(helperEnv + "_TRACE"); path != "" {
		t, err := newFileTrace(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		putTrace = t
	}
	srv, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	fmt.Println(srv.FlightAddr().String())
	if a := srv.HTTPAddr(); a != nil {
		fmt.Println(a.String())
	}
	if err := srv.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startHelper runs the test binary as a server process on root and
// returns its address.
func startHelper(t testing.TB, root string) string {
	t.Helper()
	addr, _ := startHelperPID(t, root)
	return addr
}

func dialAddr(t testing.TB, addr string) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startServer runs a Server on loopback for the test.
// stoppableServer starts a server on cfg.Addr (default: any loopback
// port) that stops at the test's end, or earlier when the test calls stop.
func stoppableServer(t testing.TB, cfg Config) (*Server, func()) {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = root(t)
	}
	srv, _ := stoppableServer(t, cfg)
	return srv
}

func dial(t testing.TB, srv *Server, opts ...grpc.DialOption) flight.Client {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	c, err := flight.NewClientWithMiddleware(srv.FlightAddr().String(), nil, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// result is a DoGet answer decoded into Go values.
type result struct {
	schema  *arrow.Schema
	batches int
	ids     []string
	periods []int32
	values  []*float64 // value column if present
	cols    map[string][]any
}

func ticket(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// get runs DoGet and decodes every batch (dictionaries decoded).
func get(ctx context.Context, c flight.Client, tk []byte) (*result, error) {
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: tk})
	if err != nil {
		return nil, err
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	r := &result{schema: rd.Schema(), cols: map[string][]any{}}
	for rd.Next() {
		rec := rd.RecordBatch()
		r.batches++
		sc := rec.Schema()
		for i := 0; i < int(rec.NumCols()); i++ {
			name := sc.Field(i).Name
			col := rec.Column(i)
			for j := 0; j < col.Len(); j++ {
				v := value(col, j)
				switch name {
				case "series_id":
					r.ids = append(r.ids, v.(string))
				case "period":
					r.periods = append(r.periods, int32(v.(arrow.Date32)))
				case "value":
					if v == nil {
						r.values = append(r.values, nil)
					} else {
						f := v.(float64)
						r.values = append(r.values, &f)
					}
				}
				r.cols[name] = append(r.cols[name], v)
			}
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	return r, nil
}

// value is element j of col as a Go value, dictionaries decoded, nil for null.
func value(col arrow.Array, j int) any {
	if col.IsNull(j) {
		return nil
	}
	switch a := col.(type) {
	case *array.Dictionary:
		return value(a.Dictionary(), a.GetValueIndex(j))
	case *array.String:
		return strings.Clone(a.Value(j)) // may alias a mapping that is unmapped later
	case *array.Float64:
		return a.Value(j)
	case *array.Date32:
		return a.Value(j)
	case *array.Int64:
		return a.Value(j)
	case *array.Int32:
		return a.Value(j)
	case *array.Uint32:
		return a.Value(j)
	}
	return col.ValueStr(j)
}

// acquireView is d's live view, which the caller must Release; nil once d
// is closed or failing.
func acquireView(d *served.Dataset) *served.View {
	v, err := d.Acquire()
	if err != nil {
		return nil
	}
	return v
}

// servedID is the id of the snapshot d serves (0: closed).
func servedID(d *served.Dataset) uint64 {
	st, _ := d.Status()
	return st.SnapshotID
}

// dsStatus is d's status (the zero value once closed).
func dsStatus(d *served.Dataset) served.DatasetStatus {
	st, _ := d.Status()
	return st
}
