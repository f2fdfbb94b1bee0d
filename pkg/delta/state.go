package delta

import (
	"context"
	"fmt"
	"slices"
	"strings"

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

// State is an immutable set of runs: what one view of the dataset merges
// over its base. Apply, Freeze, DropFrozen and Rebase return new States.
type State struct {
	schema *Schema
	runs   []*Run // by seq, oldest first
	frozen int    // runs[:frozen] are being folded into the next snapshot
	keys   *keyIndex
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
		a, b, ok := st.MergeCandidate()
		if !ok {
			return st, nil
		}
		m, err := merge(ctx, mem, st.schema, a, b)
		if err != nil {
			return nil, err
		}
		st, _ = st.Replace(a, b, m)
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
	r.added, r.fresh = keys.addEntries(r, entries)
	runs := append(slices.Clip(st.runs), r)
	return &State{schema: st.schema, runs: runs, frozen: st.frozen, keys: keys}, nil
}

// MergeCandidate returns two adjacent unfrozen runs worth merging: the
// newest pair whose older run is at most twice the newer's size. Merging
// such pairs keeps sizes falling geometrically from oldest to newest, so
// every row is merged O(log n) times and a read visits O(log n) runs.
func (st *State) MergeCandidate() (a, b *Run, ok bool) {
	for k := len(st.runs) - 1; k-1 >= st.frozen; k-- {
		if st.runs[k-1].Len() <= 2*st.runs[k].Len() {
			return st.runs[k-1], st.runs[k], true
		}
	}
	return nil, nil, false
}

// Merge folds run b into the older run a (MergeCandidate's pair). It reads
// only the immutable runs, so it may run without the writer's lock while
// writes are appended; Replace installs the result.
func (st *State) Merge(ctx context.Context, mem memory.Allocator, a, b *Run) (*Run, error) {
	return merge(ctx, mem, st.schema, a, b)
}

// Replace returns st with the adjacent runs a and b replaced by m, their
// merge; false if they are no longer adjacent unfrozen runs of st (a
// compaction froze them, a reload rebased them).
func (st *State) Replace(a, b, m *Run) (*State, bool) {
	for k := st.frozen; k+1 < len(st.runs); k++ {
		if st.runs[k] == a && st.runs[k+1] == b {
			runs := make([]*Run, 0, len(st.runs)-1)
			runs = append(append(append(runs, st.runs[:k]...), m), st.runs[k+2:]...)
			return &State{schema: st.schema, runs: runs, frozen: st.frozen, keys: st.keys}, true
		}
	}
	return st, false
}

// merge folds b (newer) into a. Both are sorted with one row per key, so
// the merge is one pass: series by id (one string comparison per series,
// not per row), rows of a series in both by period; for a key in both,
// b's row wins. Every column is then gathered from the two runs directly.
func merge(_ context.Context, mem memory.Allocator, s *Schema, a, b *Run) (_ *Run, err error) {
	na, nb := a.NumSeries(), b.NumSeries()
	pa, pb := a.Periods(), b.Periods()
	rows := make([]uint32, 0, a.Len()+b.Len())
	var series []uint32 // per output series: a's or b's (fromB) series number
	var start []int32
	var fresh []int32
	// fresh lists are ascending: walk them with the series.
	fa, fb := 0, 0
	isFresh := func(r *Run, cur *int, i int) bool {
		for *cur < len(r.fresh) && int(r.fresh[*cur]) < i {
			*cur++
		}
		return *cur < len(r.fresh) && int(r.fresh[*cur]) == i
	}
	i, j := 0, 0
	for i < na || j < nb {
		c := 0
		switch {
		case j == nb:
			c = -1
		case i == na:
			c = 1
		default:
			c = strings.Compare(a.SeriesID(i), b.SeriesID(j))
		}
		start = append(start, int32(len(rows)))
		switch {
		case c < 0:
			lo, hi := a.Rows(i)
			for r := lo; r < hi; r++ {
				rows = append(rows, uint32(r))
			}
			if isFresh(a, &fa, i) {
				fresh = append(fresh, int32(len(series)))
			}
			series = append(series, uint32(i))
			i++
		case c > 0:
			lo, hi := b.Rows(j)
			for r := lo; r < hi; r++ {
				rows = append(rows, uint32(r)|fromB)
			}
			if isFresh(b, &fb, j) {
				fresh = append(fresh, int32(len(series)))
			}
			series = append(series, uint32(j)|fromB)
			j++
		default:
			x, xe := a.Rows(i)
			y, ye := b.Rows(j)
			for x < xe || y < ye {
				switch {
				case y == ye || x < xe && pa[x] < pb[y]:
					rows = append(rows, uint32(x))
					x++
				case x == xe || pb[y] < pa[x]:
					rows = append(rows, uint32(y)|fromB)
					y++
				default: // the same key: the newer row
					rows = append(rows, uint32(y)|fromB)
					x, y = x+1, y+1
				}
			}
			if isFresh(b, &fb, j) {
				fresh = append(fresh, int32(len(series)))
			}
			// The series' attributes: b's if its writes carried them.
			if b.Given(j) || !a.Given(i) {
				series = append(series, uint32(j)|fromB)
			} else {
				series = append(series, uint32(i))
			}
			i, j = i+1, j+1
		}
	}
	start = append(start, int32(len(rows)))

	m := &Run{seq: b.seq, pos: max(a.pos, b.pos), added: a.added + b.added, start: start, fresh: fresh}
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
	codes := make([]uint32, len(rows))
	for k := 0; k+1 < len(start); k++ {
		for r := start[k]; r < start[k+1]; r++ {
			codes[r] = uint32(k)
		}
	}
	cols = append(cols, uint32s(mem, codes))
	for c := datafile.ColumnPeriod; c < s.Data.NumFields(); c++ {
		g, err := gather2(mem, a.rec.Column(c), b.rec.Column(c), rows)
		if err != nil {
			return nil, fmt.Errorf("delta: column %s: %w", s.Data.Field(c).Name, err)
		}
		cols = append(cols, g)
	}
	// Ids: a series in both runs has the same id in each, so the series
	// selection (which may pick a's attributes) gives the right id too.
	ids, err := gather2(mem, a.ids, b.ids, series)
	if err != nil {
		return nil, err
	}
	m.ids = ids.(*array.String)
	m.given = make([]bool, len(series))
	for k, sr := range series {
		if sr&fromB == 0 {
			m.given[k] = a.given[sr]
		} else {
			m.given[k] = b.given[sr&^fromB]
		}
	}
	for at := range s.Attrs {
		g, err := gather2(mem, a.attrs[at], b.attrs[at], series)
		if err != nil {
			return nil, fmt.Errorf("delta: attribute %s: %w", s.Attrs[at].Name, err)
		}
		m.attrs = append(m.attrs, g)
	}
	m.rec = array.NewRecordBatch(s.Data, cols, int64(len(rows)))
	m.bytes = RecordBytes(m.rec)
	return m, nil
}

// Freeze marks every run as being folded into the next snapshot; later
// writes are kept apart from them.
func (st *State) Freeze() *State {
	return &State{schema: st.schema, runs: st.runs, frozen: len(st.runs), keys: st.keys}
}

// DropFrozen removes the frozen runs once the snapshot holding them is
// served, re-counting what the rest add over the new base.
func (st *State) DropFrozen(base Base) *State {
	return (&State{schema: st.schema, runs: slices.Clone(st.runs[st.frozen:])}).Rebase(base)
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
	return out
}
