package livedelta

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// foldRuns merges a State's runs, oldest first, into one run with the
// incremental write path's own merge: the oracle Bulk must match.
func foldRuns(t *testing.T, st *State) *Run {
	t.Helper()
	runs := st.Runs()
	if len(runs) == 0 {
		return nil
	}
	r := runs[0]
	for _, next := range runs[1:] {
		m, err := mergeRuns(context.Background(), memory.DefaultAllocator, st.Schema(), []*Run{r, next}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r = m
	}
	return r
}

// sameRun fails unless two runs hold the same rows, series, attributes,
// precedence and counts, column by column.
func sameRun(t *testing.T, got, want *Run) {
	t.Helper()
	if got.seq != want.seq || got.pos != want.pos {
		t.Fatalf("seq, pos %d, %d; want %d, %d", got.seq, got.pos, want.seq, want.pos)
	}
	if !array.Equal(got.ids, want.ids) {
		t.Fatalf("ids\n%v\nwant\n%v", got.ids, want.ids)
	}
	if !slices.Equal(got.start, want.start) {
		t.Fatalf("start %v, want %v", got.start, want.start)
	}
	for c := 0; c < int(want.rec.NumCols()); c++ {
		if !array.Equal(got.rec.Column(c), want.rec.Column(c)) {
			t.Fatalf("column %s\n%v\nwant\n%v", want.rec.ColumnName(c), got.rec.Column(c), want.rec.Column(c))
		}
	}
	for a := range want.attrs {
		if !array.Equal(got.attrs[a], want.attrs[a]) {
			t.Fatalf("attribute %d\n%v\nwant\n%v", a, got.attrs[a], want.attrs[a])
		}
	}
	if !slices.Equal(got.given, want.given) {
		t.Fatalf("given %v, want %v", got.given, want.given)
	}
	if !slices.Equal(got.fresh, want.fresh) {
		t.Fatalf("fresh %v, want %v", got.fresh, want.fresh)
	}
	if got.added != want.added {
		t.Fatalf("added %d, want %d", got.added, want.added)
	}
	if got.bytes != RecordBytes(got.rec) {
		t.Fatalf("bytes %d, the record holds %d", got.bytes, RecordBytes(got.rec))
	}
}

// sameKeys fails unless two key indexes know the same series with the
// same base codes and delta periods.
func sameKeys(t *testing.T, got, want *keyIndex) {
	t.Helper()
	if len(got.series) != len(want.series) || got.base != want.base {
		t.Fatalf("key index of %d series, want %d", len(got.series), len(want.series))
	}
	for id, w := range want.series {
		g, ok := got.series[id]
		if !ok {
			t.Fatalf("key index lacks %s", id)
		}
		if g.id != id || g.code != w.code || !slices.Equal(g.base, w.base) || !slices.Equal(g.periods, w.periods) {
			t.Fatalf("series %s: code %d periods %v, want code %d periods %v", id, g.code, g.periods, w.code, w.periods)
		}
	}
}

// TestBulkMatchesIncremental replays random logs both ways: Bulk of every
// write at once against Apply of one write after the other, with freezes
// (generation boundaries) at random points. The writes revise base rows,
// append after them, repeat keys within and across writes, and bring new
// series with their attributes. Folding the incremental State's runs with
// the write path's merge must give Bulk's run exactly, and both States
// must take a further write alike.
func TestBulkMatchesIncremental(t *testing.T) {
	ctx := context.Background()
	s := testSchema(t)
	mem := memory.DefaultAllocator
	defer func(w, r int, h uint64) {
		bulkWorkers, bulkRowsPerWorker, bulkHashBits = w, r, h
	}(bulkWorkers, bulkRowsPerWorker, bulkHashBits)
	for seed := uint64(1); seed <= 40; seed++ {
		for _, workers := range []int{1, 2, 3, 9} {
			t.Run(fmt.Sprintf("seed=%d/workers=%d", seed, workers), func(t *testing.T) {
				bulkWorkers, bulkRowsPerWorker = workers, 1+int(seed%3)*50
				// Every fifth seed, ids collide in few hashes: the probe
				// must tell them apart by the ids themselves.
				bulkHashBits = ^uint64(0)
				if seed%5 == 0 {
					bulkHashBits = 0x3<<32 | 0x3
				}
				rng := rand.New(rand.NewPCG(seed, 11))
				base := newFakeBase(50, 20)
				rows, givens := randomWrites(rng, base, 1+rng.IntN(40), 1+rng.IntN(200))
				if seed%3 == 0 {
					// Ids longer than a table slot holds, none in the base.
					for i := range rows {
						g := map[string]bool{}
						for j := range rows[i] {
							id := "a-longer-series-name/" + rows[i][j].id
							g[id] = true // new series carry attributes
							rows[i][j].id = id
						}
						givens[i] = g
					}
				}
				writes := make([]arrow.RecordBatch, len(rows))
				for i := range rows {
					writes[i] = write(s, rows[i], givens[i])
				}
				defer func() {
					for _, w := range writes {
						w.Release()
					}
				}()
				inc := Empty(s)
				for i, w := range writes {
					var err error
					if inc, err = inc.Apply(ctx, mem, w, uint64(i+1), uint64(100*(i+1)), base); err != nil {
						t.Fatal(err)
					}
					if rng.IntN(6) == 0 {
						inc = inc.Freeze()
					}
				}
				bulk, err := Bulk(ctx, mem, s, writes, uint64(len(writes)), uint64(100*len(writes)), base)
				if err != nil {
					t.Fatal(err)
				}
				if len(bulk.Runs()) != 1 || bulk.frozen != 0 {
					t.Fatalf("%d runs, %d frozen: want one active run", len(bulk.Runs()), bulk.frozen)
				}
				sameRun(t, bulk.Runs()[0], foldRuns(t, inc))
				sameKeys(t, bulk.keys, inc.keys)
				if bulk.Added() != inc.Added() || bulk.Rows() > inc.Rows() {
					t.Fatalf("added %d rows %d; incremental %d, %d", bulk.Added(), bulk.Rows(), inc.Added(), inc.Rows())
				}

				// The next write sees the same delta either way.
				more, mg := randomWrites(rng, base, 1, 1+rng.IntN(200))
				next := write(s, more[0], mg[0])
				defer next.Release()
				seq, pos := uint64(len(writes)+1), uint64(100*(len(writes)+1))
				if inc, err = inc.Apply(ctx, mem, next, seq, pos, base); err != nil {
					t.Fatal(err)
				}
				if bulk, err = bulk.Apply(ctx, mem, next, seq, pos, base); err != nil {
					t.Fatal(err)
				}
				if bulk.Added() != inc.Added() {
					t.Fatalf("after a further write: added %d, incremental %d", bulk.Added(), inc.Added())
				}
				sameRun(t, foldRuns(t, bulk), foldRuns(t, inc))
				sameKeys(t, bulk.keys, inc.keys)
			})
		}
	}
}

// TestBulkMatchesOracle checks Bulk against the plain map oracle of
// TestApplyMatchesOracle, on larger writes and without a base for some.
func TestBulkMatchesOracle(t *testing.T) {
	ctx := context.Background()
	s := testSchema(t)
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		base := newFakeBase(200, 30)
		rows, givens := randomWrites(rng, base, 10+rng.IntN(50), 1+rng.IntN(3000))
		var writes []arrow.RecordBatch
		want := map[key]row{}
		givenAny := map[string]bool{}
		for i := range rows {
			writes = append(writes, write(s, rows[i], givens[i]))
			for _, r := range rows[i] {
				want[key{r.id, r.period}] = r
			}
			for id := range givens[i] {
				givenAny[id] = true
			}
		}
		st, err := Bulk(ctx, memory.DefaultAllocator, s, writes, 1, 1, base)
		if err != nil {
			t.Fatal(err)
		}
		checkState(t, st, base, want, givenAny)
		checkFresh(t, st, base, want, givenAny, nil)
		for _, w := range writes {
			w.Release()
		}
	}
}

// TestBulkEdges: no rows is the empty State; a write of another schema
// is refused, naming it.
func TestBulkEdges(t *testing.T) {
	ctx := context.Background()
	s := testSchema(t)
	mem := memory.DefaultAllocator
	empty := write(s, nil, nil)
	defer empty.Release()
	st, err := Bulk(ctx, mem, s, []arrow.RecordBatch{empty, empty}, 2, 2, nil)
	if err != nil || len(st.Runs()) != 0 {
		t.Fatalf("bulk of empty writes: %v runs, %v", st, err)
	}
	if st, err = Bulk(ctx, mem, s, nil, 0, 0, nil); err != nil || len(st.Runs()) != 0 {
		t.Fatalf("bulk of nothing: %v, %v", st, err)
	}
	// No base: every series is fresh, and the State takes appends.
	one := write(s, []row{{id: "b", period: 2, value: 1}, {id: "a", period: 1, value: 2}, {id: "b", period: 2, value: 3}}, map[string]bool{"a": true, "b": true})
	defer one.Release()
	if st, err = Bulk(ctx, mem, s, []arrow.RecordBatch{empty, one}, 2, 2, nil); err != nil {
		t.Fatal(err)
	}
	if r := st.Runs()[0]; r.Len() != 2 || !slices.Equal(r.Fresh(), []int32{0, 1}) || st.Added() != 2 {
		t.Fatalf("run of %d rows, fresh %v, added %d", r.Len(), r.Fresh(), st.Added())
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}}, nil)
	bad := array.NewRecordBatch(other, []arrow.Array{array.MakeArrayOfNull(mem, arrow.BinaryTypes.String, 0)}, 0)
	defer bad.Release()
	if _, err := Bulk(ctx, mem, s, []arrow.RecordBatch{one, bad}, 2, 2, nil); err == nil {
		t.Fatal("a write of another schema was taken")
	} else if !strings.Contains(err.Error(), "write 1 has columns") {
		t.Fatalf("error %q does not name the write", err)
	}
}

// BenchmarkBulk: the 150 writes of 10k rows of BenchmarkApply (1.5M rows
// over a 100k-series base) as one replay builds them.
func BenchmarkBulk(b *testing.B) {
	benchLoad(b, func(ctx context.Context, s *Schema, writes []arrow.RecordBatch, base *fakeBase) error {
		_, err := Bulk(ctx, memory.DefaultAllocator, s, writes, 150, 150, base)
		return err
	})
}
