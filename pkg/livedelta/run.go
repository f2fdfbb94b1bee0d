package livedelta

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
)

// Run is an immutable set of rows from one or more writes, sorted by
// (series id, period), at most one row per key.
type Run struct {
	seq   uint64        // precedence: the sequence number of its newest write
	pos   uint64        // the WAL position through which it holds its writes
	ids   *array.String // distinct series ids, sorted bytewise
	start []int32       // rows of series i are [start[i], start[i+1])
	rec   arrow.RecordBatch
	// attrs holds each attribute's value per series (len(ids)); given[i]
	// says whether the write carried attributes for series i.
	attrs []arrow.Array
	given []bool
	// added counts rows that shadow nothing older (base or earlier runs):
	// what the run adds to the dataset's row count. Set by State.Apply.
	added int64
	bytes int64
	// fresh lists the run-local series the base does not have (set with
	// added), so a view finds the delta-only series without looking every
	// series of every run up in the base.
	fresh []int32
	// codes[i] is run-local series i's code in the base of key index
	// coder (-1: that base lacks it), set where the run's rows are counted
	// (keyIndex.addEntries, a bulk replay) and carried through merges, so
	// that a merge of runs counted by one index orders base series by
	// their codes (the base lists ids in order) instead of comparing id
	// bytes: most of a merge's series selection for runs of ~1 row a
	// series. A run copied over another base is counted, so coded, again.
	codes []int32
	coder *keyIndex
}

// Fresh are the run-local numbers of the series its base lacks.
func (r *Run) Fresh() []int32 { return r.fresh }

// Seq is the run's precedence.
func (r *Run) Seq() uint64 { return r.seq }

// Len is the number of rows.
func (r *Run) Len() int { return int(r.rec.NumRows()) }

// NumSeries is the number of distinct series.
func (r *Run) NumSeries() int { return r.ids.Len() }

// SeriesID is the id of the run's i-th series.
func (r *Run) SeriesID(i int) string { return r.ids.Value(i) }

// Record is the run's rows in the data file's schema; series_code holds
// the run-local series number.
func (r *Run) Record() arrow.RecordBatch { return r.rec }

// Periods is the run's period column.
func (r *Run) Periods() []arrow.Date32 {
	return r.rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
}

// Find returns the run-local number of series id.
func (r *Run) Find(id string) (int, bool) {
	n := r.ids.Len()
	i := sort.Search(n, func(i int) bool { return r.ids.Value(i) >= id })
	return i, i < n && r.ids.Value(i) == id
}

// FindCode is Find for base series code of base, by its code rather than
// its id: a binary search over the run's codes (integers, which the base
// numbers in id order) where Find compares id bytes at every step. usable
// is false when the run cannot answer so — it was counted over another
// base, or it holds series its base lacks, whose code -1 breaks the
// order — and the caller must use Find.
func (r *Run) FindCode(base Base, code int32) (i int, found, usable bool) {
	if r.coder == nil || r.coder.base != base || len(r.fresh) > 0 || len(r.codes) != r.NumSeries() {
		return 0, false, false
	}
	i, found = slices.BinarySearch(r.codes, code)
	return i, found, true
}

// Rows is the row range of run-local series i.
func (r *Run) Rows(i int) (lo, hi int) { return int(r.start[i]), int(r.start[i+1]) }

// Attrs returns attribute a's column (one value per run-local series) and
// whether series i's write carried attributes.
func (r *Run) Attrs(a int) arrow.Array { return r.attrs[a] }

// Given reports whether the writes of run-local series i carried its
// attributes.
func (r *Run) Given(i int) bool { return r.given[i] }

// newRun builds a run from a normalized write (see Normalize): sorts it by
// (series id, period) and keeps the later of two rows with one key, so the
// concatenation of an older and a newer write merges them with the newer
// winning.
//
// The sort ranks the distinct ids once (hashing a row's id is cheaper than
// comparing strings at every step of a sort), puts rows in rank order with
// one counting pass (stable: rows of a series keep their input order), then
// sorts each series' rows by period, stably, so of two rows with one key
// the later input row comes last.
func newRun(ctx context.Context, mem memory.Allocator, s *Schema, w arrow.RecordBatch, seq uint64, keys *keyIndex) (*Run, []*keyEntry, error) {
	ids := w.Column(0).(*array.String)
	periods := w.Column(1).(*array.Date32).Date32Values()
	n := int(w.NumRows())
	if keys == nil {
		keys = newKeyIndex(nil)
	}
	// A row's series is found once in the key index (a map probe); the
	// distinct series are then sorted mostly by their base codes.
	var distinct []*keyEntry
	rowRank := make([]int32, n)
	ents := probeEntries(keys, ids, n)
	for i := 0; i < n; i++ {
		var e *keyEntry
		if ents != nil {
			e = ents[i]
		}
		if e == nil {
			e = keys.entry(ids.Value(i))
		}
		if e.stamp != seq || int(e.rank) >= len(distinct) || distinct[e.rank] != e {
			e.stamp, e.rank = seq, int32(len(distinct))
			distinct = append(distinct, e)
		}
		rowRank[i] = e.rank
	}
	d := len(distinct)
	byID := sortEntries(distinct)
	rank := make([]int32, d)
	sortedEntries := make([]*keyEntry, d)
	for r, i := range byID {
		rank[i] = int32(r)
		sortedEntries[r] = distinct[i]
	}
	// Counting sort by rank: group[r] is where series r's rows start.
	group := make([]int32, d+1)
	for _, r := range rowRank {
		group[rank[r]+1]++
	}
	for r := 0; r < d; r++ {
		group[r+1] += group[r]
	}
	next := slices.Clone(group[:d])
	order := make([]int32, n)
	for i, r := range rowRank {
		g := rank[r]
		order[next[g]] = int32(i)
		next[g]++
	}
	// Each series by period, stably; then of equal keys keep the last.
	keep := order[:0]
	first := make([]bool, 0, n)
	for r := 0; r < d; r++ {
		g := order[group[r]:group[r+1]]
		keep, first = keepLast(g, periods, keep, first)
	}
	r, err := assemble(ctx, mem, s, seq, w, keep, first)
	return r, sortedEntries, err
}

// sortEntries returns the positions of entries in id order, as
// compareEntries orders them. The series the base has are ordered by
// their codes as integers (one sort of code<<32|position keys, no
// comparison callback: what sorting a batch's 10k series by comparator
// cost was a tenth of a write's CPU), the others by id, and the two lists
// are merged by id.
func sortEntries(es []*keyEntry) []int32 {
	keys := make([]uint64, 0, len(es))
	var other []int32
	for i, e := range es {
		if e.code >= 0 {
			keys = append(keys, uint64(e.code)<<32|uint64(i))
		} else {
			other = append(other, int32(i))
		}
	}
	slices.Sort(keys)
	out := make([]int32, 0, len(es))
	if len(other) == 0 {
		for _, k := range keys {
			out = append(out, int32(uint32(k)))
		}
		return out
	}
	slices.SortFunc(other, func(a, b int32) int { return compareEntries(es[a], es[b]) })
	i, j := 0, 0
	for i < len(keys) || j < len(other) {
		if j == len(other) || i < len(keys) && compareEntries(es[uint32(keys[i])], es[other[j]]) < 0 {
			out = append(out, int32(uint32(keys[i])))
			i++
		} else {
			out = append(out, other[j])
			j++
		}
	}
	return out
}

// Prepared is a normalized write already sorted into a run, off the
// write path's lock: what Prepare builds on a writer's own goroutine, so
// that the write path, which applies writes one at a time in log order,
// is left only the key index's bookkeeping (State.AppendPrepared).
type Prepared struct {
	w     arrow.RecordBatch // the normalized write (held)
	base  Base
	run   *Run
	codes []int32 // per run-local series: its code in base, -1 if none
	// inBase is, per row of run, whether base holds the row's period for
	// its series: the base's side of counting the rows a write adds, done
	// here (on the writer's goroutine, beside the fsync) rather than by the
	// applier, which applies one write at a time.
	inBase []bool
}

// Release drops the write Prepare held.
func (p *Prepared) Release() {
	if p.w != nil {
		p.w.Release()
		p.w = nil
	}
}

// Prepare sorts normalized write w into a run as newRun does, given each
// row's series code in base (-1: base lacks it; Normalize's look-ups):
// base series are ordered by code with one integer sort of code<<32|row
// keys (stable: rows of a series keep their input order), the others by
// id, and the two are merged by id. It reads nothing the write path
// changes, so it may run on any goroutine.
func Prepare(ctx context.Context, mem memory.Allocator, s *Schema, w arrow.RecordBatch, base Base, codes []int32) (*Prepared, error) {
	n := int(w.NumRows())
	if len(codes) != n {
		return nil, fmt.Errorf("delta: %d codes for %d rows", len(codes), n)
	}
	ids := w.Column(0).(*array.String)
	periods := w.Column(1).(*array.Date32).Date32Values()
	sc := prepareScratchPool.Get().(*prepareScratch)
	defer func() {
		if n <= mergeScratchMax { // as merges: one rare huge write does not pin its scratch
			prepareScratchPool.Put(sc)
		}
	}()
	keys := slices.Grow(sc.keys[:0], n)
	var other []int32
	var maxCode int32
	for i, c := range codes {
		if c >= 0 {
			keys = append(keys, uint64(c)<<32|uint64(i))
			maxCode = max(maxCode, c)
		} else {
			other = append(other, int32(i))
		}
	}
	sc.keys, sc.tmp = keys, slices.Grow(sc.tmp[:0], len(keys))[:len(keys)]
	keys = sortByCode(keys, sc.tmp, uint32(maxCode))
	slices.SortStableFunc(other, func(a, b int32) int { return strings.Compare(ids.Value(int(a)), ids.Value(int(b))) })
	order := slices.Grow(sc.order[:0], n)
	for i, j := 0, 0; i < len(keys) || j < len(other); {
		if j == len(other) || i < len(keys) && ids.Value(int(uint32(keys[i]))) < ids.Value(int(other[j])) {
			order = append(order, int32(uint32(keys[i])))
			i++
		} else {
			order = append(order, other[j])
			j++
		}
	}
	sc.order = order
	// Each series by period, stably; then of equal keys keep the last.
	keep := slices.Grow(sc.keep[:0], n)
	first := slices.Grow(sc.first[:0], n)
	runCodes := slices.Grow(sc.codes[:0], n)
	for lo := 0; lo < n; {
		hi := lo + 1
		if c := codes[order[lo]]; c >= 0 {
			for hi < n && codes[order[hi]] == c {
				hi++
			}
		} else {
			id := ids.Value(int(order[lo]))
			for hi < n && codes[order[hi]] < 0 && ids.Value(int(order[hi])) == id {
				hi++
			}
		}
		g := order[lo:hi]
		keep, first = keepLast(g, periods, keep, first)
		runCodes = append(runCodes, codes[order[lo]])
		lo = hi
	}
	sc.keep, sc.first, sc.codes = keep, first, runCodes
	runCodes = slices.Clone(runCodes) // the Prepared keeps it
	r, err := assemble(ctx, mem, s, 0, w, keep, first)
	if err != nil {
		return nil, err
	}
	var inBase []bool
	if base != nil {
		inBase = make([]bool, r.Len())
		markInBase(base, runCodes, r, inBase, sc)
	}
	w.Retain()
	return &Prepared{w: w, base: base, run: r, codes: runCodes, inBase: inBase}, nil
}

// prepareScratch holds Prepare's temporaries (sort keys, row orders, the
// base probes), recycled from write to write: fresh, they were most of a
// DoPut's garbage (~100 B a row, every write), and so of the collections
// whose marking competes with writes for the cores.
type prepareScratch struct {
	keys, tmp          []uint64
	order, keep, codes []int32
	first              []bool
	probes             []baseProbe
	at                 []arrow.Date32
}

var prepareScratchPool = sync.Pool{New: func() any { return new(prepareScratch) }}

// parallelProbeRows is the size of a write from which newRun probes the
// key index on every core: a replay's chunks of a million rows, where the
// probe (hashing each row's id) is the largest single cost.
var parallelProbeRows = 1 << 16 // a variable for the tests

// probeEntries looks every row's series up in the key index, split over
// the cores: read-only map probes, safe together because nothing writes
// the index meanwhile (it belongs to the write path, which is on this
// goroutine, waiting). A nil entry is a series the index lacks yet; the
// caller adds those one by one. Nil (probe as you go) for small writes.
func probeEntries(keys *keyIndex, ids *array.String, n int) []*keyEntry {
	parts := min(runtime.GOMAXPROCS(0), 4)
	if n < parallelProbeRows || parts < 2 || len(keys.series) == 0 {
		return nil
	}
	ents := make([]*keyEntry, n)
	var wg sync.WaitGroup
	for p := 0; p < parts; p++ {
		lo, hi := n*p/parts, n*(p+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				ents[i] = keys.series[ids.Value(i)]
			}
		}()
	}
	wg.Wait()
	return ents
}

// sortByPeriod orders rows by period, keeping the input order of equal
// periods. Series in one write are mostly a few rows already in order.
func sortByPeriod(rows []int32, periods []arrow.Date32) {
	if len(rows) > 32 {
		slices.SortStableFunc(rows, func(a, b int32) int { return cmp.Compare(periods[a], periods[b]) })
		return
	}
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && periods[rows[j-1]] > periods[rows[j]]; j-- {
			rows[j-1], rows[j] = rows[j], rows[j-1]
		}
	}
}

// assemble builds a run of rows (in output order) of the normalized write
// w; first[i] says row i starts a series.
func assemble(ctx context.Context, mem memory.Allocator, s *Schema, seq uint64, w arrow.RecordBatch, rows []int32, first []bool) (_ *Run, err error) {
	n := len(rows)
	given := w.Column(int(w.NumCols()) - 1).(*array.Boolean)
	codes := make([]uint32, n)
	series := 0
	for i := range rows {
		if first[i] {
			series++
		}
	}
	start := make([]int32, 0, series+1)
	attrRow := make([]int32, 0, series)
	gv := make([]bool, 0, series)
	for i, k := range rows {
		if first[i] {
			start = append(start, int32(i))
			attrRow = append(attrRow, k)
			gv = append(gv, false)
		}
		last := len(start) - 1
		if given.Value(int(k)) && !gv[last] {
			// attributes are constant within a series (Normalize checks
			// it), so any row that carried them will do
			attrRow[last], gv[last] = k, true
		}
		codes[i] = uint32(last)
	}
	start = append(start, int32(n))
	cctx := compute.WithAllocator(ctx, mem)
	// Columns are gathered by hand (gatherK: a copy per value), as merges
	// do, rather than appended value by value to a builder or taken with
	// compute.Take (a kernel dispatch, bounds checks): that was half of a
	// DoPut's sorting into a run (BenchmarkPrepare).
	gatherable := w.NumRows() <= maxSourceRows
	take := func(col int, idx []int32) (arrow.Array, error) {
		if gatherable {
			return gatherK(mem, []arrow.Array{w.Column(col)}, rowSelection(idx), nil)
		}
		ia := int32s(mem, idx)
		defer ia.Release()
		return compute.TakeArray(cctx, w.Column(col), ia)
	}
	idCol, err := take(0, attrRow) // any row of a series holds its id
	if err != nil {
		return nil, fmt.Errorf("delta: column series_id: %w", err)
	}
	r := &Run{seq: seq, start: start, given: gv, ids: idCol.(*array.String)}
	cols := []arrow.Array{uint32s(mem, codes)}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
		if err != nil {
			r.ids.Release()
			for _, a := range r.attrs {
				a.Release()
			}
		}
	}()
	nData := s.Data.NumFields() - datafile.ColumnPeriod // period, value, extras
	for c := 0; c < nData; c++ {
		a, err := take(1+c, rows)
		if err != nil {
			return nil, fmt.Errorf("delta: column %s: %w", s.Data.Field(datafile.ColumnPeriod+c).Name, err)
		}
		cols = append(cols, a)
	}
	for a := range s.Attrs {
		v, err := take(1+nData+a, attrRow)
		if err != nil {
			return nil, fmt.Errorf("delta: attribute %s: %w", s.Attrs[a].Name, err)
		}
		r.attrs = append(r.attrs, v)
	}
	r.rec = array.NewRecordBatch(s.Data, cols, int64(n))
	r.bytes = RecordBytes(r.rec)
	return r, nil
}

// RecordBytes is the memory of a record's buffers (a run's, a write's).
func RecordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}

func int32s(mem memory.Allocator, v []int32) arrow.Array {
	b := array.NewInt32Builder(mem)
	defer b.Release()
	b.AppendValues(v, nil)
	return b.NewArray()
}

func uint32s(mem memory.Allocator, v []uint32) arrow.Array {
	b := array.NewUint32Builder(mem)
	defer b.Release()
	b.AppendValues(v, nil)
	return b.NewArray()
}

// keepLast sorts one series' rows g by period, stably, and appends to keep
// the last row of each period (of two rows with one key the later wins),
// and to first whether each kept row is its series' first.
func keepLast(g []int32, periods []arrow.Date32, keep []int32, first []bool) ([]int32, []bool) {
	sortByPeriod(g, periods)
	start := len(keep)
	for k, o := range g {
		if k+1 < len(g) && periods[g[k+1]] == periods[o] {
			continue
		}
		keep = append(keep, o)
		first = append(first, len(keep)-1 == start)
	}
	return keep, first
}
