package delta

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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
// every earlier one), logged durably through WAL position pos. Adjacent
// unfrozen runs of similar size are merged, so a State holds O(log n) runs.
func (st *State) Apply(ctx context.Context, mem memory.Allocator, w arrow.RecordBatch, seq, pos uint64, base Base) (*State, error) {
	r, err := newRun(ctx, mem, st.schema, w, seq)
	if err != nil {
		return nil, err
	}
	r.pos = pos
	if st.keys == nil || st.keys.base != base {
		// Another base than the chain was counted over: count again on
		// copies of the runs (Rebase), never on runs readers hold.
		st = st.Rebase(base)
	}
	keys := st.keys
	r.added, r.fresh = keys.add(r)
	runs := append(slices.Clip(st.runs), r)
	for k := len(runs); k-st.frozen >= 2 && runs[k-2].Len() <= 2*runs[k-1].Len(); k = len(runs) {
		m, err := merge(ctx, mem, st.schema, runs[k-2], runs[k-1], base)
		if err != nil {
			return nil, err
		}
		runs = append(runs[:k-2], m)
	}
	return &State{schema: st.schema, runs: runs, frozen: st.frozen, keys: keys}, nil
}

// merge folds b (newer) into a. Both are sorted with one row per key, so
// the merge is one linear pass; for a key in both, b's row wins.
func merge(ctx context.Context, mem memory.Allocator, s *Schema, a, b *Run, base Base) (*Run, error) {
	wa, err := a.toWrite(ctx, mem, s)
	if err != nil {
		return nil, err
	}
	defer wa.Release()
	wb, err := b.toWrite(ctx, mem, s)
	if err != nil {
		return nil, err
	}
	defer wb.Release()
	w, err := concatRecords(mem, s.Write, wa, wb)
	if err != nil {
		return nil, err
	}
	defer w.Release()
	ids := w.Column(0).(*array.String)
	ps := w.Column(1).(*array.Date32).Date32Values()
	na, n := int(wa.NumRows()), int(w.NumRows())
	rows := make([]int32, 0, n)
	i, j := 0, na
	for i < na || j < n {
		switch {
		case j == n:
			rows = append(rows, int32(i))
			i++
		case i == na:
			rows = append(rows, int32(j))
			j++
		default:
			c := strings.Compare(ids.Value(i), ids.Value(j))
			if c == 0 {
				c = cmp.Compare(ps[i], ps[j])
			}
			switch {
			case c < 0:
				rows = append(rows, int32(i))
				i++
			case c > 0:
				rows = append(rows, int32(j))
				j++
			default: // the same key: the newer row
				rows = append(rows, int32(j))
				i, j = i+1, j+1
			}
		}
	}
	m, err := assemble(ctx, mem, s, b.seq, w, rows)
	if err != nil {
		return nil, err
	}
	m.added = a.added + b.added
	m.pos = max(a.pos, b.pos)
	// A series is in the base or not whichever run holds it.
	fresh := map[string]bool{}
	for _, r := range []*Run{a, b} {
		for _, i := range r.fresh {
			fresh[r.SeriesID(int(i))] = true
		}
	}
	for i := 0; i < m.NumSeries() && len(fresh) > 0; i++ {
		if fresh[m.SeriesID(i)] {
			m.fresh = append(m.fresh, int32(i))
		}
	}
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
