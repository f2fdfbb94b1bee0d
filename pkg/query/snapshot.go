package query

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// SnapshotReader is the Reader of a bare open snapshot: codes are index
// rows, a series is one slice of one mapped data batch, everything about a
// series beyond its rows comes from the index. It holds no reference on
// the snapshot; whoever holds the snapshot holds the reader.
type SnapshotReader struct {
	s      *snapshot.Snapshot
	x      *index.Reader
	info   Info
	shape  *Shape
	values []arrow.Array // per data batch, the value column
}

// FromSnapshot wraps an open snapshot served under the dataset name. It
// derives the answers' shape once and refuses snapshots whose columns an
// answer cannot carry.
func FromSnapshot(dataset string, s *snapshot.Snapshot) (*SnapshotReader, error) {
	x := s.Index()
	fields := x.AttributeFields()
	sh, err := NewShape(dataset, s.ID(), s.Schema(), fields)
	if err != nil {
		return nil, err
	}
	r := &SnapshotReader{
		s: s, x: x, shape: sh,
		info: Info{Dataset: dataset, SnapshotID: s.ID(), Series: int64(x.Len()), Rows: s.Manifest.Stats.Rows},
	}
	// The attribute columns are fetched on use (attr): the index checks
	// each on its first use, so that opening stays flat in the number of
	// series. A version-1 index holds dictionaries, and it was checked in
	// full at open, so fetching them here costs nothing. (A version-4 code
	// column becomes a dictionary array on its first use, which builds
	// the array's dictionary under the index's once.)
	if x.Version() == index.VersionV1 {
		for pos := range fields {
			if d, ok := r.attrOrNulls(pos).(*array.Dictionary); ok {
				// arrow-go builds a dictionary array's Dictionary() lazily, with
				// no lock: build it here, before concurrent requests read it.
				d.Dictionary()
			}
		}
	}
	for i := 0; i < s.NumBatches(); i++ {
		r.values = append(r.values, s.Batch(i).Column(datafile.ColumnValue))
	}
	return r, nil
}

// Snapshot is the wrapped snapshot.
func (r *SnapshotReader) Snapshot() *snapshot.Snapshot { return r.s }

// attr is attribute column pos of the index, checked on its first use: a
// damaged column is snapshot.ErrCorrupt naming the index file and column.
func (r *SnapshotReader) attr(pos int) (arrow.Array, error) {
	a, err := r.x.Attribute(pos)
	if err != nil {
		return nil, fmt.Errorf("dataset %q snapshot %d: %w", r.info.Dataset, r.info.SnapshotID, err)
	}
	return a, nil
}

// attrOrNulls is attribute column pos, or nulls in place of a damaged
// one, for the callers that have no error to return (Attr).
func (r *SnapshotReader) attrOrNulls(pos int) arrow.Array {
	_, cols := r.x.Attributes()
	return cols[pos]
}

func (r *SnapshotReader) Info() Info               { return r.info }
func (r *SnapshotReader) Shape() *Shape            { return r.shape }
func (r *SnapshotReader) SeriesID(code int) string { return r.x.ID(code) }

// Select resolves a selector over the index: a lookup per id (the index's
// lookup table, all ids in passes: index.Reader.LookupMany), two binary
// searches for a prefix, one pass over the category column for a
// category.
func (r *SnapshotReader) Select(s Selector) (Selection, error) {
	switch s.Kind {
	case ByPrefix:
		return CodeRange(r.x.Prefix(s.Prefix)), nil
	case ByCategory:
		return r.selectCategory(s.Category)
	case ByIDs:
		return r.selectIDs(s.IDs)
	}
	return Selection{}, Errorf(ErrInvalid, "no series selector")
}

func (r *SnapshotReader) selectIDs(ids []string) (Selection, error) {
	codes := make([]int32, len(ids))
	r.x.LookupMany(ids, codes)
	var missing []string
	for i, c := range codes {
		if c < 0 {
			missing = append(missing, ids[i])
		}
	}
	if len(missing) > 0 {
		return Selection{}, r.notFoundSeries(missing, len(ids))
	}
	if !slices.IsSorted(codes) {
		slices.Sort(codes)
	}
	return CodeList(slices.Compact(codes)), nil
}

func (r *SnapshotReader) notFoundSeries(missing []string, asked int) error {
	if len(missing) == 1 {
		return Errorf(ErrNotFound, "series %s not found in dataset %q (snapshot %d)", quoteSome(missing, 1), r.info.Dataset, r.info.SnapshotID)
	}
	return Errorf(ErrNotFound, "%d of %d series not found in dataset %q (snapshot %d): %s", len(missing), asked, r.info.Dataset, r.info.SnapshotID, quoteSome(missing, 5))
}

// selectCategory scans the category attribute: one pass over a column of
// one small integer (dictionary) or string per series.
func (r *SnapshotReader) selectCategory(cat string) (Selection, error) {
	pos := r.shape.category
	if pos < 0 {
		return Selection{}, Errorf(ErrInvalid, "dataset %q has no %q attribute; select by series or prefix", r.info.Dataset, CategoryAttribute)
	}
	col, err := r.attr(pos)
	if err != nil {
		return Selection{}, err
	}
	match, err := CategoryMatcher(col, cat)
	if err != nil {
		return Selection{}, Errorf(ErrInvalid, "dataset %q: %v", r.info.Dataset, err)
	}
	var list []int32
	for i := 0; i < r.x.Len(); i++ {
		if match(i) {
			list = append(list, int32(i))
		}
	}
	if len(list) == 0 {
		return Selection{}, Errorf(ErrNotFound, "category %q not found in dataset %q (snapshot %d)%s", Truncate(cat, 128), r.info.Dataset, r.info.SnapshotID, categoryHint(col))
	}
	return CodeList(list), nil
}

// CategoryMatcher returns a predicate over the rows of a category
// attribute column (utf8, or a dictionary of utf8): row i matches when its
// value is in category c (MatchCategory). A dictionary is matched once per
// entry, not once per row.
func CategoryMatcher(col arrow.Array, c string) (func(int) bool, error) {
	switch a := col.(type) {
	case *array.Dictionary:
		dict, ok := a.Dictionary().(*array.String)
		if !ok {
			return nil, fmt.Errorf("the %s attribute is %s, not a string column", CategoryAttribute, col.DataType())
		}
		hit := make([]bool, dict.Len())
		any := false
		for i := range hit {
			hit[i] = dict.IsValid(i) && MatchCategory(dict.Value(i), c)
			any = any || hit[i]
		}
		if !any {
			return func(int) bool { return false }, nil
		}
		return func(i int) bool { return a.IsValid(i) && hit[a.GetValueIndex(i)] }, nil
	case *array.String:
		return func(i int) bool { return a.IsValid(i) && MatchCategory(a.Value(i), c) }, nil
	}
	return nil, fmt.Errorf("the %s attribute is %s, not a string column", CategoryAttribute, col.DataType())
}

// categoryHint lists a few categories, in bytewise order: a dictionary's
// first entries (a version-1 index), or the distinct values of a plain
// utf8 column (version 2), found in one pass that stops collecting after
// maxHintValues distinct values. The pass is over a column selectCategory
// has just scanned anyway, and only on the not-found path.
func categoryHint(col arrow.Array) string {
	var distinct []string
	more := false
	switch a := col.(type) {
	case *array.Dictionary:
		d, ok := a.Dictionary().(*array.String)
		if !ok {
			return ""
		}
		for i := 0; i < d.Len(); i++ {
			distinct = append(distinct, d.Value(i))
		}
	case *array.String:
		seen := map[string]bool{}
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) || seen[a.Value(i)] {
				continue
			}
			if len(seen) == maxHintValues {
				more = true
				break
			}
			seen[a.Value(i)] = true
		}
		for v := range seen {
			distinct = append(distinct, v)
		}
		slices.Sort(distinct)
	default:
		return ""
	}
	if len(distinct) == 0 {
		return ""
	}
	var names []string
	for i := 0; i < len(distinct) && i < 10; i++ {
		names = append(names, strconv.Quote(distinct[i]))
	}
	if len(distinct) > 10 || more {
		names = append(names, "…")
	}
	return "; categories: " + strings.Join(names, ", ")
}

// maxHintValues bounds the distinct values categoryHint collects from a
// plain column.
const maxHintValues = 1024

// Rows is snapshot.Range as a piece of the mapped batch, after, in a
// tiered snapshot, the piece of the series' decoded cold rows the range
// touches (snapshot.ColdRange: a range that misses them decodes nothing).
// An index entry pointing outside the data is corruption
// (snapshot.ErrCorrupt), named with the dataset and snapshot.
func (r *SnapshotReader) Rows(code int, rg Range, dst []Piece) ([]Piece, error) {
	e := r.x.Entry(code)
	if e.Cold.Rows > 0 {
		rec, lo, hi, err := r.s.ColdRange(e, rg.From, rg.To)
		if err != nil {
			return dst, r.wrap(err)
		}
		if hi > lo {
			dst = append(dst, Piece{Rec: rec, Lo: lo, Hi: hi})
		}
	}
	b, lo, hi, err := r.s.Range(e, rg.From, rg.To)
	if err != nil {
		return dst, r.wrap(err)
	}
	if hi > lo {
		dst = append(dst, Piece{Rec: r.s.Batch(b), Lo: lo, Hi: hi})
	}
	return dst, nil
}

// wrap names the dataset and snapshot in a read error.
func (r *SnapshotReader) wrap(err error) error {
	return fmt.Errorf("dataset %q snapshot %d: %w", r.info.Dataset, r.info.SnapshotID, err)
}

// LatestRow narrows the range to its last row with a non-null value. The
// index knows the series' overall latest period; only when the range ends
// before it does the value column's validity get scanned. The hot rows
// are the later ones, so a tiered snapshot's cold rows are decoded only
// when the answer can lie there.
func (r *SnapshotReader) LatestRow(code int, rg Range) (Piece, bool, error) {
	lp, ok := r.x.Latest(code)
	if !ok { // every value of the series is null
		return Piece{}, false, nil
	}
	e := r.x.Entry(code)
	b, lo, hi, err := r.s.Range(e, rg.From, rg.To)
	if err != nil {
		return Piece{}, false, r.wrap(err)
	}
	if hi > lo {
		if p, ok := latestIn(Piece{Rec: r.s.Batch(b), Lo: lo, Hi: hi}, r.s.Periods(b), r.values[b], lp, rg); ok {
			return p, true, nil
		}
	}
	// Cold rows precede the hot ones: they can hold the answer only when
	// the overall latest lies among them, or lies after the range.
	if e.Cold.Rows == 0 || (lp <= rg.To && lp > e.Cold.LastPeriod) {
		return Piece{}, false, nil
	}
	rec, lo, hi, err := r.s.ColdRange(e, rg.From, rg.To)
	if err != nil {
		return Piece{}, false, r.wrap(err)
	}
	if hi <= lo {
		return Piece{}, false, nil
	}
	ps := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
	p, ok := latestIn(Piece{Rec: rec, Lo: lo, Hi: hi}, ps, rec.Column(datafile.ColumnValue), lp, rg)
	return p, ok, nil
}

// latestIn is LatestRow within one piece: ps and vals are the period and
// value columns of p.Rec, lp the series' overall latest period.
func latestIn(p Piece, ps []arrow.Date32, vals arrow.Array, lp int32, rg Range) (Piece, bool) {
	lo, hi := p.Lo, p.Hi
	if lp <= rg.To {
		// The last non-null row overall lies at or before the range's end:
		// it is in the range iff it is not before the range's start.
		i := lo + int64(sort.Search(int(hi-lo), func(i int) bool { return int32(ps[lo+int64(i)]) >= lp }))
		if i < hi && int32(ps[i]) == lp {
			return Piece{Rec: p.Rec, Lo: i, Hi: i + 1}, true
		}
		return Piece{}, false
	}
	for i := hi - 1; i >= lo; i-- {
		if vals.IsValid(int(i)) {
			return Piece{Rec: p.Rec, Lo: i, Hi: i + 1}, true
		}
	}
	return Piece{}, false
}

func (r *SnapshotReader) Latest(code int) (int32, bool) { return r.x.Latest(code) }

// Lookup finds a series' code by id.
func (r *SnapshotReader) Lookup(id string) (int, bool) { return r.x.Lookup(id) }

// Bounds are a series' first and last periods (both tiers), from the
// index alone.
func (r *SnapshotReader) Bounds(code int) (first, last arrow.Date32) {
	f, l := r.x.Bounds(code)
	return arrow.Date32(f), arrow.Date32(l)
}

// Periods are a series' periods, ascending (aliasing the mapping; in a
// tiered snapshot, a series with cold rows gets a copy of both tiers'
// periods, decoding its cold rows). An entry outside the data, or cold
// rows that fail to decode, yield none; opening validated the index.
func (r *SnapshotReader) Periods(code int) []arrow.Date32 {
	if !r.x.Tiered() {
		// only the entry's location: a DoPut asks this of thousands of
		// series a batch, each entry out of cache
		b, off, n := r.x.Location(code)
		return r.s.PeriodsAt(b, off, n)
	}
	e := r.x.Entry(code)
	b, lo, hi, err := r.s.Range(e, AllPeriods.From, AllPeriods.To)
	if err != nil {
		return nil
	}
	var hot []arrow.Date32
	if hi > lo {
		hot = r.s.Periods(b)[lo:hi]
	}
	if e.Cold.Rows == 0 {
		return hot
	}
	rec, clo, chi, err := r.s.ColdRange(e, AllPeriods.From, AllPeriods.To)
	if err != nil || rec == nil {
		return nil
	}
	cold := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()[clo:chi]
	return append(slices.Clip(cold), hot...)
}

// Attr is where attribute a of series id is held in the index.
func (r *SnapshotReader) Attr(id string, a int) (arrow.Array, int, bool) {
	c, ok := r.x.Lookup(id)
	if !ok || a >= len(r.shape.attrs) {
		return nil, 0, ok
	}
	return r.attrOrNulls(a), c, true
}

// LatestValues gathers the index's latest_value column at codes: a slice
// when they are consecutive, a hand gather for float64 (the usual value
// type), Take otherwise.
func (r *SnapshotReader) LatestValues(ctx context.Context, codes []int32, mem memory.Allocator) (arrow.Array, error) {
	src := r.x.LatestValues()
	n := len(codes)
	if n > 0 && int(codes[n-1]-codes[0]) == n-1 {
		return array.NewSlice(src, int64(codes[0]), int64(codes[0])+int64(n)), nil
	}
	if f, ok := src.(*array.Float64); ok && (f.NullN() == 0 || allValid(f, codes)) {
		vals := f.Float64Values()
		buf, out := allocFixed[float64](mem, n)
		for i, c := range codes {
			out[i] = vals[c]
		}
		return fixedArray(arrow.PrimitiveTypes.Float64, n, buf), nil
	}
	return takeCodes(ctx, src, codes, mem)
}

func allValid(a arrow.Array, codes []int32) bool {
	for _, c := range codes {
		if a.IsNull(int(c)) {
			return false
		}
	}
	return true
}

// Dictionaries builds the series_id dictionary (the selected ids, in
// order) and one dictionary per selected attribute (its values for the
// selected series, dictionaries in the index decoded). A contiguous
// selection slices the index columns without copying.
func (r *SnapshotReader) Dictionaries(ctx context.Context, sel Selection, attrs []int, mem memory.Allocator) (ids arrow.Array, values []arrow.Array, err error) {
	all, err := r.x.IDs() // checked on first use, like the attributes
	if err != nil {
		return nil, nil, fmt.Errorf("dataset %q snapshot %d: %w", r.info.Dataset, r.info.SnapshotID, err)
	}
	lo, hi, span := sel.Span()
	if span {
		ids = array.NewSlice(all, int64(lo), int64(hi))
	} else {
		bld := array.NewStringBuilder(mem)
		bytes := 0
		for _, c := range sel.list {
			bytes += all.ValueLen(int(c))
		}
		bld.Reserve(len(sel.list))
		bld.ReserveData(bytes)
		for _, c := range sel.list {
			bld.Append(all.Value(int(c)))
		}
		ids = bld.NewArray()
		bld.Release()
	}
	defer func() {
		// error returns hand back what was built, so it is released here
		if err != nil {
			ids.Release()
			for _, a := range values {
				a.Release()
			}
			ids, values = nil, nil
		}
	}()
	var idx arrow.Array // the selected codes as int32, built once if needed
	defer func() {
		if idx != nil {
			idx.Release()
		}
	}()
	take := func(src arrow.Array) (arrow.Array, error) {
		if span {
			return array.NewSlice(src, int64(lo), int64(hi)), nil
		}
		if idx == nil {
			idx = int32Array(mem, sel.list)
		}
		return compute.TakeArray(compute.WithAllocator(ctx, mem), src, idx)
	}
	for _, pos := range attrs {
		src, err := r.attr(pos)
		if err != nil {
			return ids, values, err // the deferred cleanup releases them
		}
		var a arrow.Array
		// A gather (and a dictionary's decoding is one) runs where no
		// recover reaches, and a mapped column may have changed since open
		// (a file rewritten in place): the rows about to be gathered are
		// checked first, and only those (gathercheck.go). A slice is
		// serialised in this goroutine.
		if d, dict := src.(*array.Dictionary); !span {
			err = checkGather(src, sel.list)
		} else if dict {
			err = checkDictSpan(d, lo, hi)
		}
		if err != nil {
			return ids, values, gatherError(r.shape.attrs[pos].Name, err)
		}
		if d, ok := src.(*array.Dictionary); ok {
			// Decode: the dictionary's values at the selected rows.
			if vals, ok := d.Dictionary().(*array.String); ok {
				a = decodeStrings(d, vals, lo, hi, span, sel.list, mem)
			} else {
				var ind arrow.Array
				if ind, err = take(d.Indices()); err == nil {
					a, err = compute.TakeArray(compute.WithAllocator(ctx, mem), d.Dictionary(), ind)
					ind.Release()
				}
			}
		} else {
			a, err = take(src)
		}
		if err != nil {
			return ids, values, fmt.Errorf("attribute %s: %w", r.shape.attrs[pos].Name, err)
		}
		values = append(values, a)
	}
	return ids, values, nil
}

// decodeStrings is utf8 dictionary d (vals its dictionary) decoded at
// rows lo..hi (span) or at rows list, as a plain utf8 array: a copy of
// each selected value, two passes (sizes, then bytes). Its caller has
// checked d's indices at those rows and vals' offsets. (arrow-go v18.9's take of a
// small utf8 dictionary by many indices was seen to overrun the data
// buffer it presizes, a panic in a goroutine of its own.)
func decodeStrings(d *array.Dictionary, vals *array.String, lo, hi int, span bool, list []int32, mem memory.Allocator) arrow.Array {
	n := hi - lo
	if !span {
		n = len(list)
	}
	row := func(k int) int {
		if span {
			return lo + k
		}
		return int(list[k])
	}
	size := 0
	for k := range n {
		if r := row(k); d.IsValid(r) {
			size += vals.ValueLen(d.GetValueIndex(r))
		}
	}
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(n)
	b.ReserveData(size)
	for k := range n {
		r := row(k)
		if d.IsNull(r) {
			b.AppendNull()
			continue
		}
		j := d.GetValueIndex(r)
		if vals.IsNull(j) {
			b.AppendNull()
		} else {
			b.Append(vals.Value(j))
		}
	}
	return b.NewArray()
}

func takeCodes(ctx context.Context, src arrow.Array, codes []int32, mem memory.Allocator) (arrow.Array, error) {
	if err := checkGather(src, codes); err != nil {
		return nil, err
	}
	idx := int32Array(mem, codes)
	defer idx.Release()
	return compute.TakeArray(compute.WithAllocator(ctx, mem), src, idx)
}
