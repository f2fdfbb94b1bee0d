package delta

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
)

// Bulk is the State that applying writes (normalized, in log order) one
// by one to Empty(s) over base would give, built as one run: what a
// replay at start-up needs, when nothing reads the delta yet and nothing
// compacts it. The writes are sorted together once by (series, period),
// the log order breaking ties, so of two rows with one key the later
// write's wins, as with incremental writes; a series' attributes are
// those of its latest write that carried them. The run's precedence is
// seq (the last write's sequence number) and it holds the writes through
// WAL position pos.
//
// Where Append ranks each write's series through one map on one
// goroutine, Bulk spreads the work over the cores: series are split by a
// hash of their id into partitions, each probed (and looked up in the
// base) by its own goroutine in its own map; the partitions' series are
// sorted apart and merged; rows are put in series order by a counting sort
// split by row ranges, and each series' rows are sorted by period on the
// goroutine owning its range. The base's methods are called from several
// goroutines at once, as concurrent readers call them.
//
// Writes without rows add nothing: Bulk of no rows is Empty(s).
func Bulk(ctx context.Context, mem memory.Allocator, s *Schema, writes []arrow.RecordBatch, seq, pos uint64, base Base) (*State, error) {
	var n int64
	for i, w := range writes {
		if !w.Schema().Equal(s.Write) {
			return nil, fmt.Errorf("delta: write %d has columns %v, not %v", i, w.Schema(), s.Write)
		}
		n += w.NumRows()
	}
	if n == 0 {
		return Empty(s), nil
	}
	if n >= fromB {
		return nil, fmt.Errorf("delta: %d rows in one run (at most %d)", n, fromB-1)
	}
	workers := bulkWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := &bulk{ctx: ctx, mem: mem, s: s, writes: writes, n: int(n), base: base, workers: workers}
	return b.build(seq, pos)
}

// bulkPartitions caps the partitions of the series: a k-way merge of
// their sorted series costs k comparisons per series.
const bulkPartitions = 8

var bulkSeed = maphash.MakeSeed()

// bulkWorkers is how many goroutines Bulk uses (0: GOMAXPROCS), and
// bulkRowsPerWorker the fewest rows worth a goroutine of the counting
// sort: variables for the tests, which run the parallel paths on small data.
var (
	bulkWorkers       = 0
	bulkRowsPerWorker = 1 << 14
)

type bulk struct {
	ctx     context.Context
	mem     memory.Allocator
	s       *Schema
	writes  []arrow.RecordBatch
	base    Base
	n       int
	workers int

	off []int // writes[k]'s rows are global rows [off[k], off[k+1])
	ids []*array.String

	parts   int
	part    []uint8 // a row's partition
	local   []int32 // a row's series number in its partition, then its rank
	series  [][]bulkSeries
	sorted  []*bulkSeries // every series in run order
	periods []arrow.Date32
	given   *array.Boolean
	cols    []arrow.Array // the writes' columns, concatenated (nil for the id column)
}

// bulkSeries is one distinct series of the writes.
type bulkSeries struct {
	id   string // aliases a write's id column until the run is built
	code int32  // in the base, -1 if none
	base []arrow.Date32
}

// parallel calls fn(i) for every i in [0, n) on up to workers goroutines.
func parallel(workers, n int, fn func(i int)) {
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

func (b *bulk) build(seq, pos uint64) (*State, error) {
	nw := len(b.writes)
	b.off = make([]int, nw+1)
	b.ids = make([]*array.String, nw)
	for k, w := range b.writes {
		b.off[k+1] = b.off[k] + int(w.NumRows())
		b.ids[k] = w.Column(0).(*array.String)
	}
	// The columns other than the id are concatenated meanwhile: they are
	// gathered from in run order at the end.
	b.cols = make([]arrow.Array, b.writes[0].NumCols())
	concatErrs := make([]error, len(b.cols))
	var concatDone sync.WaitGroup
	concatDone.Go(func() {
		parallel(b.workers, len(b.cols)-1, func(c int) {
			c++ // not the ids
			parts := make([]arrow.Array, nw)
			for k, w := range b.writes {
				parts[k] = w.Column(c)
			}
			b.cols[c], concatErrs[c] = array.Concatenate(parts, b.mem)
		})
	})
	defer func() {
		concatDone.Wait()
		for _, c := range b.cols {
			if c != nil {
				c.Release()
			}
		}
	}()

	b.partition()
	b.probe()
	ranks := b.rank()
	concatDone.Wait()
	if err := errors.Join(concatErrs...); err != nil {
		return nil, fmt.Errorf("delta: concatenating writes: %w", err)
	}
	if err := b.ctx.Err(); err != nil {
		return nil, err
	}
	b.periods = b.cols[datafile.ColumnPeriod].(*array.Date32).Date32Values()
	b.given = b.cols[len(b.cols)-1].(*array.Boolean)
	order, group := b.order(ranks)
	return b.assemble(seq, pos, order, group)
}

// partition sets every row's partition from a hash of its id.
func (b *bulk) partition() {
	b.parts = min(b.workers, bulkPartitions)
	if b.parts == 1 {
		return
	}
	b.part = make([]uint8, b.n)
	parallel(b.workers, len(b.writes), func(k int) {
		ids, p := b.ids[k], b.part[b.off[k]:b.off[k+1]]
		for i := range p {
			p[i] = uint8(maphash.String(bulkSeed, ids.Value(i)) % uint64(b.parts))
		}
	})
}

// probe finds each row's series in its partition's map, looking new
// series up in the base.
func (b *bulk) probe() {
	b.local = make([]int32, b.n)
	b.series = make([][]bulkSeries, b.parts)
	parallel(b.workers, b.parts, func(p int) {
		m := make(map[string]int32, b.n/(b.parts*8)+16)
		var list []bulkSeries
		for k, ids := range b.ids {
			o := b.off[k]
			for i := 0; i < ids.Len(); i++ {
				g := o + i
				if b.part != nil && int(b.part[g]) != p {
					continue
				}
				id := ids.Value(i)
				l, ok := m[id]
				if !ok {
					l = int32(len(list))
					m[id] = l
					x := bulkSeries{id: id, code: -1}
					if b.base != nil {
						if c, ok := b.base.Lookup(id); ok {
							x.code, x.base = int32(c), b.base.Periods(c)
						}
					}
					list = append(list, x)
				}
				b.local[g] = l
			}
		}
		b.series[p] = list
	})
}

// rank sorts each partition's series (in parallel), merges the partitions
// into run order (b.sorted) and returns each partition's local-to-rank map.
func (b *bulk) rank() [][]int32 {
	byRank := make([][]int32, b.parts) // partition-local numbers in order
	parallel(b.workers, b.parts, func(p int) {
		list := b.series[p]
		idx := make([]int32, len(list))
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, func(x, y int32) int { return compareSeries(&list[x], &list[y]) })
		byRank[p] = idx
	})
	d := 0
	for _, l := range b.series {
		d += len(l)
	}
	ranks := make([][]int32, b.parts)
	for p, l := range b.series {
		ranks[p] = make([]int32, len(l))
	}
	b.sorted = make([]*bulkSeries, 0, d)
	at := make([]int, b.parts) // the next of each partition's sorted series
	for len(b.sorted) < d {
		best := -1
		for p := range b.parts {
			if at[p] == len(byRank[p]) {
				continue
			}
			if best < 0 || compareSeries(&b.series[p][byRank[p][at[p]]], &b.series[best][byRank[best][at[best]]]) < 0 {
				best = p
			}
		}
		l := byRank[best][at[best]]
		at[best]++
		ranks[best][l] = int32(len(b.sorted))
		b.sorted = append(b.sorted, &b.series[best][l])
	}
	return ranks
}

// compareSeries is compareEntries' order for bulkSeries: base series by
// code (the base lists ids in order), any other pair by the ids' bytes.
func compareSeries(a, b *bulkSeries) int {
	if a.code >= 0 && b.code >= 0 {
		return cmp.Compare(a.code, b.code)
	}
	return strings.Compare(a.id, b.id)
}

// order puts the rows in series order, stably (a series' rows stay in
// log order): a counting sort whose counting and scattering are split
// into row ranges, one per goroutine. Rows of rank r are
// order[group[r]:group[r+1]].
func (b *bulk) order(ranks [][]int32) (order, group []int32) {
	d := len(b.sorted)
	w := max(1, min(b.workers, b.n/bulkRowsPerWorker))
	counts := make([][]int32, w)
	rowRange := func(i int) (int, int) { return b.n * i / w, b.n * (i + 1) / w }
	parallel(w, w, func(i int) {
		lo, hi := rowRange(i)
		c := make([]int32, d)
		for g := lo; g < hi; g++ {
			p := 0
			if b.part != nil {
				p = int(b.part[g])
			}
			r := ranks[p][b.local[g]]
			b.local[g] = r
			c[r]++
		}
		counts[i] = c
	})
	// counts[i][r] becomes where range i's rows of rank r go.
	group = make([]int32, d+1)
	at := int32(0)
	for r := 0; r < d; r++ {
		group[r] = at
		for i := range w {
			c := counts[i][r]
			counts[i][r] = at
			at += c
		}
	}
	group[d] = at
	order = make([]int32, b.n)
	parallel(w, w, func(i int) {
		lo, hi := rowRange(i)
		next := counts[i]
		for g := lo; g < hi; g++ {
			r := b.local[g]
			order[next[r]] = int32(g)
			next[r]++
		}
	})
	return order, group
}

// seriesOut is what assemble works out per series.
type seriesOut struct {
	kept    int32 // rows after removing shadowed ones
	attrRow int32 // the global row whose attributes the series takes
	given   bool
	added   int32 // rows that revise nothing in the base
	periods []int32
}

// assemble sorts each series' rows by period, keeps the latest row per
// key and builds the run and its key index.
func (b *bulk) assemble(seq, pos uint64, order, group []int32) (_ *State, err error) {
	d := len(b.sorted)
	out := make([]seriesOut, d)
	// Series ranges of about equal rows, several per goroutine.
	chunks := b.workers * 4
	bounds := make([]int, 0, chunks+1)
	bounds = append(bounds, 0)
	for c := 1; c < chunks; c++ {
		want := int32(int64(b.n) * int64(c) / int64(chunks))
		r, _ := slices.BinarySearch(group[:d], want)
		if r > bounds[len(bounds)-1] {
			bounds = append(bounds, r)
		}
	}
	if bounds[len(bounds)-1] < d {
		bounds = append(bounds, d)
	}
	parallel(b.workers, len(bounds)-1, func(c int) {
		var slab []int32
		for r := bounds[c]; r < bounds[c+1]; r++ {
			rows := order[group[r]:group[r+1]]
			o := &out[r]
			// Attributes: the latest write that carried them, else the
			// latest write (what merging incremental runs keeps).
			o.attrRow = rows[len(rows)-1]
			for k := len(rows) - 1; k >= 0; k-- {
				if b.given.Value(int(rows[k])) {
					o.attrRow, o.given = rows[k], true
					break
				}
			}
			sortByPeriod(rows, b.periods)
			kept := rows[:0]
			for k, g := range rows {
				if k+1 < len(rows) && b.periods[rows[k+1]] == b.periods[g] {
					continue // a later row has the same key
				}
				kept = append(kept, g)
			}
			o.kept = int32(len(kept))
			x := b.sorted[r]
			if cap(slab)-len(slab) < len(kept) {
				slab = make([]int32, 0, max(4096, len(kept)))
			}
			bi := 0
			for _, g := range kept {
				p := b.periods[g]
				for bi < len(x.base) && x.base[bi] < p {
					bi++
				}
				if bi < len(x.base) && x.base[bi] == p {
					continue
				}
				slab = append(slab, int32(p))
			}
			// An entry's periods are appended to later (keys.addEntries):
			// clip them so that no two entries share room.
			o.periods = slices.Clip(slab)
			o.added = int32(len(o.periods))
			slab = slab[len(slab):]
		}
	})

	// Runs of kept rows, in run order.
	start := make([]int32, d+1)
	for r := range d {
		start[r+1] = start[r] + out[r].kept
	}
	m := int(start[d])
	keep := make([]uint32, m)
	codes := make([]uint32, m)
	parallel(b.workers, len(bounds)-1, func(c int) {
		for r := bounds[c]; r < bounds[c+1]; r++ {
			at := start[r]
			for k, g := range order[group[r] : group[r]+out[r].kept] {
				keep[int(at)+k] = uint32(g)
				codes[int(at)+k] = uint32(r)
			}
		}
	})

	run := &Run{seq: seq, pos: pos, start: start, given: make([]bool, d)}
	attrRows := make([]uint32, d)
	var added int64
	for r := range d {
		o := &out[r]
		run.given[r] = o.given
		attrRows[r] = uint32(o.attrRow)
		added += int64(o.added)
		if b.sorted[r].code < 0 {
			run.fresh = append(run.fresh, int32(r))
		}
	}
	run.added = added

	// Columns: the data columns by kept row, the attributes by series.
	nData := b.s.Data.NumFields() - datafile.ColumnPeriod
	nAttr := len(b.s.Attrs)
	cols := make([]arrow.Array, datafile.ColumnPeriod+nData)
	attrs := make([]arrow.Array, nAttr)
	errs := make([]error, nData+nAttr+1)
	defer func() {
		if err != nil {
			for _, a := range slices.Concat(cols, attrs) {
				if a != nil {
					a.Release()
				}
			}
			if run.ids != nil {
				run.ids.Release()
			}
		}
	}()
	parallel(b.workers, nData+nAttr+1, func(j int) {
		switch {
		case j < nData:
			c := datafile.ColumnPeriod + j
			cols[c], errs[j] = gather2(b.mem, b.cols[c], b.cols[c], keep)
			if errs[j] != nil {
				errs[j] = fmt.Errorf("delta: column %s: %w", b.s.Data.Field(c).Name, errs[j])
			}
		case j < nData+nAttr:
			a := j - nData
			col := b.cols[1+nData+a]
			attrs[a], errs[j] = gather2(b.mem, col, col, attrRows)
			if errs[j] != nil {
				errs[j] = fmt.Errorf("delta: attribute %s: %w", b.s.Attrs[a].Name, errs[j])
			}
		default:
			idb := array.NewStringBuilder(b.mem)
			defer idb.Release()
			var bytes int
			for _, x := range b.sorted {
				bytes += len(x.id)
			}
			idb.Reserve(d)
			idb.ReserveData(bytes)
			for _, x := range b.sorted {
				idb.Append(x.id)
			}
			run.ids = idb.NewStringArray()
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cols[datafile.ColumnSeriesCode] = uint32s(b.mem, codes)
	run.rec = array.NewRecordBatch(b.s.Data, cols, int64(m))
	for _, c := range cols {
		c.Release()
	}
	cols = nil
	run.attrs = attrs
	run.bytes = RecordBytes(run.rec)

	// The key index, its ids aliasing the run's (not the writes', which
	// may alias a WAL buffer the caller wants freed).
	keys := &keyIndex{base: b.base, series: make(map[string]*keyEntry, d)}
	ents := make([]keyEntry, d)
	for r, x := range b.sorted {
		e := &ents[r]
		*e = keyEntry{id: run.ids.Value(r), code: x.code, base: x.base, periods: out[r].periods}
		keys.series[e.id] = e
	}
	if len(keys.series) != d {
		return nil, fmt.Errorf("delta: %d distinct series indexed as %d", d, len(keys.series))
	}
	return &State{schema: b.s, runs: []*Run{run}, keys: keys}, nil
}
