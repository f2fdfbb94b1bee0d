// Command gobaseline is the Go rebuild-at-start baseline of the benchmark
// harness (bench/harness.py): a Flight server that does at every start what
// servingsnap does once, offline, and then serves from memory.
//
// It is the strongest rebuild this project's code allows, so that the
// benchmark measures the design (map a prepared snapshot against rebuild
// at start), not a slow rebuild: the lake is read, interned and
// radix-sorted by the builder's own code (sortwrite.Rebuild: the same
// parallel pqarrow read, string interning, packed-key radix sort and
// duplicate rule as `snapbuild build`, without the write), attributes are
// kept once per series, and DoGet answers with zero-copy slices of the
// sorted columns (one batch per run of adjacent selected series) over
// arrow-go Flight with the gRPC options and IPC writer options of
// pkg/serve. What it lacks against servingsnap is only what the design
// gives: the prepared files, so it reads, sorts and holds everything in
// its heap at every start.
//
//	gobaseline --lake LAKE --dataset NAME --addr 127.0.0.1:PORT
//
// Once the index is built it binds the address and prints one JSON line
// {"event": "listening", "flight": ..., "startup_ms": ...} to stdout;
// startup_ms counts from the process's own start (Go runtime init
// included, read from /proc/self/stat).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// The gRPC limits and options of pkg/serve (server.go), repeated here
// because they are unexported there.
const (
	recvMsgBytes = 4 << 20
	sendMsgBytes = 256 << 20
	maxBatchRows = 1 << 17 // rows per response batch, about pkg/serve's 4 MiB budget at 20 bytes a row
)

// dataset is what the server answers from: the rebuilt lake.
type dataset struct {
	name   string
	r      *sortwrite.Rebuilt
	byID   map[string]int32
	period *array.Date32
	value  *array.Float64
	cat    []string // per series: the category attribute, if any
}

func main() {
	lake := flag.String("lake", "", "lake directory (Parquet files, hive year partitions)")
	name := flag.String("dataset", "bench", "dataset name tickets must use")
	addr := flag.String("addr", "127.0.0.1:8816", "listen address HOST:PORT")
	flag.Parse()
	if *lake == "" {
		fmt.Fprintln(os.Stderr, "gobaseline: --lake is required")
		os.Exit(2)
	}
	ds, err := load(*lake, *name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobaseline:", err)
		os.Exit(1)
	}
	srv := flight.NewServerWithMiddleware(nil,
		grpc.MaxRecvMsgSize(recvMsgBytes),
		grpc.MaxSendMsgSize(sendMsgBytes),
		grpc.NumStreamWorkers(uint32(4*runtime.GOMAXPROCS(0))),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	if err := srv.Init(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "gobaseline:", err)
		os.Exit(1)
	}
	srv.RegisterFlightService(&service{ds: ds, mem: memory.DefaultAllocator})
	srv.SetShutdownOnSignals(syscall.SIGTERM, os.Interrupt)
	ev, _ := json.Marshal(map[string]any{
		"event": "listening", "flight": "grpc+tcp://" + srv.Addr().String(),
		"startup_ms": sinceProcessStart(), "rows": ds.r.Rows, "series": len(ds.r.IDs),
	})
	fmt.Println(string(ev))
	if err := srv.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, "gobaseline:", err)
		os.Exit(1)
	}
}

// sinceProcessStart is the milliseconds since the kernel started this
// process (field 22 of /proc/self/stat, in clock ticks of 1/100 s on
// Linux), so runtime init counts; it falls back to 0 where /proc is absent.
func sinceProcessStart() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	up, err2 := os.ReadFile("/proc/uptime")
	if len(f) < 20 || err2 != nil {
		return 0
	}
	ticks, _ := strconv.ParseFloat(f[19], 64) // field 22 overall; fields here start at 3
	upS, _ := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	return math.Round((upS-ticks/100)*1e5) / 100
}

// load rebuilds the lake with the builder's code and wraps the columns.
func load(lake, name string) (*dataset, error) {
	r, err := sortwrite.Rebuild(context.Background(), sortwrite.Options{Input: lake, OnDuplicate: sortwrite.OnDuplicateLast})
	if err != nil {
		return nil, err
	}
	val, ok := r.Value.(*array.Float64)
	if !ok {
		return nil, fmt.Errorf("value column is %s; the baseline serves float64", r.Value.DataType())
	}
	pd := array.NewData(arrow.FixedWidthTypes.Date32, r.Rows,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(r.Period))}, nil, 0, 0)
	ds := &dataset{name: name, r: r, value: val, period: array.NewDate32Data(pd), byID: make(map[string]int32, len(r.IDs))}
	for i, id := range r.IDs {
		ds.byID[id] = int32(i)
	}
	for k, a := range r.Attr {
		if a != "category" {
			continue
		}
		s, ok := r.Attrs[k].(*array.String)
		if !ok {
			return nil, fmt.Errorf("category attribute is %s", r.Attrs[k].DataType())
		}
		ds.cat = make([]string, s.Len())
		for i := range ds.cat {
			ds.cat[i] = s.Value(i)
		}
	}
	runtime.GC()
	debug.FreeOSMemory()
	return ds, nil
}

func (ds *dataset) end(c int32) int {
	if int(c)+1 < len(ds.r.Start) {
		return ds.r.Start[c+1]
	}
	return ds.r.Rows
}

// ---- Flight service ----

var idType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

type service struct {
	flight.BaseFlightServer
	ds  *dataset
	mem memory.Allocator
}

type ticket struct {
	Dataset  string   `json:"dataset"`
	Series   []string `json:"series"`
	Prefix   *string  `json:"prefix"`
	Category *string  `json:"category"`
	Start    string   `json:"start"`
	End      string   `json:"end"`
	Columns  []string `json:"columns"`
	Latest   bool     `json:"latest"`
}

func schemaFor(withValue bool) *arrow.Schema {
	f := []arrow.Field{{Name: "series_id", Type: idType}, {Name: "period", Type: arrow.FixedWidthTypes.Date32}}
	if withValue {
		f = append(f, arrow.Field{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	return arrow.NewSchema(f, nil)
}

func (s *service) ListFlights(_ *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	return stream.Send(&flight.FlightInfo{
		Schema:           flight.SerializeSchema(schemaFor(true), s.mem),
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{s.ds.name}},
		TotalRecords:     int64(s.ds.r.Rows),
		TotalBytes:       -1,
	})
}

// inCategory is pkg/serve's category rule: the value is the category or
// continues it after a '/'.
func inCategory(v, cat string) bool {
	cat = strings.TrimSuffix(cat, "/")
	return v == cat || strings.HasPrefix(v, cat+"/")
}

func (s *service) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	var q ticket
	if err := json.Unmarshal(tkt.GetTicket(), &q); err != nil {
		return status.Errorf(codes.InvalidArgument, "ticket: %v", err)
	}
	ds := s.ds
	if q.Dataset != ds.name {
		return status.Errorf(codes.NotFound, "no dataset %q", q.Dataset)
	}
	from, to := int32(math.MinInt32), int32(math.MaxInt32)
	var err error
	if q.Start != "" {
		if from, err = period.Parse(q.Start); err != nil {
			return status.Errorf(codes.InvalidArgument, "start: %v", err)
		}
	}
	if q.End != "" {
		if to, err = period.End(q.End); err != nil {
			return status.Errorf(codes.InvalidArgument, "end: %v", err)
		}
	}
	withValue := len(q.Columns) == 0 || slices.Contains(q.Columns, "value")

	// resolve the selection to sorted, distinct series codes
	var sel []int32
	switch {
	case q.Prefix != nil:
		lo := sort.SearchStrings(ds.r.IDs, *q.Prefix)
		for c := lo; c < len(ds.r.IDs) && strings.HasPrefix(ds.r.IDs[c], *q.Prefix); c++ {
			sel = append(sel, int32(c))
		}
	case q.Category != nil:
		for c, v := range ds.cat {
			if inCategory(v, *q.Category) {
				sel = append(sel, int32(c))
			}
		}
	default:
		for _, id := range q.Series {
			c, ok := ds.byID[id]
			if !ok {
				return status.Errorf(codes.NotFound, "unknown series %q", id)
			}
			sel = append(sel, c)
		}
		slices.Sort(sel)
		sel = slices.Compact(sel)
	}

	schema := schemaFor(withValue)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(s.mem), ipc.WithDictionaryDeltas(true))
	defer w.Close()
	dictB := array.NewStringBuilder(s.mem)
	for _, c := range sel {
		dictB.Append(ds.r.IDs[c])
	}
	dict := dictB.NewArray()
	dictB.Release()
	defer dict.Release()

	write := func(idx arrow.Array, cols ...arrow.Array) error {
		ids := array.NewDictionaryArray(idType, idx, dict)
		all := append([]arrow.Array{ids}, cols...)
		if !withValue {
			all = all[:2]
		}
		rec := array.NewRecordBatch(schema, all, int64(idx.Len()))
		err := w.Write(rec)
		rec.Release()
		ids.Release()
		return err
	}
	pers := ds.period.Date32Values()
	// bounds of series c's rows inside [from, to]
	bounds := func(c int32) (int, int) {
		lo, hi := ds.r.Start[c], ds.end(c)
		p := pers[lo:hi]
		a := lo + sort.Search(len(p), func(i int) bool { return int32(p[i]) >= from })
		b := lo + sort.Search(len(p), func(i int) bool { return int32(p[i]) > to })
		return a, b
	}

	if q.Latest {
		// One batch: the last non-null row in range per series, from the
		// index when the series' latest value lies inside the range.
		idxB := array.NewInt32Builder(s.mem)
		perB := array.NewDate32Builder(s.mem)
		valB := array.NewFloat64Builder(s.mem)
		defer idxB.Release()
		defer perB.Release()
		defer valB.Release()
		for k, c := range sel {
			lr := ds.r.LatestRow[c]
			if lr < 0 {
				continue
			}
			row := -1
			if p := int32(pers[lr]); p <= to {
				if p >= from {
					row = lr
				}
			} else {
				a, b := bounds(c)
				for i := b - 1; i >= a; i-- {
					if ds.value.IsValid(i) {
						row = i
						break
					}
				}
			}
			if row >= 0 {
				idxB.Append(int32(k))
				perB.Append(pers[row])
				valB.Append(ds.value.Value(row))
			}
		}
		if idxB.Len() == 0 {
			return nil
		}
		idx, per, val := idxB.NewArray(), perB.NewArray(), valB.NewArray()
		defer idx.Release()
		defer per.Release()
		defer val.Release()
		return write(idx, per, val)
	}

	// Rows: zero-copy slices of the sorted columns, one batch per run of
	// selected series whose rows are adjacent (a prefix is one run), cut
	// at maxBatchRows; only the dictionary indices are built per answer.
	var idx []int32
	runA, runB := -1, -1
	flush := func() error {
		if runA < 0 || runB <= runA {
			runA, runB = -1, -1
			idx = idx[:0]
			return nil
		}
		ia := array.NewInt32Data(array.NewData(arrow.PrimitiveTypes.Int32, len(idx),
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(idx))}, nil, 0, 0))
		per := array.NewSlice(ds.period, int64(runA), int64(runB))
		val := array.NewSlice(ds.value, int64(runA), int64(runB))
		err := write(ia, per, val)
		ia.Release()
		per.Release()
		val.Release()
		runA, runB = -1, -1
		idx = idx[:0]
		return err
	}
	for k, c := range sel {
		a, b := bounds(c)
		for a < b {
			if runA >= 0 && (a != runB || runB-runA >= maxBatchRows) {
				if err := flush(); err != nil {
					return err
				}
			}
			if runA < 0 {
				runA, runB = a, a
			}
			n := min(b-a, maxBatchRows-(runB-runA))
			for i := 0; i < n; i++ {
				idx = append(idx, int32(k))
			}
			runB += n
			a += n
		}
	}
	return flush()
}
