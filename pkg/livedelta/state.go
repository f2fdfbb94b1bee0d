package livedelta

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
// with the rows done. The steps: check the runs can be merged, select the
// output's rows and series (mergeSel), gather them into a run.
func mergeRuns(_ context.Context, mem memory.Allocator, s *Schema, rs []*Run, p *pacer) (*Run, error) {
	total, err := mergeable(rs)
	if err != nil {
		return nil, err
	}
	sc, _ := mergeScratches.Get().(*mergeScratch)
	if sc == nil {
		sc = new(mergeScratch)
	}
	sel := newMergeSel(rs, sc, total) // a value: it stays on the stack
	defer func() {
		sc.keep(sel.rows, sel.series, sel.start)
		mergeScratches.Put(sc)
	}()
	sel.selectAll(p)
	return sel.gather(mem, s, p)
}

// mergeable checks rs are between 2 and maxSources runs, each short
// enough to be addressed in a selection; it returns their rows.
func mergeable(rs []*Run) (int, error) {
	if len(rs) < 2 || len(rs) > maxSources {
		return 0, fmt.Errorf("delta: merge of %d runs", len(rs))
	}
	total := 0
	for _, r := range rs {
		if r.Len() >= maxSourceRows {
			return 0, fmt.Errorf("delta: a run of %d rows is too long to merge", r.Len())
		}
		total += r.Len()
	}
	return total, nil
}

// mergeSel is the selection a merge makes before it gathers: the output's
// rows and series, each as src<<srcShift | its number in run src.
type mergeSel struct {
	rs       []*Run
	ps       [][]arrow.Date32 // each run's periods
	runCodes [][]int32        // each run's series codes; nil: compare ids
	rows     []uint32         // per output row
	series   []uint32         // per output series: the run giving its id and attributes
	start    []int32          // per output series: its first row (the run keeps a copy of its exact length)
	fresh    []int32          // output series the runs' writes created
	cur      []int            // next series of each run
	freshAt  []int            // walk of each run's ascending fresh list
	in       []int            // the runs holding the current series, ascending
	pos, end []int            // per run in `in`: next row and its end
}

// newMergeSel prepares the selection of rs, reusing sc's slices.
func newMergeSel(rs []*Run, sc *mergeScratch, total int) mergeSel {
	k := len(rs)
	m := mergeSel{
		rs:       rs,
		ps:       make([][]arrow.Date32, k),
		runCodes: sharedCodes(rs),
		rows:     slices.Grow(sc.rows[:0], total),
		series:   sc.series[:0],
		start:    sc.start[:0],
		cur:      make([]int, k),
		freshAt:  make([]int, k),
		in:       make([]int, 0, k),
		pos:      make([]int, k),
		end:      make([]int, k),
	}
	for x, r := range rs {
		m.ps[x] = r.Periods()
	}
	return m
}

// sharedCodes is each run's series codes when one key index coded every
// run (Run.codes), else nil. Two base series then compare by their codes,
// any other pair by the ids' bytes: the orders agree, and integers spare
// reading ids from every run a series.
func sharedCodes(rs []*Run) [][]int32 {
	coder := rs[0].coder
	if coder == nil {
		return nil
	}
	runCodes := make([][]int32, len(rs))
	for x, r := range rs {
		if r.coder != coder || len(r.codes) != r.NumSeries() {
			return nil
		}
		runCodes[x] = r.codes
	}
	return runCodes
}

// selectAll selects every output series in id order, with its rows. The
// selections are locals while it runs: appending to them through m would
// store into the heap (a write barrier each time) once per series, ~10 %
// of BenchmarkMerge.
func (m *mergeSel) selectAll(p *pacer) {
	cur := m.cur
	rows, series, start, fresh, in := m.rows, m.series, m.start, m.fresh, m.in
	for {
		if in = m.nextSeries(in[:0]); len(in) == 0 {
			break
		}
		start = append(start, int32(len(rows)))
		newest := in[len(in)-1] // in is ascending: runs are oldest first
		if len(in) == 1 {
			rows = m.takeRows(rows, newest)
		} else {
			rows = m.interleaveRows(rows, in)
		}
		if m.isFresh(newest, cur[newest]) {
			fresh = append(fresh, int32(len(series)))
		}
		pick := m.attrsRun(in)
		series = append(series, uint32(pick)<<srcShift|uint32(cur[pick]))
		for _, x := range in {
			cur[x]++
		}
		p.step(int(int32(len(rows)) - start[len(start)-1]))
	}
	m.rows, m.series, m.start, m.fresh, m.in = rows, series, append(start, int32(len(rows))), fresh, in
}

// nextSeries appends to in the runs whose next series has the smallest
// id, in ascending order; none when every run is done.
func (m *mergeSel) nextSeries(in []int) []int {
	rs, cur, runCodes := m.rs, m.cur, m.runCodes
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
	return in
}

// takeRows appends to rows the current series' rows of run x, the only
// run holding it.
func (m *mergeSel) takeRows(rows []uint32, x int) []uint32 {
	lo, hi := m.rs[x].Rows(m.cur[x])
	src := uint32(x) << srcShift
	for r := lo; r < hi; r++ {
		rows = append(rows, src|uint32(r))
	}
	return rows
}

// interleaveRows appends to rows the current series' rows from the runs
// in by period; for a period in several, the newest run's row, the others
// skipped.
func (m *mergeSel) interleaveRows(rows []uint32, in []int) []uint32 {
	pos, end, ps := m.pos, m.end, m.ps
	for _, x := range in {
		pos[x], end[x] = m.rs[x].Rows(m.cur[x])
	}
	for {
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
			return rows
		}
		rows = append(rows, uint32(best)<<srcShift|uint32(pos[best]))
		pos[best]++
	}
}

// isFresh says series i of run x was created by the run's writes.
func (m *mergeSel) isFresh(x, i int) bool {
	f := m.rs[x].fresh
	for m.freshAt[x] < len(f) && int(f[m.freshAt[x]]) < i {
		m.freshAt[x]++
	}
	return m.freshAt[x] < len(f) && int(f[m.freshAt[x]]) == i
}

// attrsRun is the run giving the current series (held by the runs in)
// its attributes: the newest whose writes carried them, else the newest.
func (m *mergeSel) attrsRun(in []int) int {
	for y := len(in) - 1; y >= 0; y-- {
		if m.rs[in[y]].Given(m.cur[in[y]]) {
			return in[y]
		}
	}
	return in[len(in)-1]
}

// gather builds the merged run from the selection: its data columns, ids,
// codes and attributes. On error nothing it allocated is kept.
func (m *mergeSel) gather(mem memory.Allocator, s *Schema, p *pacer) (_ *Run, err error) {
	rs := m.rs
	last := rs[len(rs)-1]
	out := &Run{seq: last.seq, start: slices.Clone(m.start), fresh: m.fresh}
	for _, r := range rs {
		out.pos = max(out.pos, r.pos)
		out.added += r.added
	}
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
		if err != nil {
			if out.ids != nil {
				out.ids.Release()
			}
			for _, x := range out.attrs {
				x.Release()
			}
		}
	}()
	cols = append(cols, seriesCodeColumn(mem, s, m.start, len(m.rows)))
	srcs := make([]arrow.Array, len(rs))
	for c := datafile.ColumnPeriod; c < s.Data.NumFields(); c++ {
		for x, r := range rs {
			srcs[x] = r.rec.Column(c)
		}
		g, err := gatherK(mem, srcs, m.rows, p)
		if err != nil {
			return nil, fmt.Errorf("delta: column %s: %w", s.Data.Field(c).Name, err)
		}
		cols = append(cols, g)
	}
	if err := m.gatherSeries(mem, s, out, srcs, p); err != nil {
		return nil, err
	}
	out.rec = array.NewRecordBatch(s.Data, cols, int64(len(m.rows)))
	out.bytes = RecordBytes(out.rec)
	return out, nil
}

// seriesCodeColumn is the merged run's series codes (output series q for
// rows start[q] to start[q+1]), written into the column's buffer directly.
func seriesCodeColumn(mem memory.Allocator, s *Schema, start []int32, rows int) arrow.Array {
	cb := memory.NewResizableBuffer(mem)
	cb.Resize(4 * rows)
	codes := asWords[uint32](cb.Bytes())
	for q := 0; q+1 < len(start); q++ {
		for r := start[q]; r < start[q+1]; r++ {
			codes[r] = uint32(q)
		}
	}
	cd := array.NewData(s.Data.Field(datafile.ColumnSeriesCode).Type, rows, []*memory.Buffer{nil, cb}, nil, 0, 0)
	cb.Release()
	defer cd.Release()
	return array.MakeFromData(cd)
}

// gatherSeries fills out's per-series columns from the selected series:
// ids, key codes, whether writes gave the attributes, and the attributes.
// srcs is scratch of one entry per run.
func (m *mergeSel) gatherSeries(mem memory.Allocator, s *Schema, out *Run, srcs []arrow.Array, p *pacer) error {
	rs := m.rs
	// Ids: a series in several runs has the same id in each, so the series
	// selection (which may pick an older run's attributes) gives the right
	// id too.
	for x, r := range rs {
		srcs[x] = r.ids
	}
	ids, err := gatherK(mem, srcs, m.series, p)
	if err != nil {
		return err
	}
	out.ids = ids.(*array.String)
	if m.runCodes != nil {
		out.codes, out.coder = make([]int32, len(m.series)), rs[0].coder
		for q, sr := range m.series {
			out.codes[q] = m.runCodes[sr>>srcShift][sr&rowMask]
		}
	}
	out.given = make([]bool, len(m.series))
	for q, sr := range m.series {
		out.given[q] = rs[sr>>srcShift].given[sr&rowMask]
	}
	for at := range s.Attrs {
		for x, r := range rs {
			srcs[x] = r.attrs[at]
		}
		g, err := gatherK(mem, srcs, m.series, p)
		if err != nil {
			return fmt.Errorf("delta: attribute %s: %w", s.Attrs[at].Name, err)
		}
		out.attrs = append(out.attrs, g)
	}
	return nil
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
