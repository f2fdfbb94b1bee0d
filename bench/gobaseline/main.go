// Command gobaseline is the Go rebuild-at-start baseline of the benchmark
// harness (bench/harness.py): a Flight server that does at every start what
// servingsnap does once, offline. It reads every Parquet file of a lake with
// arrow-go's pqarrow (strings as dictionaries), interns the strings, parses
// the periods, sorts the rows by (series_id, period), builds a hash map
// series_id -> code with each series' row range, date bounds and latest
// value, and then serves DoGet tickets (the JSON of docs/FLIGHT.md: series,
// prefix or category, start/end, latest) as copies of slices of its
// in-memory columns.
//
// It exists to separate language from design: same language and Arrow
// library as servingsnap, but the old design (rebuild in RAM at start). It is
// deliberately plain code, not a product: one dataset, the columns of a
// generated lake (series_id, period, value and string attributes).
//
//	gobaseline --lake LAKE --dataset NAME --addr 127.0.0.1:PORT
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/period"
)

// attrNames are the per-series string attributes of a generated lake; they
// are kept once per series (the first value seen), as any rebuild would.
var attrNames = []string{"units", "frequency", "name", "category"}

// interner maps strings to dense codes.
type interner struct {
	codes map[string]uint32
	vals  []string
}

func newInterner() *interner { return &interner{codes: map[string]uint32{}} }

func (in *interner) code(s string) uint32 {
	if c, ok := in.codes[s]; ok {
		return c
	}
	c := uint32(len(in.vals))
	in.codes[s] = c
	in.vals = append(in.vals, s)
	return c
}

// rows is the lake in input order, strings as codes.
type rows struct {
	sid    []uint32 // interned series id
	period []int32  // date32
	value  []float64
	valid  []bool
	ids    *interner
	attrs  []*interner // per attribute column: interned values
	sattr  [][]uint32  // per attribute column: value code per series (by interned id)
}

// dataset is what the server answers from: rows sorted by (series_id,
// period) and the per-series index.
type dataset struct {
	name   string
	nrows  int64
	period *array.Date32
	value  *array.Float64

	ids      []string // sorted; position = series code
	byID     map[string]int32
	offset   []int64
	count    []int64
	first    []int32
	last     []int32
	latestP  []int32
	latestV  []float64
	latestOK []bool
	attrs    [][]string // per attribute column, per series code
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
	t0 := time.Now()
	ds, err := load(*lake, *name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gobaseline:", err)
		os.Exit(1)
	}
	srv := flight.NewServerWithMiddleware(nil)
	if err := srv.Init(*addr); err != nil {
		fmt.Fprintln(os.Stderr, "gobaseline:", err)
		os.Exit(1)
	}
	srv.RegisterFlightService(&service{ds: ds, mem: memory.DefaultAllocator})
	srv.SetShutdownOnSignals(syscall.SIGTERM, os.Interrupt)
	ev, _ := json.Marshal(map[string]any{
		"event": "listening", "flight": "grpc+tcp://" + srv.Addr().String(),
		"startup_ms": float64(time.Since(t0).Microseconds()) / 1000, "rows": ds.nrows, "series": len(ds.ids),
	})
	fmt.Println(string(ev))
	if err := srv.Serve(); err != nil {
		fmt.Fprintln(os.Stderr, "gobaseline:", err)
		os.Exit(1)
	}
}

// load reads the lake and builds the in-memory dataset.
func load(lake, name string) (*dataset, error) {
	var paths []string
	err := filepath.WalkDir(lake, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no .parquet files under %s", lake)
	}
	sort.Strings(paths)

	// Read files in parallel, consume them in order on one goroutine.
	type result struct {
		tbl arrow.Table
		err error
	}
	results := make([]chan result, len(paths))
	for i := range results {
		results[i] = make(chan result, 1)
	}
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	go func() {
		for i, p := range paths {
			sem <- struct{}{}
			go func() {
				tbl, err := readFile(p)
				results[i] <- result{tbl, err}
			}()
		}
	}()
	r := &rows{ids: newInterner()}
	for range attrNames {
		r.attrs = append(r.attrs, newInterner())
		r.sattr = append(r.sattr, nil)
	}
	for i, p := range paths {
		res := <-results[i]
		<-sem
		if res.err != nil {
			return nil, fmt.Errorf("%s: %w", p, res.err)
		}
		err := r.add(res.tbl)
		res.tbl.Release()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	ds := build(r, name)
	runtime.GC()
	debug.FreeOSMemory()
	return ds, nil
}

func readFile(path string) (arrow.Table, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	props := pqarrow.ArrowReadProperties{BatchSize: 1 << 20}
	sc := pf.MetaData().Schema
	for i := 0; i < sc.NumColumns(); i++ {
		switch sc.Column(i).Name() {
		case "series_id", "period", "units", "frequency", "name", "category":
			props.SetReadDict(i, true)
		}
	}
	fr, err := pqarrow.NewFileReader(pf, props, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	return fr.ReadTable(context.Background())
}

// add appends a table's rows.
func (r *rows) add(tbl arrow.Table) error {
	col := func(name string) *arrow.Chunked {
		idx := tbl.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil
		}
		return tbl.Column(idx[0]).Data()
	}
	sidC, perC, valC := col("series_id"), col("period"), col("value")
	if sidC == nil || perC == nil || valC == nil {
		return errors.New("want columns series_id, period and value")
	}
	attrC := make([]*arrow.Chunked, len(attrNames))
	for k, n := range attrNames {
		attrC[k] = col(n)
	}
	base := len(r.sid)
	n := int(tbl.NumRows())
	r.sid = slices.Grow(r.sid, n)
	r.period = slices.Grow(r.period, n)
	r.value = slices.Grow(r.value, n)
	r.valid = slices.Grow(r.valid, n)

	for _, c := range sidC.Chunks() {
		if err := stringCodes(c, r.ids, func(code uint32) { r.sid = append(r.sid, code) }); err != nil {
			return fmt.Errorf("series_id: %w", err)
		}
	}
	for len(r.sattr[0]) < len(r.ids.vals) { // new series: attribute slots
		for k := range r.sattr {
			r.sattr[k] = append(r.sattr[k], math.MaxUint32)
		}
	}
	for _, c := range perC.Chunks() {
		if err := periods(c, &r.period); err != nil {
			return fmt.Errorf("period: %w", err)
		}
	}
	for _, c := range valC.Chunks() {
		f, ok := c.(*array.Float64)
		if !ok {
			return fmt.Errorf("value: want float64, got %s", c.DataType())
		}
		vals := f.Float64Values()
		for i := range vals {
			r.value = append(r.value, vals[i])
			r.valid = append(r.valid, f.IsValid(i))
		}
	}
	for k, ch := range attrC {
		if ch == nil {
			continue
		}
		row := base
		for _, c := range ch.Chunks() {
			err := stringCodes(c, r.attrs[k], func(code uint32) {
				s := r.sid[row]
				if r.sattr[k][s] == math.MaxUint32 {
					r.sattr[k][s] = code
				}
				row++
			})
			if err != nil {
				return fmt.Errorf("%s: %w", attrNames[k], err)
			}
		}
	}
	if len(r.sid) != base+n || len(r.period) != base+n || len(r.value) != base+n {
		return errors.New("columns of different lengths")
	}
	return nil
}

// stringCodes interns a string column (dictionary or plain) row by row.
func stringCodes(c arrow.Array, in *interner, emit func(uint32)) error {
	switch a := c.(type) {
	case *array.Dictionary:
		dict, ok := a.Dictionary().(*array.String)
		if !ok {
			return fmt.Errorf("want a dictionary of strings, got %s", a.DataType())
		}
		local := make([]uint32, dict.Len())
		for i := range local {
			local[i] = in.code(dict.Value(i))
		}
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				return fmt.Errorf("null at row %d", i)
			}
			emit(local[a.GetValueIndex(i)])
		}
	case *array.String:
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				return fmt.Errorf("null at row %d", i)
			}
			emit(in.code(a.Value(i)))
		}
	default:
		return fmt.Errorf("unsupported type %s", c.DataType())
	}
	return nil
}

// periods parses a period column (EIA-style strings, or date32) to date32.
func periods(c arrow.Array, dst *[]int32) error {
	switch a := c.(type) {
	case *array.Dictionary:
		dict, ok := a.Dictionary().(*array.String)
		if !ok {
			return fmt.Errorf("want a dictionary of strings, got %s", a.DataType())
		}
		local := make([]int32, dict.Len())
		for i := range local {
			d, err := period.Parse(dict.Value(i))
			if err != nil {
				return err
			}
			local[i] = d
		}
		for i := 0; i < a.Len(); i++ {
			*dst = append(*dst, local[a.GetValueIndex(i)])
		}
	case *array.String:
		for i := 0; i < a.Len(); i++ {
			d, err := period.Parse(a.Value(i))
			if err != nil {
				return err
			}
			*dst = append(*dst, d)
		}
	case *array.Date32:
		for _, v := range a.Date32Values() {
			*dst = append(*dst, int32(v))
		}
	default:
		return fmt.Errorf("unsupported type %s", c.DataType())
	}
	return nil
}

func bitsFor(n uint64) uint {
	if n == 0 {
		return 1
	}
	return uint(bits.Len64(n))
}

// build sorts the rows by (series_id, period) and builds the index.
func build(r *rows, name string) *dataset {
	n := len(r.sid)
	nser := len(r.ids.vals)
	// rank of each interned id in sorted order
	order := make([]uint32, nser)
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(r.ids.vals[a], r.ids.vals[b]) })
	rank := make([]uint32, nser)
	for k, c := range order {
		rank[c] = uint32(k)
	}
	minP, maxP := int32(math.MaxInt32), int32(math.MinInt32)
	for _, p := range r.period {
		minP = min(minP, p)
		maxP = max(maxP, p)
	}
	// sort permutation: packed (rank, period, row) keys when they fit in 64 bits
	perm := make([]uint32, n)
	rb, pb, sb := bitsFor(uint64(n)), bitsFor(uint64(int64(maxP)-int64(minP))), bitsFor(uint64(nser))
	if rb+pb+sb <= 64 {
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = uint64(rank[r.sid[i]])<<(pb+rb) | uint64(r.period[i]-minP)<<rb | uint64(i)
		}
		slices.Sort(keys)
		mask := uint64(1)<<rb - 1
		for i, k := range keys {
			perm[i] = uint32(k & mask)
		}
	} else {
		for i := range perm {
			perm[i] = uint32(i)
		}
		slices.SortStableFunc(perm, func(a, b uint32) int {
			if ra, rb := rank[r.sid[a]], rank[r.sid[b]]; ra != rb {
				return int(ra) - int(rb)
			}
			return int(r.period[a]) - int(r.period[b])
		})
	}

	// gather the sorted columns
	per := make([]int32, n)
	val := make([]float64, n)
	validity := make([]byte, bitutil.BytesForBits(int64(n)))
	nulls := 0
	for i, j := range perm {
		per[i] = r.period[j]
		val[i] = r.value[j]
		if r.valid[j] {
			bitutil.SetBit(validity, i)
		} else {
			nulls++
		}
	}
	ds := &dataset{
		name: name, nrows: int64(n),
		ids: make([]string, nser), byID: make(map[string]int32, nser),
		offset: make([]int64, nser), count: make([]int64, nser),
		first: make([]int32, nser), last: make([]int32, nser),
		latestP: make([]int32, nser), latestV: make([]float64, nser), latestOK: make([]bool, nser),
		attrs: make([][]string, len(attrNames)),
	}
	for k := range ds.attrs {
		ds.attrs[k] = make([]string, nser)
	}
	for code, c := range order {
		id := r.ids.vals[c]
		ds.ids[code] = id
		ds.byID[id] = int32(code)
		for k := range attrNames {
			if v := r.sattr[k][c]; v != math.MaxUint32 {
				ds.attrs[k][code] = r.attrs[k].vals[v]
			}
		}
	}
	// series boundaries, bounds and latest values, walking the sorted rows
	for i := 0; i < n; {
		code := rank[r.sid[perm[i]]]
		j := i
		for j < n && rank[r.sid[perm[j]]] == code {
			j++
		}
		ds.offset[code], ds.count[code] = int64(i), int64(j-i)
		ds.first[code], ds.last[code] = per[i], per[j-1]
		for k := j - 1; k >= i; k-- {
			if bitutil.BitIsSet(validity, k) {
				ds.latestP[code], ds.latestV[code], ds.latestOK[code] = per[k], val[k], true
				break
			}
		}
		i = j
	}
	var vbuf *memory.Buffer
	if nulls > 0 {
		vbuf = memory.NewBufferBytes(validity)
	}
	pd := array.NewData(arrow.FixedWidthTypes.Date32, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(per))}, nil, 0, 0)
	ds.period = array.NewDate32Data(pd)
	vd := array.NewData(arrow.PrimitiveTypes.Float64, n, []*memory.Buffer{vbuf, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(val))}, nil, nulls, 0)
	ds.value = array.NewFloat64Data(vd)
	return ds
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
		TotalRecords:     s.ds.nrows,
		TotalBytes:       -1,
	})
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
		lo := sort.SearchStrings(ds.ids, *q.Prefix)
		for c := lo; c < len(ds.ids) && strings.HasPrefix(ds.ids[c], *q.Prefix); c++ {
			sel = append(sel, int32(c))
		}
	case q.Category != nil:
		for c, v := range ds.attrs[3] { // exact match, as snapbuild serve
			if v == *q.Category {
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
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema), ipc.WithAllocator(s.mem))
	defer w.Close()
	dictB := array.NewStringBuilder(s.mem)
	for _, c := range sel {
		dictB.Append(ds.ids[c])
	}
	dict := dictB.NewArray()
	defer dict.Release()

	idxB := array.NewInt32Builder(s.mem)
	perB := array.NewDate32Builder(s.mem)
	valB := array.NewFloat64Builder(s.mem)
	defer idxB.Release()
	defer perB.Release()
	defer valB.Release()
	flush := func() error {
		if idxB.Len() == 0 {
			return nil
		}
		idx := idxB.NewArray()
		ids := array.NewDictionaryArray(idType, idx, dict)
		cols := []arrow.Array{ids, perB.NewArray()}
		if withValue {
			cols = append(cols, valB.NewArray())
		}
		rec := array.NewRecordBatch(schema, cols, int64(idx.Len()))
		err := w.Write(rec)
		rec.Release()
		idx.Release()
		for _, c := range cols {
			c.Release()
		}
		return err
	}
	const maxBatch = 1 << 17
	pers := ds.period.Date32Values()
	vals := ds.value.Float64Values()
	for k, c := range sel {
		lo, hi := ds.offset[c], ds.offset[c]+ds.count[c]
		p := pers[lo:hi]
		a := lo + int64(sort.Search(len(p), func(i int) bool { return int32(p[i]) >= from }))
		b := lo + int64(sort.Search(len(p), func(i int) bool { return int32(p[i]) > to }))
		if q.Latest {
			// the last non-null row in range: straight from the index when
			// the series' latest value lies before the range's end
			if !ds.latestOK[c] {
				continue
			}
			if ds.latestP[c] <= to {
				if ds.latestP[c] >= from {
					idxB.Append(int32(k))
					perB.Append(arrow.Date32(ds.latestP[c]))
					valB.Append(ds.latestV[c])
				}
			} else {
				for i := b - 1; i >= a; i-- {
					if ds.value.IsValid(int(i)) {
						idxB.Append(int32(k))
						perB.Append(pers[i])
						valB.Append(vals[i])
						break
					}
				}
			}
		} else {
			for i := a; i < b; i++ {
				idxB.Append(int32(k))
				perB.Append(pers[i])
				if ds.value.IsValid(int(i)) {
					valB.Append(vals[i])
				} else {
					valB.AppendNull()
				}
			}
		}
		if idxB.Len() >= maxBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
