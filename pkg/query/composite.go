package query

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/livedelta"
)

// Composite is the Reader of a base snapshot with live writes over it: the
// rows of a series are the base's and the delta runs', merged by period,
// where for one (series, period) the newest run wins (generation
// precedence: base 0, each run by its sequence). Series that exist only in
// the delta get codes after the base's, in id order. It shares everything
// with its base and its delta State, the State's list of those series
// (livedelta.State.Fresh) included, so building one costs a pass over the
// runs, not over the series: the write path builds one at every
// acknowledged write.
type Composite struct {
	base *SnapshotReader
	st   *livedelta.State
	runs []*livedelta.Run // newest first: the precedence order
	nb   int              // base series

	fresh []*livedelta.FreshSeries // series only in the delta, by id; code nb+j is fresh[j]
	info  Info
}

// NewComposite is base with st merged on read. st's series that its base
// lacks are the ones the composite adds after base's, so st must have
// been counted over base (the write path appends and rebases over the
// base it serves).
func NewComposite(base *SnapshotReader, st *livedelta.State) *Composite {
	c := &Composite{base: base, st: st, nb: base.x.Len(), fresh: st.Fresh()}
	rs := st.Runs()
	for i := len(rs) - 1; i >= 0; i-- {
		c.runs = append(c.runs, rs[i])
	}
	c.info = base.info
	c.info.Series += int64(len(c.fresh))
	c.info.Rows += st.Added()
	return c
}

// findFresh is the index in c.fresh of the first series whose id is not
// below id, and whether it is id.
func (c *Composite) findFresh(id string) (int, bool) {
	return slices.BinarySearchFunc(c.fresh, id, func(f *livedelta.FreshSeries, id string) int { return strings.Compare(f.ID, id) })
}

// State is the delta merged over the base.
func (c *Composite) State() *livedelta.State { return c.st }

// Base is the base snapshot's reader.
func (c *Composite) Base() *SnapshotReader { return c.base }

func (c *Composite) Info() Info    { return c.info }
func (c *Composite) Shape() *Shape { return c.base.shape }

func (c *Composite) SeriesID(code int) string {
	if code < c.nb {
		return c.base.SeriesID(code)
	}
	return c.fresh[code-c.nb].ID
}

// Select merges the base's selection with the delta-only series, in id
// order.
func (c *Composite) Select(s Selector) (Selection, error) {
	switch s.Kind {
	case ByIDs:
		codes := make([]int32, len(s.IDs))
		c.base.x.LookupMany(s.IDs, codes)
		var missing []string
		for i, code := range codes {
			if code >= 0 {
				continue
			}
			if j, ok := c.findFresh(s.IDs[i]); ok {
				codes[i] = int32(c.nb + j)
				continue
			}
			missing = append(missing, s.IDs[i])
		}
		if len(missing) > 0 {
			return Selection{}, c.base.notFoundSeries(missing, len(s.IDs))
		}
		return c.ordered(codes), nil
	case ByPrefix:
		lo, hi := c.base.x.Prefix(s.Prefix)
		nlo, _ := c.findFresh(s.Prefix)
		nhi := nlo
		for nhi < len(c.fresh) && strings.HasPrefix(c.fresh[nhi].ID, s.Prefix) {
			nhi++
		}
		if nhi == nlo {
			return CodeRange(lo, hi), nil
		}
		codes := make([]int32, 0, hi-lo+nhi-nlo)
		for i := lo; i < hi; i++ {
			codes = append(codes, int32(i))
		}
		for j := nlo; j < nhi; j++ {
			codes = append(codes, int32(c.nb+j))
		}
		return c.ordered(codes), nil
	case ByCategory:
		sel, err := c.base.Select(s)
		if err != nil && !isNotFound(err) {
			return Selection{}, err
		}
		var codes []int32
		for k := 0; k < sel.Len(); k++ {
			codes = append(codes, int32(sel.Code(k)))
		}
		pos := c.base.shape.category
		for j, f := range c.fresh {
			if v, ok := stringAt(f.Attr(pos)); ok && MatchCategory(v, s.Category) {
				codes = append(codes, int32(c.nb+j))
			}
		}
		if len(codes) == 0 {
			return Selection{}, err
		}
		return c.ordered(codes), nil
	}
	return Selection{}, Errorf(ErrInvalid, "no series selector")
}

func isNotFound(err error) bool {
	qe, ok := err.(*Error)
	return ok && qe.Kind == ErrNotFound
}

// ordered sorts codes by series id and drops duplicates. Delta-only
// series have codes after the base's whatever their ids, so id order is
// not code order: only an ascending list may become a range (CodeList
// turns any list whose ends are n-1 apart into one).
func (c *Composite) ordered(codes []int32) Selection {
	slices.SortFunc(codes, func(a, b int32) int { return strings.Compare(c.SeriesID(int(a)), c.SeriesID(int(b))) })
	codes = slices.Compact(codes)
	if slices.IsSorted(codes) {
		return CodeList(codes)
	}
	return Selection{list: codes}
}

// source is one generation's rows of a series inside a period range.
type source struct {
	rec    arrow.RecordBatch
	ps     []arrow.Date32 // the whole period column of rec
	lo, hi int
}

// find is the run-local number of series code in run r: by its code for a
// base series of a run counted over this base (Run.FindCode), else by its
// id, which *id caches across runs ("" until first needed).
func (c *Composite) find(r *livedelta.Run, code int, id *string) (int, bool) {
	if code < c.nb {
		if i, ok, usable := r.FindCode(c.base, int32(code)); usable {
			return i, ok
		}
	}
	if *id == "" {
		*id = c.SeriesID(code)
	}
	return r.Find(*id)
}

// sources are a series' rows in rg per generation, newest first; the base
// last. ok is false when no delta run holds the series. A walk (nil: none)
// finds the series in each run from where its last series was.
func (c *Composite) sources(code int, rg Range, dst []source, w *Walk) ([]source, bool, error) {
	var id string
	if w != nil {
		id = c.SeriesID(code)
	}
	for k, r := range c.runs {
		var i int
		var ok bool
		if w != nil {
			i, ok = w.find(k, r, id)
		} else {
			i, ok = c.find(r, code, &id)
		}
		if !ok {
			continue
		}
		lo, hi := r.Rows(i)
		ps := r.Periods()
		lo, hi = clip(ps, lo, hi, rg)
		dst = append(dst, source{rec: r.Record(), ps: ps, lo: lo, hi: hi})
	}
	if len(dst) == 0 {
		return dst, false, nil
	}
	if code < c.nb {
		// The base's rows: in a tiered snapshot its cold piece, then its
		// hot one (their periods never overlap, so their order among the
		// sources does not matter).
		e := c.base.x.Entry(code)
		if e.Cold.Rows > 0 {
			rec, lo, hi, err := c.base.s.ColdRange(e, rg.From, rg.To)
			if err != nil {
				return dst, true, fmt.Errorf("dataset %q snapshot %d: %w", c.info.Dataset, c.info.SnapshotID, err)
			}
			if rec != nil {
				dst = append(dst, source{rec: rec, ps: rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values(), lo: int(lo), hi: int(hi)})
			}
		}
		b, lo, hi, err := c.base.s.Range(e, rg.From, rg.To)
		if err != nil {
			return dst, true, fmt.Errorf("dataset %q snapshot %d: %w", c.info.Dataset, c.info.SnapshotID, err)
		}
		if hi > lo {
			dst = append(dst, source{rec: c.base.s.Batch(b), ps: c.base.s.Periods(b), lo: int(lo), hi: int(hi)})
		}
	}
	return dst, true, nil
}

// clip narrows rows [lo, hi) (periods ascending) to the range.
func clip(ps []arrow.Date32, lo, hi int, rg Range) (int, int) {
	s := ps[lo:hi]
	a := sort.Search(len(s), func(i int) bool { return int32(s[i]) >= rg.From })
	z := a + sort.Search(len(s)-a, func(i int) bool { return int32(s[a+i]) > rg.To })
	return lo + a, lo + z
}

// Rows merges the generations by period: at each period the newest
// generation holding it wins, and runs of consecutive winning rows from one
// generation become one piece.
func (c *Composite) Rows(code int, rg Range, dst []Piece) ([]Piece, error) {
	return c.rows(code, rg, dst, nil)
}

func (c *Composite) rows(code int, rg Range, dst []Piece, w *Walk) ([]Piece, error) {
	var buf [4]source
	srcs, hasDelta, err := c.sources(code, rg, buf[:0], w)
	if err != nil {
		return dst, err
	}
	if !hasDelta {
		if code < c.nb {
			return c.base.Rows(code, rg, dst)
		}
		return dst, nil
	}
	return mergeSources(srcs, dst), nil
}

// Walk reads the series of a Composite in id order, as a compaction
// does: each delta run is walked with a cursor instead of searched once
// per series, so finding every series in every run costs a step per run
// series rather than a binary search per run and base series. Its Rows
// are the Composite's Rows; a series before the last one asked for
// (not in id order) restarts the cursors. Not safe for concurrent use.
type Walk struct {
	c    *Composite
	pos  []int // per run: its first series not before the last id
	last string
}

// Walk starts a walk over c's series.
func (c *Composite) Walk() *Walk { return &Walk{c: c, pos: make([]int, len(c.runs))} }

// Rows is Composite.Rows, for series asked for in id order.
func (w *Walk) Rows(code int, rg Range, dst []Piece) ([]Piece, error) {
	return w.c.rows(code, rg, dst, w)
}

// find is run k's series number of id, stepping its cursor forward.
func (w *Walk) find(k int, r *livedelta.Run, id string) (int, bool) {
	if k == 0 {
		if id < w.last {
			clear(w.pos) // out of order: start again
		}
		w.last = id
	}
	i, n := w.pos[k], r.NumSeries()
	for i < n && r.SeriesID(i) < id {
		i++
	}
	w.pos[k] = i
	return i, i < n && r.SeriesID(i) == id
}

// mergeSources merges one series' rows from srcs (newest first; each
// source's periods ascending) into pieces of dst. At each period the first
// source holding it wins and the others' rows at that period are shadowed.
// A winner's rows below every other source's next period are nobody
// else's, so they are taken as one piece found by binary search rather
// than row by row: a compaction merges every series of the base this way,
// and a 1% delta leaves runs of about a hundred base rows between its own.
func mergeSources(srcs []source, dst []Piece) []Piece {
	var curBuf [4]int
	cur := curBuf[:0]
	for _, s := range srcs {
		cur = append(cur, s.lo)
	}
	for {
		// the smallest head period; the first (newest) source holding it wins
		win := -1
		var p arrow.Date32
		for i, s := range srcs {
			if cur[i] < s.hi && (win < 0 || s.ps[cur[i]] < p) {
				win, p = i, s.ps[cur[i]]
			}
		}
		if win < 0 {
			return dst
		}
		// Shadow the others' rows at p; the lowest head left among them
		// (next) bounds the winner's run.
		bounded := false
		var next arrow.Date32
		for i, s := range srcs {
			if i == win || cur[i] >= s.hi {
				continue
			}
			if s.ps[cur[i]] == p {
				cur[i]++
				if cur[i] >= s.hi {
					continue
				}
			}
			if q := s.ps[cur[i]]; !bounded || q < next {
				bounded, next = true, q
			}
		}
		w := srcs[win]
		lo, end := cur[win], w.hi
		if bounded {
			k, _ := slices.BinarySearch(w.ps[lo+1:w.hi], next) // the first period >= next
			end = lo + 1 + k
		}
		cur[win] = end
		if n := len(dst); n > 0 && dst[n-1].Rec == w.rec && dst[n-1].Hi == int64(lo) {
			dst[n-1].Hi = int64(end)
		} else {
			dst = append(dst, Piece{Rec: w.rec, Lo: int64(lo), Hi: int64(end)})
		}
	}
}

// LatestRow is the last merged row in rg whose value is not null. The
// delta's last row in rg decides it against the base's latest, without
// merging the series' history (see deltaLatest); only when that row's value
// is null are the generations merged.
func (c *Composite) LatestRow(code int, rg Range) (Piece, bool, error) {
	dp, dper, found, decisive := c.deltaLatest(code, rg)
	if !decisive {
		ps, err := c.Rows(code, rg, nil)
		if err != nil {
			return Piece{}, false, err
		}
		p, ok := LastValid(ps)
		return p, ok, nil
	}
	if code >= c.nb {
		return dp, found, nil
	}
	bp, ok, err := c.base.LatestRow(code, rg)
	if err != nil || !found {
		return bp, ok, err
	}
	if ok && int32(bp.Rec.Column(datafile.ColumnPeriod).(*array.Date32).Value(int(bp.Lo))) > dper {
		return bp, true, nil
	}
	return dp, true, nil
}

// deltaLatest is the delta's last row of series code in rg: of each run's
// last row in the range, the latest period's, the newest run's on a tie.
// When found and its value is not null it decides the series' latest
// against the base's own: a base row after it is not shadowed by any delta
// row (the delta has none later), and a base row at or before it is
// shadowed or earlier. decisive is false only when that row's value is
// null: then an earlier row may be the answer and the generations must be
// merged.
func (c *Composite) deltaLatest(code int, rg Range) (p Piece, period int32, found, decisive bool) {
	var id string
	for _, r := range c.runs { // newest first: a tie keeps the newer
		i, ok := c.find(r, code, &id)
		if !ok {
			continue
		}
		lo, hi := r.Rows(i)
		ps := r.Periods()
		if lo, hi = clip(ps, lo, hi, rg); hi == lo {
			continue
		}
		if last := int32(ps[hi-1]); !found || last > period {
			p, period, found = Piece{Rec: r.Record(), Lo: int64(hi - 1), Hi: int64(hi)}, last, true
		}
	}
	if found && p.Rec.Column(datafile.ColumnValue).IsNull(int(p.Lo)) {
		return Piece{}, 0, true, false
	}
	return p, period, found, true
}

// LastValid is the last row of pieces ps (a series' merged rows, as Rows
// yields them) whose value is not null: LatestRow over rows already read,
// for a caller that has them (compaction reads every series' rows, and
// asking LatestRow again would look the series up in every run again).
func LastValid(ps []Piece) (Piece, bool) {
	for k := len(ps) - 1; k >= 0; k-- {
		vals := ps[k].Rec.Column(datafile.ColumnValue)
		for i := ps[k].Hi - 1; i >= ps[k].Lo; i-- {
			if vals.IsValid(int(i)) {
				return Piece{Rec: ps[k].Rec, Lo: i, Hi: i + 1}, true
			}
		}
	}
	return Piece{}, false
}

func (c *Composite) inDelta(code int) bool {
	if code >= c.nb {
		return true
	}
	var id string
	for _, r := range c.runs {
		if _, ok := c.find(r, code, &id); ok {
			return true
		}
	}
	return false
}

// Latest is the base index's answer for series the delta does not touch,
// else the delta's last row against it (see LatestRow).
func (c *Composite) Latest(code int) (int32, bool) {
	_, dper, found, decisive := c.deltaLatest(code, AllPeriods)
	if decisive {
		if code < c.nb {
			if bp, ok := c.base.Latest(code); ok && (!found || bp > dper) {
				return bp, true
			}
		}
		return dper, found
	}
	pc, ok, err := c.LatestRow(code, AllPeriods)
	if err != nil || !ok {
		return 0, false
	}
	return int32(pc.Rec.Column(datafile.ColumnPeriod).(*array.Date32).Value(int(pc.Lo))), true
}

// LatestValues gathers each code's latest value from wherever it lies: the
// base index's latest_value column, or the delta's last row when it is
// later (see LatestRow); a series' history is merged only when the delta's
// last row is null.
func (c *Composite) LatestValues(ctx context.Context, codes []int32, mem memory.Allocator) (arrow.Array, error) {
	idx := c.base.x.LatestValues()
	b := array.NewBuilder(mem, idx.DataType())
	defer b.Release()
	b.Reserve(len(codes))
	for _, code := range codes {
		var err error
		dp, dper, found, decisive := c.deltaLatest(int(code), AllPeriods)
		switch {
		case !decisive:
			var pc Piece
			var ok bool
			if pc, ok, err = c.LatestRow(int(code), AllPeriods); err == nil && ok {
				err = appendCell(b, pc.Rec.Column(datafile.ColumnValue), int(pc.Lo))
			} else if err == nil {
				b.AppendNull()
			}
		case int(code) < c.nb && c.baseLater(int(code), dper, found):
			err = appendCell(b, idx, int(code))
		case found:
			err = appendCell(b, dp.Rec.Column(datafile.ColumnValue), int(dp.Lo))
		default:
			b.AppendNull()
		}
		if err != nil {
			return nil, err
		}
	}
	return b.NewArray(), nil
}

// baseLater reports whether base series code's latest (from the index) is
// the answer against the delta's last row at period dper (found says there
// is one): it is later, or the delta has no row. A series whose base values
// are all null answers from the index too when the delta has none.
func (c *Composite) baseLater(code int, dper int32, found bool) bool {
	bp, ok := c.base.Latest(code)
	return !found || (ok && bp > dper)
}

// Dictionaries are the base's when the selection holds base series only;
// otherwise they are built cell by cell from the base index and the runs.
func (c *Composite) Dictionaries(ctx context.Context, sel Selection, attrs []int, mem memory.Allocator) (ids arrow.Array, values []arrow.Array, err error) {
	_, hi, span := sel.Span()
	if (span && hi <= c.nb) || (!span && allBelow(sel.List(), c.nb)) {
		return c.base.Dictionaries(ctx, sel, attrs, mem)
	}
	n := sel.Len()
	idb := array.NewStringBuilder(mem)
	defer idb.Release()
	for k := 0; k < n; k++ {
		idb.Append(c.SeriesID(sel.Code(k)))
	}
	ids = idb.NewArray()
	for _, pos := range attrs {
		var base arrow.Array
		if base, err = c.base.attr(pos); err != nil {
			ids.Release()
			for _, v := range values {
				v.Release()
			}
			return nil, nil, err
		}
		b := array.NewBuilder(mem, c.base.shape.attrs[pos].Field.Type.(*arrow.DictionaryType).ValueType)
		for k := 0; k < n && err == nil; k++ {
			code := sel.Code(k)
			if code < c.nb {
				err = appendCell(b, base, code)
			} else {
				a, row := c.fresh[code-c.nb].Attr(pos)
				err = appendCell(b, a, row)
			}
		}
		values = append(values, b.NewArray())
		b.Release()
		if err != nil {
			ids.Release()
			for _, v := range values {
				v.Release()
			}
			return nil, nil, fmt.Errorf("attribute %s: %w", c.base.shape.attrs[pos].Name, err)
		}
	}
	return ids, values, nil
}

func allBelow(list []int32, n int) bool {
	for _, c := range list {
		if int(c) >= n {
			return false
		}
	}
	return true
}

// Attr is where attribute a of series id is held: the base index, or the
// run that carried it (livedelta.Known).
func (c *Composite) Attr(id string, a int) (arrow.Array, int, bool) {
	if arr, row, ok := c.base.Attr(id, a); ok {
		return arr, row, true
	}
	if j, ok := c.findFresh(id); ok {
		arr, row := c.fresh[j].Attr(a)
		return arr, row, true
	}
	return nil, 0, false
}

func stringAt(a arrow.Array, i int) (string, bool) {
	if d, ok := a.(*array.Dictionary); ok {
		if d.IsNull(i) {
			return "", false
		}
		return stringAt(d.Dictionary(), d.GetValueIndex(i))
	}
	s, ok := a.(*array.String)
	if !ok || s.IsNull(i) {
		return "", false
	}
	return s.Value(i), true
}

// appendCell appends row i of a (a dictionary read through) to b, which
// has a's (value) type.
func appendCell(b array.Builder, a arrow.Array, i int) error {
	if d, ok := a.(*array.Dictionary); ok {
		if d.IsNull(i) {
			b.AppendNull()
			return nil
		}
		return appendCell(b, d.Dictionary(), d.GetValueIndex(i))
	}
	if a.IsNull(i) {
		b.AppendNull()
		return nil
	}
	switch bb := b.(type) {
	case *array.Float64Builder:
		bb.Append(a.(*array.Float64).Value(i))
	case *array.Float32Builder:
		bb.Append(a.(*array.Float32).Value(i))
	case *array.Int64Builder:
		bb.Append(a.(*array.Int64).Value(i))
	case *array.Int32Builder:
		bb.Append(a.(*array.Int32).Value(i))
	case *array.StringBuilder:
		bb.Append(a.(*array.String).Value(i))
	case *array.BooleanBuilder:
		bb.Append(a.(*array.Boolean).Value(i))
	case *array.Date32Builder:
		bb.Append(a.(*array.Date32).Value(i))
	default:
		return b.AppendValueFromString(a.ValueStr(i))
	}
	return nil
}
