package livedelta

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
)

// fakeBase is a base snapshot of series "s%05d" for even numbers below
// 2*n (more digits, all of equal width, when 2*n needs them: the ids must
// sort as the numbers do, or Lookup misses), each with periods 0, 10, 20,
// ... (nPeriods of them).
type fakeBase struct {
	ids      []string
	periods  []arrow.Date32
	nPeriods int
}

func newFakeBase(n, nPeriods int) *fakeBase {
	b := &fakeBase{nPeriods: nPeriods}
	width := max(5, len(fmt.Sprint(2*n)))
	for i := 0; i < n; i++ {
		b.ids = append(b.ids, fmt.Sprintf("s%0*d", width, 2*i))
	}
	for p := 0; p < nPeriods; p++ {
		b.periods = append(b.periods, arrow.Date32(10*p))
	}
	return b
}

func (b *fakeBase) Lookup(id string) (int, bool) {
	i := sort.SearchStrings(b.ids, id)
	return i, i < len(b.ids) && b.ids[i] == id
}

func (b *fakeBase) Periods(int) []arrow.Date32 { return b.periods }

// boundedFakeBase is a fakeBase that is a BoundedBase, as the served
// snapshot is: Prepare then skips the periods of series written outside
// their bounds.
type boundedFakeBase struct{ *fakeBase }

func (b boundedFakeBase) Bounds(int) (first, last arrow.Date32) {
	return b.periods[0], b.periods[len(b.periods)-1]
}

// testSchema: value float64, an extra varying string column "status", and
// one attribute "unit".
func testSchema(t testing.TB) *Schema {
	data := datafile.Schema(arrow.PrimitiveTypes.Float64, []arrow.Field{{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true}})
	s, err := NewSchema(data, []arrow.Field{{Name: "unit", Type: arrow.BinaryTypes.String, Nullable: true}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type row struct {
	id     string
	period int32
	value  float64
	status string
	null   bool // status is null
}

type key struct {
	id     string
	period int32
}

// write builds a normalized write of rows; attributes given for every row
// of the series in given.
func write(s *Schema, rows []row, given map[string]bool) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s.Write)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.id)
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32(r.period))
		b.Field(2).(*array.Float64Builder).Append(r.value)
		if r.null {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(r.status)
		}
		if given[r.id] {
			b.Field(4).(*array.StringBuilder).Append("unit-" + r.id)
		} else {
			b.Field(4).AppendNull()
		}
		b.Field(5).(*array.BooleanBuilder).Append(given[r.id])
	}
	return b.NewRecordBatch()
}

// randomWrites makes writes of existing series (revisions and appends),
// new series, and duplicate keys within a write.
func randomWrites(rng *rand.Rand, base *fakeBase, writes, maxRows int) ([][]row, []map[string]bool) {
	var out [][]row
	var givens []map[string]bool
	known := map[string]bool{} // series given attributes by an earlier write
	v := 0.0
	for w := 0; w < writes; w++ {
		n := 1 + rng.IntN(maxRows)
		var rows []row
		given, omitted := map[string]bool{}, map[string]bool{}
		// Some writes are one series' many rows, out of order, with
		// duplicates: the long-series path of the sort.
		single := rng.IntN(5) == 0
		for i := 0; i < n; i++ {
			// series: base ones (even), new ones (odd), a few hot ones
			var num int
			switch rng.IntN(4) {
			case 0:
				num = rng.IntN(8)
			default:
				num = rng.IntN(2 * len(base.ids))
			}
			if single {
				num = 3
			}
			id := fmt.Sprintf("s%05d", num)
			p := int32(10 * rng.IntN(base.nPeriods+5)) // in the base or after it
			if rng.IntN(3) == 0 {
				p += int32(rng.IntN(10)) // between base periods
			}
			v++
			r := row{id: id, period: p, value: v, status: fmt.Sprintf("st%d", rng.IntN(3))}
			if rng.IntN(5) == 0 {
				r.status, r.null = "", true
			}
			rows = append(rows, r)
			if num%2 == 1 && !given[id] && known[id] && rng.IntN(4) == 0 {
				omitted[id] = true // a new series' later write may leave its attributes out
			}
			if (num%2 == 1 && !omitted[id]) || rng.IntN(3) == 0 {
				given[id] = true // new series carry attributes the first time
			}
		}
		for id := range given {
			known[id] = true
		}
		out = append(out, rows)
		givens = append(givens, given)
	}
	return out, givens
}

// TestApplyMatchesOracle: after any sequence of writes, the runs of a
// State read newest-wins give exactly the last value written per key;
// every run is sorted with one row per key and consistent offsets; Added
// counts the keys neither the base nor an earlier write had; fresh lists
// exactly the series the base lacks; attributes given once stay given.
func TestApplyMatchesOracle(t *testing.T) {
	ctx := context.Background()
	s := testSchema(t)
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			mem := memory.DefaultAllocator // runs are freed by the GC, not released
			rng := rand.New(rand.NewPCG(seed, 7))
			base := newFakeBase(50, 20)
			writes, givens := randomWrites(rng, base, 5+rng.IntN(60), 1+rng.IntN(300))
			var prepared Base = base // what the Prepare seeds prepare over
			if seed == 7 {
				prepared = boundedFakeBase{base}
			}
			st := Empty(s)
			want := map[key]row{}
			givenAny := map[string]bool{}
			attrOf := map[string]string{}
			// Odd seeds append and merge as the write path does: a merge
			// computed from an older State, installed into a newer one
			// (or dropped when a freeze made it stale).
			deferred := seed%2 == 1
			type pending struct {
				rs []*Run
				m  *Run
			}
			var queued []pending
			for i, rows := range writes {
				rec := retag(write(s, rows, givens[i]), i)
				var next *State
				var err error
				switch {
				case deferred && seed%4 == 3:
					// as DoPut does: sorted by Prepare, counted in by
					// AppendPrepared (seed 11: prepared over another base
					// object, so AppendPrepared sorts it again)
					// (seed 7: over a BoundedBase)
					over := prepared
					if seed == 11 {
						over = newFakeBase(50, 20)
					}
					var p *Prepared
					if p, err = Prepare(ctx, mem, s, rec, over, baseCodes(base, rec)); err != nil {
						t.Fatal(err)
					}
					next, err = st.AppendPrepared(ctx, mem, p, uint64(i+1), uint64(100*(i+1)), prepared)
					p.Release()
				case deferred:
					next, err = st.Append(ctx, mem, rec, uint64(i+1), uint64(100*(i+1)), base)
				default:
					next, err = st.Apply(ctx, mem, rec, uint64(i+1), uint64(100*(i+1)), base)
				}
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				st = next
				if deferred {
					for len(queued) > 0 && rng.IntN(2) == 0 {
						q := queued[0]
						queued = queued[1:]
						st, _ = st.Replace(q.rs, q.m)
					}
					if rs, ok := st.MergeCandidate(); ok {
						m, err := st.Merge(ctx, mem, rs)
						if err != nil {
							t.Fatal(err)
						}
						queued = append(queued, pending{rs, m})
					}
				}
				for _, r := range rows {
					want[key{r.id, r.period}] = r
				}
				for id := range givens[i] {
					givenAny[id] = true
					attrOf[id] = fmt.Sprintf("unit-%s#%d", id, i) // the newest write's attributes stand
				}
				if i == len(writes)/2 {
					st = st.Freeze() // later writes stay apart from frozen runs
				}
				checkFresh(t, st, base, want, givenAny, attrOf)
			}
			if deferred {
				for _, q := range queued {
					st, _ = st.Replace(q.rs, q.m)
				}
				// Merge what is left, as the merger would when idle.
				for {
					rs, ok := st.MergeCandidate()
					if !ok {
						break
					}
					m, err := st.Merge(ctx, mem, rs)
					if err != nil {
						t.Fatal(err)
					}
					var replaced bool
					if st, replaced = st.Replace(rs, m); !replaced {
						t.Fatal("a fresh candidate's merge was not installed")
					}
				}
			}
			checkState(t, st, base, want, givenAny)
			checkFresh(t, st, base, want, givenAny, attrOf)
			checkFresh(t, st.Rebase(base), base, want, givenAny, attrOf)
			if len(writes) > 8 && len(st.Runs()) >= len(writes) {
				t.Errorf("%d runs after %d writes: runs are not merged", len(st.Runs()), len(writes))
			}
		})
	}
}

// baseCodes is each row's series code in base (-1: none), as DoPut's
// normalisation finds them.
func baseCodes(base Base, rec arrow.RecordBatch) []int32 {
	ids := rec.Column(0).(*array.String)
	codes := make([]int32, ids.Len())
	for i := range codes {
		codes[i] = -1
		if c, ok := base.Lookup(ids.Value(i)); ok {
			codes[i] = int32(c)
		}
	}
	return codes
}

func checkState(t *testing.T, st *State, base *fakeBase, want map[key]row, givenAny map[string]bool) {
	t.Helper()
	got := map[key]row{}
	gotGiven := map[string]bool{}
	var added int64
	for ri, r := range st.Runs() {
		// coded by the State's own index (merges order by the codes)
		if r.coder != st.keys || len(r.codes) != r.NumSeries() {
			t.Fatalf("run %d: coded by %p with %d codes, want %p and %d", ri, r.coder, len(r.codes), st.keys, r.NumSeries())
		}
		for i, c := range r.codes {
			want, ok := base.Lookup(r.SeriesID(i))
			if !ok {
				want = -1
			}
			if c != int32(want) {
				t.Fatalf("run %d series %q: code %d, want %d", ri, r.SeriesID(i), c, want)
			}
		}
		rec := r.Record()
		codes := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32).Uint32Values()
		ps := r.Periods()
		vals := rec.Column(datafile.ColumnValue).(*array.Float64).Float64Values()
		status := rec.Column(3).(*array.String)
		if r.NumSeries() == 0 || r.start[0] != 0 || int(r.start[r.NumSeries()]) != r.Len() {
			t.Fatalf("run %d: start %v for %d rows", ri, r.start, r.Len())
		}
		for i := 0; i < r.NumSeries(); i++ {
			if i > 0 && r.SeriesID(i-1) >= r.SeriesID(i) {
				t.Fatalf("run %d: ids not strictly ascending at %d: %q, %q", ri, i, r.SeriesID(i-1), r.SeriesID(i))
			}
			lo, hi := r.Rows(i)
			if lo >= hi {
				t.Fatalf("run %d: series %d has no rows", ri, i)
			}
			for j := lo; j < hi; j++ {
				if int(codes[j]) != i {
					t.Fatalf("run %d row %d: code %d, want %d", ri, j, codes[j], i)
				}
				if j > lo && ps[j-1] >= ps[j] {
					t.Fatalf("run %d series %s: periods not strictly ascending: %d, %d", ri, r.SeriesID(i), ps[j-1], ps[j])
				}
				rw := row{id: r.SeriesID(i), period: int32(ps[j]), value: vals[j], null: status.IsNull(j)}
				if !rw.null {
					rw.status = status.Value(j)
				}
				got[key{rw.id, rw.period}] = rw
			}
			if r.Given(i) {
				gotGiven[r.SeriesID(i)] = true
				if a := r.Attrs(0).(*array.String); a.IsNull(i) || !isUnitOf(a.Value(i), r.SeriesID(i)) {
					t.Fatalf("run %d series %s: attribute %v", ri, r.SeriesID(i), a)
				}
			}
			_, inBase := base.Lookup(r.SeriesID(i))
			if isFresh := slices.Contains(r.Fresh(), int32(i)); isFresh == inBase {
				t.Fatalf("run %d series %s: fresh %v, in base %v", ri, r.SeriesID(i), isFresh, inBase)
			}
		}
		added += r.added
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys, want %d", len(got), len(want))
	}
	var wantAdded int64
	for k, w := range want {
		if g := got[k]; g != w {
			t.Fatalf("key %v: got %+v, want %+v", k, g, w)
		}
		if _, ok := base.Lookup(k.id); !ok || k.period%10 != 0 || int(k.period/10) >= base.nPeriods {
			wantAdded++
		}
	}
	if added != wantAdded || st.Added() != wantAdded {
		t.Fatalf("added %d (state %d), want %d", added, st.Added(), wantAdded)
	}
	for id := range givenAny {
		if !gotGiven[id] {
			t.Fatalf("series %s: attributes given by a write, lost", id)
		}
	}
}

// TestApplyMatchesOracleParallelProbe runs the oracle test with every
// write's key-index probe split over the cores (as a replay's large
// chunks are), so the parallel path is checked (and raced) on small data.
func TestApplyMatchesOracleParallelProbe(t *testing.T) {
	old := parallelProbeRows
	parallelProbeRows = 1
	defer func() { parallelProbeRows = old }()
	TestApplyMatchesOracle(t)
}

// checkFresh: the State's list of fresh series, kept up write by write
// (withFresh), is what a rebase lists in full from its runs (listFresh):
// the same ids in order, each given exactly when a write gave it
// attributes, with the attribute values of the newest write that gave
// them (attrOf; nil: "unit-"+id). And the ids are exactly the written
// series the base lacks.
func checkFresh(t *testing.T, st *State, base *fakeBase, want map[key]row, givenAny map[string]bool, attrOf map[string]string) {
	t.Helper()
	got, full := st.Fresh(), listFresh(st.Runs())
	var ids []string
	seen := map[string]bool{}
	for k := range want {
		if _, ok := base.Lookup(k.id); !ok && !seen[k.id] {
			seen[k.id] = true
			ids = append(ids, k.id)
		}
	}
	slices.Sort(ids)
	if len(got) != len(ids) || len(full) != len(ids) {
		t.Fatalf("%d fresh series kept, %d listed from the runs, want %d", len(got), len(full), len(ids))
	}
	for j, f := range got {
		g := full[j]
		if f.ID != ids[j] || g.ID != ids[j] {
			t.Fatalf("fresh series %d: kept %q, listed %q, want %q", j, f.ID, g.ID, ids[j])
		}
		if f.Given() != givenAny[f.ID] || g.Given() != f.Given() {
			t.Fatalf("series %s: given kept %v, listed %v, want %v", f.ID, f.Given(), g.Given(), givenAny[f.ID])
		}
		if !f.Given() {
			continue
		}
		wantAttr := "unit-" + f.ID
		if attrOf != nil {
			wantAttr = attrOf[f.ID]
		}
		for k, c := range []*FreshSeries{f, g} {
			a, row := c.Attr(0)
			if s := a.(*array.String); s.IsNull(row) || s.Value(row) != wantAttr {
				t.Fatalf("series %s (%s): attribute %v at row %d, want %q", f.ID, []string{"kept", "listed"}[k], a, row, wantAttr)
			}
		}
	}
}

// retag gives the attributes of write number w's series a value of that
// write's own ("unit-<id>#<w>"), so a test can tell which write's
// attributes a view shows.
func retag(rec arrow.RecordBatch, w int) arrow.RecordBatch {
	defer rec.Release()
	ids := rec.Column(0).(*array.String)
	old := rec.Column(4).(*array.String)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := 0; i < ids.Len(); i++ {
		if old.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(fmt.Sprintf("unit-%s#%d", ids.Value(i), w))
		}
	}
	tagged := b.NewArray()
	defer tagged.Release()
	cols := slices.Clone(rec.Columns())
	cols[4] = tagged
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

// isUnitOf reports whether v is an attribute value write or retag gives
// series id.
func isUnitOf(v, id string) bool {
	return v == "unit-"+id || strings.HasPrefix(v, "unit-"+id+"#")
}

// TestCatchUp: a rebase made from an earlier State of the chain (off the
// writer's lock) and caught up with the runs appended since is the rebase
// of the later State, run for run (what each adds, which series are
// fresh) and in its list of fresh series, whether it drops the frozen
// runs (a compaction) or keeps them (a reload); and a State whose runs a

// appendWrite is st.Append of rows as write number n (its sequence number
// and WAL position).
func appendWrite(t *testing.T, st *State, rows []row, given map[string]bool, n int, base Base) *State {
	t.Helper()
	rec := write(st.Schema(), rows, given)
	defer rec.Release()
	next, err := st.Append(context.Background(), memory.DefaultAllocator, rec, uint64(n), uint64(n), base)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// merge replaced since is refused.
func TestCatchUp(t *testing.T) {
	ctx := context.Background()
	s := testSchema(t)
	mem := memory.DefaultAllocator
	for seed := uint64(1); seed <= 8; seed++ {
		for _, drop := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/drop=%v", seed, drop), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				base := newFakeBase(50, 20)
				next := newFakeBase(70, 25) // the new base: more series, more periods
				writes, givens := randomWrites(rng, base, 10+rng.IntN(20), 1+rng.IntN(200))
				st := Empty(s)
				var pre *State
				at := 3 + rng.IntN(len(writes)-4) // writes before pre
				for i, rows := range writes {
					st = appendWrite(t, st, rows, givens[i], i+1, base)
					if i == 1 {
						st = st.Freeze()
					}
					if i == at {
						pre = st
					}
				}
				rebase := func(x *State) *State {
					if drop {
						return x.DropFrozen(next)
					}
					return x.Rebase(next)
				}
				got, ok := st.CatchUp(pre, rebase(pre))
				if !ok {
					t.Fatal("refused a State that only appended runs")
				}
				want := rebase(st)
				if len(got.Runs()) != len(want.Runs()) || got.frozen != want.frozen {
					t.Fatalf("%d runs (%d frozen), want %d (%d)", len(got.Runs()), got.frozen, len(want.Runs()), want.frozen)
				}
				for i, r := range got.Runs() {
					w := want.Runs()[i]
					if r.Record() != w.Record() || r.added != w.added || !slices.Equal(r.fresh, w.fresh) || !slices.Equal(r.codes, w.codes) {
						t.Fatalf("run %d: added %d fresh %v, want %d %v", i, r.added, r.fresh, w.added, w.fresh)
					}
				}
				if got.Added() != want.Added() {
					t.Fatalf("added %d, want %d", got.Added(), want.Added())
				}
				gf, wf := got.Fresh(), want.Fresh()
				if len(gf) != len(wf) {
					t.Fatalf("%d fresh series, want %d", len(gf), len(wf))
				}
				for j := range gf {
					if gf[j].ID != wf[j].ID || gf[j].Given() != wf[j].Given() {
						t.Fatalf("fresh %d: %q given %v, want %q %v", j, gf[j].ID, gf[j].Given(), wf[j].ID, wf[j].Given())
					}
				}
				// A merge of pre's runs since: refused.
				if rs, ok := st.MergeCandidate(); ok && slices.Contains(pre.Runs(), rs[0]) {
					m, err := st.Merge(ctx, mem, rs)
					if err != nil {
						t.Fatal(err)
					}
					merged, _ := st.Replace(rs, m)
					if _, ok := merged.CatchUp(pre, rebase(pre)); ok {
						t.Fatal("caught up a State whose runs a merge replaced")
					}
				}
			})
		}
	}
}

// TestMergeByCodes: a merge of runs one key index coded (base series
// ordered by their codes) gives the same run as the merge of the same runs
// by ids alone, for runs of base series and new ones interleaved, for
// merges of merged runs, and for runs coded by different indexes (which
// merge by ids); a merged run's codes are its series' codes in the base.
func TestMergeByCodes(t *testing.T) {
	ctx := context.Background()
	s := testSchema(t)
	mem := memory.DefaultAllocator
	uncoded := func(rs []*Run) []*Run {
		out := make([]*Run, len(rs))
		for i, r := range rs {
			c := *r
			c.codes, c.coder = nil, nil
			out[i] = &c
		}
		return out
	}
	same := func(t *testing.T, got, want *Run) {
		t.Helper()
		if !array.Equal(got.ids, want.ids) || !slices.Equal(got.start, want.start) || !slices.Equal(got.given, want.given) ||
			!slices.Equal(got.fresh, want.fresh) || got.added != want.added || !array.RecordEqual(got.rec, want.rec) {
			t.Fatalf("merged by codes:\n%v %v\nby ids:\n%v %v", got.ids, got.start, want.ids, want.start)
		}
		for a := range got.attrs {
			if !array.Equal(got.attrs[a], want.attrs[a]) {
				t.Fatalf("attribute %d: %v, want %v", a, got.attrs[a], want.attrs[a])
			}
		}
	}
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 5))
			base := newFakeBase(200, 30)
			writes, givens := randomWrites(rng, base, 4*MergeFanIn, 1+rng.IntN(300))
			st := Empty(s)
			for i, rows := range writes {
				st = appendWrite(t, st, rows, givens[i], i+1, base)
			}
			merge := func(rs []*Run) *Run {
				t.Helper()
				m, err := st.Merge(ctx, mem, rs)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			check := func(rs []*Run) *Run {
				t.Helper()
				m := merge(rs)
				same(t, m, merge(uncoded(rs)))
				if m.coder != rs[0].coder || len(m.codes) != m.NumSeries() {
					t.Fatalf("merged run coded by %p with %d codes, want %p and %d", m.coder, len(m.codes), rs[0].coder, m.NumSeries())
				}
				for i := range m.NumSeries() {
					c, ok := base.Lookup(m.SeriesID(i))
					if !ok {
						c = -1
					}
					if m.codes[i] != int32(c) {
						t.Fatalf("series %q: code %d, want %d", m.SeriesID(i), m.codes[i], c)
					}
				}
				return m
			}
			runs := st.Runs()
			var merged []*Run
			for g := 0; g < MergeFanIn; g++ {
				n := 2 + rng.IntN(MergeFanIn-1)
				merged = append(merged, check(runs[g*MergeFanIn:g*MergeFanIn+n]))
			}
			check(merged)
			// runs counted by another index (a rebase's copy beside the
			// original) merge by ids, and their merge is left uncoded
			other := st.Rebase(base).Runs()
			mixed := []*Run{runs[0], other[1], runs[2]}
			m := merge(mixed)
			same(t, m, merge(uncoded(mixed)))
			if m.codes != nil || m.coder != nil {
				t.Fatal("a merge of runs of two indexes kept codes")
			}
		})
	}
}

// TestFindCode: a run counted over a base finds that base's series by
// code exactly as Find does by id; it declines (usable false) when it holds
// series the base lacks or is asked about another base, so a caller falls
// back to Find.
func TestFindCode(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			base, other := newFakeBase(200, 30), newFakeBase(200, 30)
			writes, givens := randomWrites(rng, base, 2*MergeFanIn+1, 1+rng.IntN(300))
			st := Empty(testSchema(t))
			for i, rows := range writes {
				if i%2 == 0 { // only base series (even numbers): no fresh ones
					rows = slices.DeleteFunc(slices.Clone(rows), func(r row) bool {
						_, ok := base.Lookup(r.id)
						return !ok
					})
					if len(rows) == 0 {
						continue
					}
				}
				st = appendWrite(t, st, rows, givens[i], i+1, base)
			}
			if rs, ok := st.MergeCandidate(); ok {
				m, err := st.Merge(context.Background(), memory.DefaultAllocator, rs)
				if err != nil {
					t.Fatal(err)
				}
				st, _ = st.Replace(rs, m)
			}
			usable := 0
			for _, r := range st.Runs() {
				for code, id := range base.ids {
					wantI, wantOK := r.Find(id)
					i, ok, use := r.FindCode(base, int32(code))
					if use != (len(r.Fresh()) == 0) {
						t.Fatalf("run of %d series, %d fresh: usable %v", r.NumSeries(), len(r.Fresh()), use)
					}
					if use && (i != wantI || ok != wantOK) {
						t.Fatalf("series %q (code %d): FindCode %d %v, Find %d %v", id, code, i, ok, wantI, wantOK)
					}
					if _, _, use := r.FindCode(other, int32(code)); use {
						t.Fatalf("series %q: FindCode usable over a base the run was not counted over", id)
					}
				}
				if len(r.Fresh()) == 0 {
					usable++
				}
			}
			if usable == 0 {
				t.Fatal("no run without fresh series: the code path went untested")
			}
		})
	}
}
