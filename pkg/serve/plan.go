package serve

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/sidecar"
)

// Schema metadata keys of every stream and FlightInfo schema.
const (
	MetaSnapshotID = "servingsnap.snapshot_id"
	MetaDataset    = "servingsnap.dataset"
)

// seriesIDType is the streamed series_id column: codes into a dictionary
// that lists the matching series ids in output order.
var seriesIDType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// selection is the matching series codes in output order (ascending code,
// which is ascending series id bytewise): a contiguous range [lo, hi) or an
// explicit list.
type selection struct {
	lo, hi int
	list   []int32 // nil: the range
}

func (s selection) len() int {
	if s.list != nil {
		return len(s.list)
	}
	return s.hi - s.lo
}

func (s selection) code(k int) int {
	if s.list != nil {
		return int(s.list[k])
	}
	return s.lo + k
}

// piece is the rows of one series the response carries: rows [lo, hi) of
// data batch b; k is the series' position in the selection (its dictionary
// code in the stream).
type piece struct {
	k      int32
	b      int32
	lo, hi int64
}

// plan is a resolved query against one view: which series, which rows,
// which columns. Building it costs a lookup per requested series (or a
// binary search for a prefix, a scan of one index column for a category)
// and a binary search per series when a period range cuts it; no row is
// copied.
type plan struct {
	v      *view
	q      *Query
	sel    selection
	cols   []column // output columns after series_id and period
	schema *arrow.Schema
	pieces []piece
	rows   int64
	one    [1]piece // pieces' storage for a single series

	// fromIndex: a latest query without a period range whose only data
	// column is the value. Its rows are the index's latest_period and
	// latest_value of the series that have one (codes, and their positions
	// in the selection, ks); the data file is not touched.
	fromIndex bool
	codes     []int32
	ks        []int32
}

// newPlan resolves q. Limits apply here so GetFlightInfo and DoGet refuse
// the same queries.
func newPlan(v *view, q *Query, lim Limits) (*plan, error) {
	p := &plan{v: v, q: q}
	if q.Snapshot != 0 && q.Snapshot != v.ID() {
		return nil, errf(codes.FailedPrecondition, "dataset %q is serving snapshot %d, the ticket asks for snapshot %d", v.dataset, v.ID(), q.Snapshot)
	}
	cols, err := v.selectColumns(q)
	if err != nil {
		return nil, err
	}
	p.cols = cols
	switch {
	case !q.HasColumns && !q.Attributes:
		p.schema = v.schemaDefault
	case !q.HasColumns && q.Attributes:
		p.schema = v.schemaAttrs
	default:
		p.schema = v.schemaFor(cols)
	}
	if p.sel, err = v.selectSeries(q); err != nil {
		return nil, err
	}
	if lim.MaxSeries > 0 && p.sel.len() > lim.MaxSeries {
		return nil, errf(codes.ResourceExhausted, "query matches %d series in dataset %q, limit %d per request; narrow the prefix or category, or list series", p.sel.len(), v.dataset, lim.MaxSeries)
	}
	if err := p.locate(); err != nil {
		return nil, err
	}
	if lim.MaxRows > 0 && p.rows > lim.MaxRows {
		return nil, errf(codes.ResourceExhausted, "query matches %d rows in dataset %q, limit %d per response; narrow the period range or the series", p.rows, v.dataset, lim.MaxRows)
	}
	return p, nil
}

// selectColumns resolves the "columns" and "attributes" fields.
func (v *view) selectColumns(q *Query) ([]column, error) {
	if !q.HasColumns {
		cols := append([]column(nil), v.data...)
		if q.Attributes {
			cols = append(cols, v.attrs...)
		}
		return cols, nil
	}
	var cols []column
	seen := map[string]bool{datafile.ColPeriod: true, sidecar.ColSeriesID: true}
	for _, name := range q.Columns {
		if seen[name] {
			continue
		}
		seen[name] = true
		c, ok := v.byName[name]
		if !ok {
			return nil, invalid("unknown column %q in dataset %q (columns: %s)", truncate(name, 128), v.dataset, strings.Join(v.columnNames(), ", "))
		}
		cols = append(cols, c)
	}
	if q.Attributes {
		for _, c := range v.attrs {
			if !seen[c.name] {
				cols = append(cols, c)
			}
		}
	}
	return cols, nil
}

func (v *view) columnNames() []string {
	names := []string{sidecar.ColSeriesID, datafile.ColPeriod}
	for _, c := range v.data {
		names = append(names, c.name)
	}
	for _, c := range v.attrs {
		names = append(names, c.name+" (attribute)")
	}
	return names
}

// schemaFor is the stream schema: series_id, period, then cols, with the
// snapshot id and dataset in the metadata.
func (v *view) schemaFor(cols []column) *arrow.Schema {
	fields := make([]arrow.Field, 0, 2+len(cols))
	fields = append(fields,
		arrow.Field{Name: sidecar.ColSeriesID, Type: seriesIDType},
		arrow.Field{Name: datafile.ColPeriod, Type: arrow.FixedWidthTypes.Date32})
	for _, c := range cols {
		fields = append(fields, c.field)
	}
	md := arrow.NewMetadata([]string{MetaSnapshotID, MetaDataset}, []string{strconv.FormatUint(v.ID(), 10), v.dataset})
	return arrow.NewSchema(fields, &md)
}

// defaultSchema is the schema of a query with default columns.
func (v *view) defaultSchema() *arrow.Schema { return v.schemaDefault }

// selectSeries resolves the selector to series codes.
func (v *view) selectSeries(q *Query) (selection, error) {
	x := v.Index()
	switch {
	case q.HasPrefix:
		lo, hi := x.Prefix(q.Prefix)
		return selection{lo: lo, hi: hi}, nil
	case q.HasCategory:
		return v.selectCategory(q.Category)
	}
	codes := make([]int32, 0, len(q.Series))
	var missing []string
	for _, id := range q.Series {
		c, ok := x.Lookup(id)
		if !ok {
			missing = append(missing, id)
			continue
		}
		codes = append(codes, int32(c))
	}
	if len(missing) > 0 {
		return selection{}, notFoundSeries(v, missing, len(q.Series))
	}
	if !sort.SliceIsSorted(codes, func(i, j int) bool { return codes[i] < codes[j] }) {
		sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
	}
	out := codes[:0]
	for i, c := range codes { // drop duplicates
		if i == 0 || c != codes[i-1] {
			out = append(out, c)
		}
	}
	if n := len(out); n > 0 && int(out[n-1]-out[0]) == n-1 {
		// consecutive codes (one series, say): a range, whose dictionaries
		// are slices of the index columns rather than copies
		return selection{lo: int(out[0]), hi: int(out[0]) + n}, nil
	}
	return selection{list: out}, nil
}

func notFoundSeries(v *view, missing []string, asked int) error {
	const show = 5
	q := make([]string, 0, show)
	for i, id := range missing {
		if i == show {
			q = append(q, "…")
			break
		}
		q = append(q, strconv.Quote(truncate(id, 128)))
	}
	if len(missing) == 1 {
		return errf(codes.NotFound, "series %s not found in dataset %q (snapshot %d)", q[0], v.dataset, v.ID())
	}
	return errf(codes.NotFound, "%d of %d series not found in dataset %q (snapshot %d): %s", len(missing), asked, v.dataset, v.ID(), strings.Join(q, ", "))
}

// selectCategory scans the category attribute: one pass over a column of
// one small integer (dictionary) or string per series. A series matches
// when its category is cat or lies below it at a '/' boundary ("Petroleum"
// matches "Petroleum/Prices/Spot", not "PetroleumCoke"), as snapinspect's
// latest --category does.
func (v *view) selectCategory(cat string) (selection, error) {
	if v.category < 0 {
		return selection{}, invalid("dataset %q has no \"category\" attribute; select by \"series\" or \"prefix\"", v.dataset)
	}
	col := v.attrs[v.category].src
	var list []int32
	switch a := col.(type) {
	case *array.Dictionary:
		dict, ok := a.Dictionary().(*array.String)
		if !ok {
			return selection{}, invalid("dataset %q: the category attribute is not a string column", v.dataset)
		}
		hit := make([]bool, dict.Len())
		any := false
		for i := 0; i < dict.Len(); i++ {
			hit[i] = dict.IsValid(i) && sidecar.MatchCategory(dict.Value(i), cat)
			any = any || hit[i]
		}
		if any {
			for i := 0; i < a.Len(); i++ {
				if a.IsValid(i) && hit[a.GetValueIndex(i)] {
					list = append(list, int32(i))
				}
			}
		}
	case *array.String:
		for i := 0; i < a.Len(); i++ {
			if a.IsValid(i) && sidecar.MatchCategory(a.Value(i), cat) {
				list = append(list, int32(i))
			}
		}
	default:
		return selection{}, invalid("dataset %q: the category attribute is %s, not a string column", v.dataset, col.DataType())
	}
	if len(list) == 0 {
		return selection{}, errf(codes.NotFound, "category %q not found in dataset %q (snapshot %d)%s", truncate(cat, 128), v.dataset, v.ID(), v.categoryHint())
	}
	if n := len(list); int(list[n-1]-list[0]) == n-1 {
		// consecutive codes: a range, whose dictionaries are slices
		return selection{lo: int(list[0]), hi: int(list[0]) + n}, nil
	}
	return selection{list: list}, nil
}

// categoryHint lists a few categories when the column is a dictionary
// (cheap: the dictionary is the set of distinct values).
func (v *view) categoryHint() string {
	a, ok := v.attrs[v.category].src.(*array.Dictionary)
	if !ok {
		return ""
	}
	d, ok := a.Dictionary().(*array.String)
	if !ok || d.Len() == 0 {
		return ""
	}
	var names []string
	for i := 0; i < d.Len() && i < 10; i++ {
		names = append(names, strconv.Quote(d.Value(i)))
	}
	if d.Len() > 10 {
		names = append(names, "…")
	}
	return "; categories: " + strings.Join(names, ", ")
}

// locate computes each selected series' row range under the period bounds
// (and latest), and the total row count.
func (p *plan) locate() error {
	n := p.sel.len()
	if n == 1 {
		p.pieces = p.one[:0]
	} else {
		p.pieces = make([]piece, 0, n)
	}
	from, to := p.q.From, p.q.To
	x := p.v.Index()
	if p.q.Latest && from == math.MinInt32 && to == math.MaxInt32 && p.onlyValue() {
		p.fromIndex = true
		p.pieces = nil
		for k := 0; k < n; k++ {
			code := p.sel.code(k)
			if _, ok := x.Latest(code); ok {
				p.codes = append(p.codes, int32(code))
				p.ks = append(p.ks, int32(k))
			}
		}
		p.rows = int64(len(p.codes))
		return nil
	}
	for k := 0; k < n; k++ {
		code := p.sel.code(k)
		e := x.Entry(code)
		b, lo, hi, err := p.v.rangeOf(e, from, to)
		if err != nil {
			return err
		}
		if p.q.Latest {
			lo, hi = p.v.latestIn(x, code, b, lo, hi, to)
		}
		if hi > lo {
			p.pieces = append(p.pieces, piece{k: int32(k), b: int32(b), lo: lo, hi: hi})
			p.rows += hi - lo
		}
	}
	return nil
}

// onlyValue reports whether the value is the only data column of the
// output (attributes aside): what the index's latest columns can answer.
func (p *plan) onlyValue() bool {
	for _, c := range p.cols {
		if !c.attr && c.pos != 2 {
			return false
		}
	}
	return true
}

// rangeOf is snapshot.Range with corruption reported as an Internal
// status naming the dataset and snapshot.
func (v *view) rangeOf(e sidecar.Entry, from, to int32) (b int, lo, hi int64, err error) {
	b, lo, hi, err = v.Range(e, from, to)
	if err != nil {
		return 0, 0, 0, errf(codes.Internal, "dataset %q snapshot %d: %v", v.dataset, v.ID(), err)
	}
	return b, lo, hi, nil
}

// latestIn narrows [lo, hi) to its last row with a non-null value, or to
// nothing. The index knows the series' overall latest period; only when the
// range ends before it does the value column's validity get scanned.
func (v *view) latestIn(x *sidecar.Index, code, b int, lo, hi int64, to int32) (int64, int64) {
	if hi <= lo {
		return lo, lo
	}
	lp, ok := x.Latest(code)
	if !ok { // every value of the series is null
		return lo, lo
	}
	ps := v.Periods(b)
	if lp <= to {
		// The last non-null row overall lies at or before the range's end:
		// it is in the range iff it is not before the range's start.
		i := lo + int64(sort.Search(int(hi-lo), func(i int) bool { return int32(ps[lo+int64(i)]) >= lp }))
		if i < hi && int32(ps[i]) == lp {
			return i, i + 1
		}
		return lo, lo
	}
	vals := v.values[b]
	for i := hi - 1; i >= lo; i-- {
		if vals.IsValid(int(i)) {
			return i, i + 1
		}
	}
	return lo, lo
}

// dictionaries builds the series_id dictionary (the selected ids, in order)
// and one dictionary per selected attribute column (its values for the
// selected series, dictionaries in the index decoded). A contiguous
// selection slices the index columns without copying.
func (p *plan) dictionaries(ctx context.Context, mem memory.Allocator) (ids arrow.Array, attrs []arrow.Array, err error) {
	sel := p.sel
	if sel.list == nil {
		ids = array.NewSlice(p.v.ids, int64(sel.lo), int64(sel.hi))
	} else {
		bld := array.NewStringBuilder(mem)
		defer bld.Release()
		bytes := 0
		for _, c := range sel.list {
			bytes += p.v.ids.ValueLen(int(c))
		}
		bld.Reserve(len(sel.list))
		bld.ReserveData(bytes)
		for _, c := range sel.list {
			bld.Append(p.v.ids.Value(int(c)))
		}
		ids = bld.NewArray()
	}
	defer func() {
		if err != nil {
			ids.Release()
			for _, a := range attrs {
				if a != nil {
					a.Release()
				}
			}
			ids, attrs = nil, nil
		}
	}()
	var idx arrow.Array // selected codes as int32, built once if needed
	defer func() {
		if idx != nil {
			idx.Release()
		}
	}()
	for _, c := range p.cols {
		if !c.attr {
			continue
		}
		var a arrow.Array
		src := c.src
		if d, ok := src.(*array.Dictionary); ok {
			// Decode: the dictionary's values taken by the selected indices.
			var ind arrow.Array
			if sel.list == nil {
				ind = array.NewSlice(d.Indices(), int64(sel.lo), int64(sel.hi))
			} else {
				if idx == nil {
					idx = codesArray(sel.list, mem)
				}
				ind, err = compute.TakeArray(ctx, d.Indices(), idx)
				if err != nil {
					return nil, nil, fmt.Errorf("attribute %s: %w", c.name, err)
				}
			}
			a, err = compute.TakeArray(ctx, d.Dictionary(), ind)
			ind.Release()
		} else if sel.list == nil {
			a = array.NewSlice(src, int64(sel.lo), int64(sel.hi))
		} else {
			if idx == nil {
				idx = codesArray(sel.list, mem)
			}
			a, err = compute.TakeArray(ctx, src, idx)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("attribute %s: %w", c.name, err)
		}
		attrs = append(attrs, a)
	}
	return ids, attrs, nil
}

func codesArray(list []int32, mem memory.Allocator) arrow.Array {
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.AppendValues(list, nil)
	return b.NewArray()
}
