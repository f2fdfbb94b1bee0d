package delta

import (
	"context"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
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
}

// Empty is the State of a dataset without live writes.
func Empty(s *Schema) *State { return &State{schema: s} }

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
	r.added = countAdded(r, base, st.runs)
	runs := append(slices.Clip(st.runs), r)
	for k := len(runs); k-st.frozen >= 2 && runs[k-2].Len() <= 2*runs[k-1].Len(); k = len(runs) {
		m, err := merge(ctx, mem, st.schema, runs[k-2], runs[k-1])
		if err != nil {
			return nil, err
		}
		runs = append(runs[:k-2], m)
	}
	return &State{schema: st.schema, runs: runs, frozen: st.frozen}, nil
}

// merge folds b (newer) into a.
func merge(ctx context.Context, mem memory.Allocator, s *Schema, a, b *Run) (*Run, error) {
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
	m, err := newRun(ctx, mem, s, w, b.seq)
	if err != nil {
		return nil, err
	}
	m.added = a.added + b.added
	m.pos = max(a.pos, b.pos)
	return m, nil
}

// countAdded counts r's rows whose key is in neither base nor older runs.
func countAdded(r *Run, base Base, older []*Run) int64 {
	var n int64
	ps := r.Periods()
	for i := 0; i < r.NumSeries(); i++ {
		id := r.SeriesID(i)
		var srcs [][]arrow.Date32
		if base != nil {
			if c, ok := base.Lookup(id); ok {
				srcs = append(srcs, base.Periods(c))
			}
		}
		for _, o := range older {
			if j, ok := o.Find(id); ok {
				lo, hi := o.Rows(j)
				srcs = append(srcs, o.Periods()[lo:hi])
			}
		}
		lo, hi := r.Rows(i)
		for _, p := range ps[lo:hi] {
			if !inAny(srcs, p) {
				n++
			}
		}
	}
	return n
}

func inAny(srcs [][]arrow.Date32, p arrow.Date32) bool {
	for _, s := range srcs {
		if i := sort.Search(len(s), func(i int) bool { return s[i] >= p }); i < len(s) && s[i] == p {
			return true
		}
	}
	return false
}

// Freeze marks every run as being folded into the next snapshot; later
// writes are kept apart from them.
func (st *State) Freeze() *State {
	return &State{schema: st.schema, runs: st.runs, frozen: len(st.runs)}
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
	for i, r := range st.runs {
		c := *r
		c.added = countAdded(&c, base, st.runs[:i])
		out.runs = append(out.runs, &c)
	}
	return out
}
