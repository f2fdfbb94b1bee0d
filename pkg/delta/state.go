package delta

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
)

// Base is what the delta needs of the snapshot it lies over: to tell which
// rows are new and which revise a base row.
type Base interface {
	Lookup(id string) (code int, ok bool)
	// Periods are a base series' periods, ascending.
	Periods(code int) []arrow.Date32
}

// BoundedBase is a Base that also knows a series' first and last periods
// without reading its rows: Prepare uses it to tell appends (periods after
// the base's) from revisions cheaply.
type BoundedBase interface {
	Base
	// Bounds are the first and last of Periods(code).
	Bounds(code int) (first, last arrow.Date32)
}

// State is an immutable set of runs: what one view of the dataset merges
// over its base. Apply, Freeze, DropFrozen and Rebase return new States.
type State struct {
	schema *Schema
	runs   []*Run // by seq, oldest first
	frozen int    // runs[:frozen] are being folded into the next snapshot
	keys   *keyIndex
	// fresh are the series the runs hold that keys.base lacks, by id:
	// extended by each Append (withFresh), carried over by merges and
	// freezes (which change no series' presence), listed anew by Rebase.
	fresh []*FreshSeries
}

// Empty is the State of a dataset without live writes.
func Empty(s *Schema) *State { return &State{schema: s} }

// indexRuns builds a key index over base from runs, setting each run's
// added rows and fresh series. The runs must be the caller's own (copies),
// never runs that another State shares with readers.
func indexRuns(base Base, runs []*Run) *keyIndex {
	k := newKeyIndex(base)
	for _, r := range runs {
		r.added, r.fresh = k.add(r)
	}
	return k
}

// Schema is the rows' schema.
func (st *State) Schema() *Schema { return st.schema }

// Runs are every run, oldest first (frozen ones first).
func (st *State) Runs() []*Run { return st.runs }

// Fresh are the series the runs hold that their base lacks, sorted by id
// (shared: the caller must not change it). A view gives them the codes
// after the base's in this order.
func (st *State) Fresh() []*FreshSeries { return st.fresh }

// Frozen are the runs a compaction is folding.
func (st *State) Frozen() []*Run { return st.runs[:st.frozen] }

// Rows is the number of rows held (shadowed ones included).
func (st *State) Rows() int64 {
	var n int64
	for _, r := range st.runs {
		n += int64(r.Len())
	}
	return n
}

// Added is how many rows the delta adds to its base's row count: rows
// that revise nothing older do, revisions do not.
func (st *State) Added() int64 {
	var n int64
	for _, r := range st.runs {
		n += r.added
	}
	return n
}

// Bytes is the memory the runs' rows hold.
func (st *State) Bytes() int64 {
	var n int64
	for _, r := range st.runs {
		n += r.bytes
	}
	return n
}

// MaxSeq is the sequence number of the newest write (0: none).
func (st *State) MaxSeq() uint64 {
	if len(st.runs) == 0 {
		return 0
	}
	return st.runs[len(st.runs)-1].seq
}

// FrozenPosition is the WAL position through which the frozen runs hold
// every write: what the snapshot folding them records (0: none frozen).
func (st *State) FrozenPosition() uint64 {
	var p uint64
	for _, r := range st.runs[:st.frozen] {
		p = max(p, r.pos)
	}
	return p
}

// Apply adds a normalized write with sequence number seq (greater than
// every earlier one), logged durably through WAL position pos, and merges
// adjacent unfrozen runs of similar size until none are left, so a State
// holds O(log n) runs. (The write path appends instead and merges on
// another goroutine: see Append and MergeCandidate.)
func (st *State) Apply(ctx context.Context, mem memory.Allocator, w arrow.RecordBatch, seq, pos uint64, base Base) (*State, error) {
	st, err := st.Append(ctx, mem, w, seq, pos, base)
	if err != nil {
		return nil, err
	}
	for {
		rs, ok := st.MergeCandidate()
		if !ok {
			return st, nil
		}
		m, err := mergeRuns(ctx, mem, st.schema, rs, nil)
		if err != nil {
			return nil, err
		}
		st, _ = st.Replace(rs, m)
	}
}

// Append adds a normalized write as a run of its own, merging nothing.
func (st *State) Append(ctx context.Context, mem memory.Allocator, w arrow.RecordBatch, seq, pos uint64, base Base) (*State, error) {
	if st.keys == nil || st.keys.base != base {
		// Another base than the chain was counted over: count again on
		// copies of the runs (Rebase), never on runs readers hold.
		st = st.Rebase(base)
	}
	keys := st.keys
	r, entries, err := newRun(ctx, mem, st.schema, w, seq, keys)
	if err != nil {
		return nil, err
	}
	r.pos = pos
	r.added, r.fresh = keys.addEntries(r, entries, nil)
	runs := append(slices.Clip(st.runs), r)
	return &State{schema: st.schema, runs: runs, frozen: st.frozen, keys: keys, fresh: withFresh(st.fresh, r)}, nil
}

// AppendPrepared is Append of a write Prepare sorted: it only finds the
// run's series in the key index (by code for base series) and counts
// what the run adds. A write prepared over another base than base (a
// reload in between) is sorted again by Append.
func (st *State) AppendPrepared(ctx context.Context, mem memory.Allocator, p *Prepared, seq, pos uint64, base Base) (*State, error) {
	if p.base != base || base == nil {
		return st.Append(ctx, mem, p.w, seq, pos, base)
	}
	if st.keys == nil || st.keys.base != base {
		st = st.Rebase(base)
	}
	keys := st.keys
	r := p.run
	p.run = nil // the State owns it now
	if r == nil {
		return nil, fmt.Errorf("delta: a prepared write appended twice")
	}
	entries := make([]*keyEntry, r.NumSeries())
	for i, c := range p.codes {
		if c >= 0 {
			entries[i] = keys.coded(c, r.SeriesID(i))
		} else {
			entries[i] = keys.entry(r.SeriesID(i))
		}
	}
	r.seq, r.pos = seq, pos
	r.added, r.fresh = keys.addEntries(r, entries, p.inBase)
	runs := append(slices.Clip(st.runs), r)
	return &State{schema: st.schema, runs: runs, frozen: st.frozen, keys: keys, fresh: withFresh(st.fresh, r)}, nil
}

// MergeFanIn is how many runs one merge folds together. Runs are grouped
// in tiers by size (a tier spans a factor of MergeFanIn), and the newest
// MergeFanIn runs of one tier become one run of the next: every row is
// copied about log_MergeFanIn(rows/write) times (write amplification)
// while a State holds at most about MergeFanIn-1 runs per tier, which a
// read visits. With pairwise merges (fan-in 2) a steady stream of 10k-row
// writes merged each row ~7.5 times by 3M rows; fan-in 4 halves that and
// the merges' allocations, for about 1.5× the runs a read visits.
const MergeFanIn = 4

// mergeTierRows is the size of the smallest tier: runs up to it are one
// tier, so a stream of small writes merges by counts of runs.
const mergeTierRows = 8192

// tier is the size class of a run of n rows.
func tier(n int) int {
	t := 0
	for lim := mergeTierRows * MergeFanIn; n >= lim; lim *= MergeFanIn {
		t++
	}
	return t
}

// MergeCandidate returns adjacent unfrozen runs worth merging, oldest
// first: the newest MergeFanIn runs whose oldest is in a tier no higher
// than any newer one of them (a newer run of a higher tier than an older
// one — a large write after small ones — lets the small ones merge). Runs
// too long for one merge's row numbering are left alone.
func (st *State) MergeCandidate() ([]*Run, bool) {
	for k := len(st.runs); k-MergeFanIn >= st.frozen; k-- {
		w := st.runs[k-MergeFanIn : k]
		t0, ok := tier(w[0].Len()), true
		for _, r := range w {
			ok = ok && r.Len() < maxSourceRows && tier(r.Len()) >= t0
		}
		if ok {
			return w, true
		}
	}
	return nil, false
}

// Merge folds runs (MergeCandidate's, oldest first) into one. It reads
// only the immutable runs, so it may run without the writer's lock while
// writes are appended; Replace installs the result.
func (st *State) Merge(ctx context.Context, mem memory.Allocator, rs []*Run) (*Run, error) {
	return mergeRuns(ctx, mem, st.schema, rs, nil)
}

// MergePaced is Merge calling pause about every millisecond of work (see
// pacer), for a merger that must give way to writes: the merge of the
// largest runs would otherwise hold a core for tens of milliseconds.
func (st *State) MergePaced(ctx context.Context, mem memory.Allocator, rs []*Run, pause func()) (*Run, error) {
	return mergeRuns(ctx, mem, st.schema, rs, newPacer(pause))
}

// Replace returns st with the adjacent runs rs replaced by m, their
// merge; false if they are no longer adjacent unfrozen runs of st (a
// compaction froze them, a reload rebased them).
func (st *State) Replace(rs []*Run, m *Run) (*State, bool) {
	for k := st.frozen; k+len(rs) <= len(st.runs); k++ {
		if slices.Equal(st.runs[k:k+len(rs)], rs) {
			runs := make([]*Run, 0, len(st.runs)-len(rs)+1)
			runs = append(append(append(runs, st.runs[:k]...), m), st.runs[k+len(rs):]...)
			return &State{schema: st.schema, runs: runs, frozen: st.frozen, keys: st.keys, fresh: st.fresh}, true
		}
	}
	return st, false
}

// mergeRuns folds runs rs (oldest first) into one. Each is sorted with one
// row per key, so the merge is one pass: series by id (string comparisons
// per series, not per row), rows of a series in several runs by period;
// for a key in several, the newest run's row wins. Every column is then
// gathered from the runs directly (gatherK). p (nil: none) is stepped
// with the rows done.
func mergeRuns(_ context.Context, mem memory.Allocator, s *Schema, rs []*Run, p *pacer) (_ *Run, err error) {
	if len(rs) < 2 || len(rs) > maxSources {
		return nil, fmt.Errorf("delta: merge of %d runs", len(rs))
	}
	total := 0
	for _, r := range rs {
		if r.Len() >= maxSourceRows {
			return nil, fmt.Errorf("delta: a run of %d rows is too long to merge", r.Len())
		}
		total += r.Len()
	}
	k := len(rs)
	ps := make([][]arrow.Date32, k)
	for x, r := range rs {
		ps[x] = r.Periods()
	}
	sc, _ := mergeScratches.Get().(*mergeScratch)
	if sc == nil {
		sc = new(mergeScratch)
	}
	rows := slices.Grow(sc.rows[:0], total)
	series := sc.series[:0] // per output series: src<<srcShift | its series number there
	start := sc.start[:0]   // (the run keeps a copy of its exact length)
	defer func() {
		sc.keep(rows, series, start)
		mergeScratches.Put(sc)
	}()
	var fresh []int32
	cur := make([]int, k)     // next series of each run
	freshAt := make([]int, k) // walk of each run's ascending fresh list
	in := make([]int, 0, k)   // the runs holding the current series
	pos := make([]int, k)     // per run in `in`: next row
	end := make([]int, k)     // and its end
	isFresh := func(x, i int) bool {
		f := rs[x].fresh
		for freshAt[x] < len(f) && int(f[freshAt[x]]) < i {
			freshAt[x]++
		}
		return freshAt[x] < len(f) && int(f[freshAt[x]]) == i
	}
	// Two base series compare by their codes when one key index coded
	// every run (Run.codes), any other pair by the ids' bytes: the orders
	// agree, and integers spare reading ids from every run a series.
	var runCodes [][]int32
	if coder := rs[0].coder; coder != nil {
		runCodes = make([][]int32, k)
		for x, r := range rs {
			if r.coder != coder || len(r.codes) != r.NumSeries() {
				runCodes = nil
				break
			}
			runCodes[x] = r.codes
		}
	}
	for {
		// the smallest id among the runs' next series, and which hold it
		in = in[:0]
		minCode := int32(-1) // the smallest's code (in[0] holds it)
		for x, r := range rs {
			if cur[x] == r.NumSeries() {
				continue
			}
			code := int32(-1)
			if runCodes != nil {
				code = runCodes[x][cur[x]]
			}
			c := -1
			if len(in) > 0 {
				if code >= 0 && minCode >= 0 {
					c = cmp.Compare(code, minCode)
				} else {
					c = strings.Compare(r.SeriesID(cur[x]), rs[in[0]].SeriesID(cur[in[0]]))
				}
			}
			if c < 0 {
				in, minCode = append(in[:0], x), code
			} else if c == 0 {
				in = append(in, x)
			}
		}
		if len(in) == 0 {
			break
		}
		start = append(start, int32(len(rows)))
		newest := in[len(in)-1] // in is ascending: runs are oldest first
		if len(in) == 1 {
			lo, hi := rs[newest].Rows(cur[newest])
			src := uint32(newest) << srcShift
			for r := lo; r < hi; r++ {
				rows = append(rows, src|uint32(r))
			}
		} else {
			for _, x := range in {
				pos[x], end[x] = rs[x].Rows(cur[x])
			}
			for {
				// the smallest period among the runs' next rows; on a tie
				// the newest run's row, the others skipped
				best := -1
				var bp arrow.Date32
				for _, x := range in {
					if pos[x] == end[x] {
						continue
					}
					p := ps[x][pos[x]]
					if best < 0 || p <= bp {
						if best >= 0 && p == bp {
							pos[best]++ // shadowed by a newer run's row
						}
						best, bp = x, p
					}
				}
				if best < 0 {
					break
				}
				rows = append(rows, uint32(best)<<srcShift|uint32(pos[best]))
				pos[best]++
			}
		}
		if isFresh(newest, cur[newest]) {
			fresh = append(fresh, int32(len(series)))
		}
		// The series' attributes: the newest run whose writes carried
		// them, else the newest.
		pick := newest
		for y := len(in) - 1; y >= 0; y-- {
			if rs[in[y]].Given(cur[in[y]]) {
				pick = in[y]
				break
			}
		}
		series = append(series, uint32(pick)<<srcShift|uint32(cur[pick]))
		for _, x := range in {
			cur[x]++
		}
		p.step(int(int32(len(rows)) - start[len(start)-1]))
	}
	start = append(start, int32(len(rows)))

	last := rs[k-1]
	m := &Run{seq: last.seq, start: slices.Clone(start), fresh: fresh}
	for _, r := range rs {
		m.pos = max(m.pos, r.pos)
		m.added += r.added
	}
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
		if err != nil {
			if m.ids != nil {
				m.ids.Release()
			}
			for _, x := range m.attrs {
				x.Release()
			}
		}
	}()
	// the series codes, written into the column's buffer directly
	cb := memory.NewResizableBuffer(mem)
	cb.Resize(4 * len(rows))
	codes := asWords[uint32](cb.Bytes())
	for q := 0; q+1 < len(start); q++ {
		for r := start[q]; r < start[q+1]; r++ {
			codes[r] = uint32(q)
		}
	}
	cd := array.NewData(s.Data.Field(datafile.ColumnSeriesCode).Type, len(rows), []*memory.Buffer{nil, cb}, nil, 0, 0)
	cb.Release()
	cols = append(cols, array.MakeFromData(cd))
	cd.Release()
	srcs := make([]arrow.Array, k)
	for c := datafile.ColumnPeriod; c < s.Data.NumFields(); c++ {
		for x, r := range rs {
			srcs[x] = r.rec.Column(c)
		}
		g, err := gatherK(mem, srcs, rows, p)
		if err != nil {
			return nil, fmt.Errorf("delta: column %s: %w", s.Data.Field(c).Name, err)
		}
		cols = append(cols, g)
	}
	// Ids: a series in several runs has the same id in each, so the series
	// selection (which may pick an older run's attributes) gives the right
	// id too.
	for x, r := range rs {
		srcs[x] = r.ids
	}
	ids, err := gatherK(mem, srcs, series, p)
	if err != nil {
		return nil, err
	}
	m.ids = ids.(*array.String)
	if runCodes != nil {
		m.codes, m.coder = make([]int32, len(series)), rs[0].coder
		for q, sr := range series {
			m.codes[q] = runCodes[sr>>srcShift][sr&rowMask]
		}
	}
	m.given = make([]bool, len(series))
	for q, sr := range series {
		m.given[q] = rs[sr>>srcShift].given[sr&rowMask]
	}
	for at := range s.Attrs {
		for x, r := range rs {
			srcs[x] = r.attrs[at]
		}
		g, err := gatherK(mem, srcs, series, p)
		if err != nil {
			return nil, fmt.Errorf("delta: attribute %s: %w", s.Attrs[at].Name, err)
		}
		m.attrs = append(m.attrs, g)
	}
	m.rec = array.NewRecordBatch(s.Data, cols, int64(len(rows)))
	m.bytes = RecordBytes(m.rec)
	return m, nil
}

// mergeScratch are a merge's selections, recycled through mergeScratches:
// built by append, growing by doubling, they were most of the merges' own
// garbage (with the series codes' copy, ~75 B per row ingested in the
// paced ingest benchmark's profile, of the server's ~415), and merges
// follow each other on one goroutine, so a recycled one is usually at
// hand and large enough.
type mergeScratch struct {
	rows, series []uint32
	start        []int32
}

var mergeScratches sync.Pool

// mergeScratchMax bounds the entries a recycled scratch slice may hold, so
// one rare huge merge does not pin its selections' memory.
const mergeScratchMax = 4 << 20

// keep holds the (grown) slices for the next merge.
func (sc *mergeScratch) keep(rows, series []uint32, start []int32) {
	sc.rows, sc.series, sc.start = nil, nil, nil
	if cap(rows) <= mergeScratchMax {
		sc.rows = rows[:0]
	}
	if cap(series) <= mergeScratchMax {
		sc.series = series[:0]
	}
	if cap(start) <= mergeScratchMax {
		sc.start = start[:0]
	}
}

// Freeze marks every run as being folded into the next snapshot; later
// writes are kept apart from them.
func (st *State) Freeze() *State {
	return &State{schema: st.schema, runs: st.runs, frozen: len(st.runs), keys: st.keys, fresh: st.fresh}
}

// Thaw gives the frozen runs back to the live delta, when the compaction
// that froze them published nothing (CURRENT moved under it): they are
// ordinary runs again, merged on read and folded by a later compaction.
func (st *State) Thaw() *State {
	return &State{schema: st.schema, runs: st.runs, keys: st.keys, fresh: st.fresh}
}

// DropFrozen removes the frozen runs once the snapshot holding them is
// served, re-counting what the rest add over the new base.
func (st *State) DropFrozen(base Base) *State {
	return (&State{schema: st.schema, runs: slices.Clone(st.runs[st.frozen:])}).Rebase(base)
}

// CatchUp brings done, a rebase of pre (pre.Rebase(base) or
// pre.DropFrozen(base)) made without the writer's lock, up to st, a later
// State of pre's chain: the runs st appended since pre are counted in over
// done's base, so that only they, not the whole delta, are counted under
// the lock (a rebase of 160k rows of 100k series took ~90 ms, every write
// waiting). ok is false when st is not pre plus appended runs (a merge
// replaced some of pre's, a freeze changed what is frozen): the caller
// then rebases st itself. done is consumed: its key index is extended.
func (st *State) CatchUp(pre, done *State) (_ *State, ok bool) {
	n := len(pre.runs)
	if st.frozen != pre.frozen || len(st.runs) < n || !slices.Equal(st.runs[:n], pre.runs) {
		return st, false
	}
	out := &State{schema: st.schema, frozen: done.frozen, keys: done.keys, fresh: done.fresh}
	out.runs = slices.Grow(slices.Clip(done.runs), len(st.runs)-n)
	for _, r := range st.runs[n:] {
		c := *r
		c.added, c.fresh = out.keys.add(&c)
		out.runs = append(out.runs, &c)
		out.fresh = withFresh(out.fresh, &c)
	}
	return out, true
}

// Rebase is the same runs over another base snapshot (a reload): what
// they add is counted again. The runs' rows are shared, not copied.
func (st *State) Rebase(base Base) *State {
	out := &State{schema: st.schema, frozen: st.frozen}
	for _, r := range st.runs {
		c := *r
		out.runs = append(out.runs, &c)
	}
	out.keys = indexRuns(base, out.runs)
	out.fresh = listFresh(out.runs)
	return out
}
