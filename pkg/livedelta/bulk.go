package livedelta

import (
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
// goroutine, Bulk spreads the work over the cores: the series are
// numbered in tables sharded by hash, one shard per core (numberSeries);
// each shard's series are sorted by id, the shards merged and the series
// looked up in the base in id order, in parallel (rank); rows are put in
// series order by a counting sort split by row ranges, and each series'
// rows sorted by period on the goroutine owning its range. The base's methods are called from several
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

var bulkSeed = maphash.MakeSeed()

// bulkHash is a series id's hash; bulkHashBits can narrow it so that the
// tests make distinct ids collide.
func bulkHash(id string) uint64 { return maphash.String(bulkSeed, id) & bulkHashBits }

var bulkHashBits = ^uint64(0)

// Tuning, variables for the tests (which run every path on small data):
// bulkWorkers is how many goroutines Bulk uses (0: GOMAXPROCS);
// bulkRowsPerWorker the fewest rows worth a goroutine (a shard) of the
// numbering and of the counting sort.
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

	cols    []arrow.Array   // the writes' columns but the id, concatenated
	off     []int           // write k's rows are rows [off[k], off[k+1]) of cols
	ids     []*array.String // each write's ids
	periods []arrow.Date32
	given   *array.Boolean

	shardBits uint
	local     []int32        // a row's series (shard and number), then its rank
	series    [][]bulkSeries // each shard's
	sorted    []*bulkSeries  // every series in run order
}

// bulkSeries is one distinct series of the writes.
type bulkSeries struct {
	id   string // aliases its shard's buffer of ids
	hash uint64
	code int32 // in the base, -1 if none
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
	// Every column is concatenated once: rows are then numbered in log
	// order across the writes, and gathered from in run order at the end.
	b.cols = make([]arrow.Array, b.writes[0].NumCols())
	defer func() {
		for _, c := range b.cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	b.off = make([]int, len(b.writes)+1)
	b.ids = make([]*array.String, len(b.writes))
	for k, w := range b.writes {
		b.off[k+1] = b.off[k] + int(w.NumRows())
		b.ids[k] = w.Column(0).(*array.String)
	}
	errs := make([]error, len(b.cols))
	parallel(b.workers, len(b.cols)-1, func(c int) {
		c++ // the ids are read from the writes, and copied by partition
		parts := make([]arrow.Array, len(b.writes))
		for k, w := range b.writes {
			parts[k] = w.Column(c)
		}
		b.cols[c], errs[c] = array.Concatenate(parts, b.mem)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("delta: concatenating writes: %w", err)
	}
	b.periods = b.cols[datafile.ColumnPeriod].(*array.Date32).Date32Values()
	b.given = b.cols[len(b.cols)-1].(*array.Boolean)

	b.numberSeries()
	ranks := b.rank()
	if err := b.ctx.Err(); err != nil {
		return nil, err
	}
	order, group := b.order(ranks)
	return b.assemble(seq, pos, order, group)
}

// rank sorts the series into run order, by id (b.sorted), looks them up
// in the base in that order and returns each shard's map from its series
// numbers to their ranks. Each shard's series are sorted on a core of
// their own, then merged (an id is in one shard only). In id order, one
// lookup's binary search in the base's sorted ids walks much the path of
// the one before it, which is in cache; in hash order, every lookup
// missed the cache on most of its steps.
func (b *bulk) rank() [][]int32 {
	perms := make([][]int32, len(b.series))
	parallel(b.workers, len(b.series), func(p int) {
		l := b.series[p]
		perm := make([]int32, len(l))
		for i := range perm {
			perm[i] = int32(i)
		}
		slices.SortFunc(perm, func(x, y int32) int { return strings.Compare(l[x].id, l[y].id) })
		perms[p] = perm
	})
	ranks := make([][]int32, len(b.series))
	d := 0
	for p, l := range b.series {
		ranks[p] = make([]int32, len(l))
		d += len(l)
	}
	b.sorted = make([]*bulkSeries, 0, d)
	heads := make([]int, len(b.series))
	for len(b.sorted) < d {
		// The least id at the shards' heads (a handful of shards).
		best := -1
		for p, h := range heads {
			if h < len(perms[p]) && (best < 0 || b.series[p][perms[p][h]].id < b.series[best][perms[best][heads[best]]].id) {
				best = p
			}
		}
		i := perms[best][heads[best]]
		heads[best]++
		ranks[best][i] = int32(len(b.sorted))
		b.sorted = append(b.sorted, &b.series[best][i])
	}
	if b.base != nil {
		const chunk = 4096
		parallel(b.workers, (d+chunk-1)/chunk, func(c int) {
			for _, x := range b.sorted[c*chunk : min(d, (c+1)*chunk)] {
				if code, ok := b.base.Lookup(x.id); ok {
					x.code, x.base = int32(code), b.base.Periods(code)
				}
			}
		})
	}
	return ranks
}

// order puts the rows in series order, stably (a series' rows stay in
// log order): a counting sort whose counting and scattering are split
// into row ranges, one per goroutine. Each row is placed as its sort key
// for the next step, period and row number (see rowKey), so that sorting
// a series' rows by period reads only its own stretch of memory. Rows of
// rank r are keys[group[r]:group[r+1]].
func (b *bulk) order(ranks [][]int32) (keys []uint64, group []int32) {
	d := len(b.sorted)
	w := max(1, min(b.workers, b.n/bulkRowsPerWorker))
	counts := make([][]int32, w)
	rowRange := func(i int) (int, int) { return b.n * i / w, b.n * (i + 1) / w }
	parallel(w, w, func(i int) {
		lo, hi := rowRange(i)
		c := make([]int32, d)
		shard := uint32(1)<<b.shardBits - 1
		for g := lo; g < hi; g++ {
			v := uint32(b.local[g])
			r := ranks[v&shard][v>>b.shardBits]
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
	keys = make([]uint64, b.n)
	parallel(w, w, func(i int) {
		lo, hi := rowRange(i)
		next := counts[i]
		for g := lo; g < hi; g++ {
			r := b.local[g]
			keys[next[r]] = rowKey(b.periods[g], g)
			next[r]++
		}
	})
	return keys, group
}

// rowKey orders a series' rows by period, then by row number, which is
// the log order: the period (its sign bit flipped, so that unsigned order
// is signed order) in the high half, the row in the low half.
func rowKey(p arrow.Date32, g int) uint64 {
	return uint64(uint32(p)^1<<31)<<32 | uint64(uint32(g))
}

func keyPeriod(k uint64) arrow.Date32 { return arrow.Date32(int32(uint32(k>>32) ^ 1<<31)) }
func keyRow(k uint64) uint32          { return uint32(k) }

// sortKeys sorts a series' row keys: insertion sort for the few rows a
// series has in most replays.
func sortKeys(k []uint64) {
	if len(k) > 32 {
		slices.Sort(k)
		return
	}
	for i := 1; i < len(k); i++ {
		for j := i; j > 0 && k[j-1] > k[j]; j-- {
			k[j-1], k[j] = k[j], k[j-1]
		}
	}
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
func (b *bulk) assemble(seq, pos uint64, keys []uint64, group []int32) (_ *State, err error) {
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
			rows := keys[group[r]:group[r+1]] // in log order
			o := &out[r]
			// Attributes: the latest write that carried them, else the
			// latest write (what merging incremental runs keeps).
			o.attrRow = int32(keyRow(rows[len(rows)-1]))
			for k := len(rows) - 1; k >= 0; k-- {
				if g := keyRow(rows[k]); b.given.Value(int(g)) {
					o.attrRow, o.given = int32(g), true
					break
				}
			}
			sortKeys(rows)
			kept := rows[:0]
			for k, key := range rows {
				if k+1 < len(rows) && keyPeriod(rows[k+1]) == keyPeriod(key) {
					continue // a later row has the same key
				}
				kept = append(kept, key)
			}
			o.kept = int32(len(kept))
			x := b.sorted[r]
			if cap(slab)-len(slab) < len(kept) {
				slab = make([]int32, 0, max(4096, len(kept)))
			}
			// A kept row revises a base row or adds one: searched for,
			// not scanned to, as a base series has many periods and a
			// replay few rows of it, mostly after its last (appends).
			base := x.base
			for _, key := range kept {
				p := keyPeriod(key)
				if len(base) > 0 && p <= base[len(base)-1] {
					i, found := slices.BinarySearch(base, p)
					base = base[i:]
					if found {
						continue
					}
				} else {
					base = nil
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

	// The kept rows in run order: their numbers (to gather the other
	// columns by), periods and series codes.
	start := make([]int32, d+1)
	for r := range d {
		start[r+1] = start[r] + out[r].kept
	}
	m := int(start[d])
	keep := make([]uint32, m)
	periodBuf, codeBuf := memory.NewResizableBuffer(b.mem), memory.NewResizableBuffer(b.mem)
	periodBuf.Resize(4 * m)
	codeBuf.Resize(4 * m)
	periods, codes := asWords[uint32](periodBuf.Bytes()), asWords[uint32](codeBuf.Bytes())
	parallel(b.workers, len(bounds)-1, func(c int) {
		for r := bounds[c]; r < bounds[c+1]; r++ {
			at := int(start[r])
			for k, key := range keys[group[r] : group[r]+out[r].kept] {
				keep[at+k] = keyRow(key)
				periods[at+k] = uint32(keyPeriod(key))
				codes[at+k] = uint32(r)
			}
		}
	})
	fixed := func(dt arrow.DataType, buf *memory.Buffer) arrow.Array {
		data := array.NewData(dt, m, []*memory.Buffer{nil, buf}, nil, 0, 0)
		buf.Release()
		defer data.Release()
		return array.MakeFromData(data)
	}

	run := &Run{seq: seq, pos: pos, start: start, given: make([]bool, d), codes: make([]int32, d)}
	attrRows := make([]uint32, d)
	var added int64
	for r := range d {
		o := &out[r]
		run.given[r] = o.given
		run.codes[r] = b.sorted[r].code
		attrRows[r] = uint32(o.attrRow)
		added += int64(o.added)
		if b.sorted[r].code < 0 {
			run.fresh = append(run.fresh, int32(r))
		}
	}
	run.added = added

	// The ids, then on every core at once: the data columns gathered by
	// kept row, the attributes by series, and the key index.
	idb := array.NewStringBuilder(b.mem)
	var idBytes int
	for _, x := range b.sorted {
		idBytes += len(x.id)
	}
	idb.Reserve(d)
	idb.ReserveData(idBytes)
	for _, x := range b.sorted {
		idb.Append(x.id)
	}
	run.ids = idb.NewStringArray()
	idb.Release()
	nData := b.s.Data.NumFields() - datafile.ColumnPeriod
	nAttr := len(b.s.Attrs)
	cols := make([]arrow.Array, datafile.ColumnPeriod+nData)
	cols[datafile.ColumnSeriesCode] = fixed(arrow.PrimitiveTypes.Uint32, codeBuf)
	cols[datafile.ColumnPeriod] = fixed(arrow.FixedWidthTypes.Date32, periodBuf)
	attrs := make([]arrow.Array, nAttr)
	errs := make([]error, nData+nAttr)
	defer func() {
		if err != nil {
			for _, a := range slices.Concat(cols, attrs) {
				if a != nil {
					a.Release()
				}
			}
			run.ids.Release()
		}
	}()
	var index *keyIndex
	parallel(b.workers, nData+nAttr, func(j int) { // j 0 is the index: the period is placed
		switch {
		case j == 0:
			// The key index, its ids aliasing the run's, not the writes'
			// (which may alias a WAL buffer the caller wants freed).
			index = &keyIndex{base: b.base, series: make(map[string]*keyEntry, d)}
			ents := make([]keyEntry, d)
			for r, x := range b.sorted {
				e := &ents[r]
				*e = keyEntry{id: run.ids.Value(r), code: x.code, base: x.base, periods: out[r].periods}
				index.series[e.id] = e
				if e.code >= 0 {
					index.setCode(e) // every base series by its code (keyIndex.byCode)
				}
			}
			if len(index.series) != d {
				errs[j] = fmt.Errorf("delta: %d distinct series indexed as %d", d, len(index.series))
			}
		case j < nData:
			c := datafile.ColumnPeriod + j
			cols[c], errs[j] = gather2(b.mem, b.cols[c], b.cols[c], keep)
			if errs[j] != nil {
				errs[j] = fmt.Errorf("delta: column %s: %w", b.s.Data.Field(c).Name, errs[j])
			}
		default:
			a := j - nData
			col := b.cols[1+nData+a]
			attrs[a], errs[j] = gather2(b.mem, col, col, attrRows)
			if errs[j] != nil {
				errs[j] = fmt.Errorf("delta: attribute %s: %w", b.s.Attrs[a].Name, errs[j])
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	run.rec = array.NewRecordBatch(b.s.Data, cols, int64(m))
	for _, c := range cols {
		c.Release()
	}
	cols = nil
	run.attrs = attrs
	run.coder = index
	run.bytes = RecordBytes(run.rec)
	return &State{schema: b.s, runs: []*Run{run}, keys: index, fresh: withFresh(nil, run)}, nil
}
