package query_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// TestCompositeLatest: a composite's latest (LatestRow in every range,
// Latest, LatestValues), which the delta's last row decides against the
// base's latest without merging, is the last non-null row of the merged
// rows. The writes revise cold and hot rows, tie a period across runs,
// write null values over non-null ones and add a series; every tiered base
// is tried.
func TestCompositeLatest(t *testing.T) {
	root, cases := tierFixture(t)
	ranges := tierRanges(t)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			base := openTier(t, filepath.Join(root, tc.Name), coldfile.NewCache(1<<20))
			for _, c := range []*query.Composite{query.NewComposite(base, applyWrites(t, base)), query.NewComposite(base, appendWrites(t, base))} {
				checkLatest(t, c, ranges)
			}
		})
	}
}

// checkLatest compares c's latest answers with the last valid row of its
// merged rows, for every series and range.
func checkLatest(t *testing.T, c *query.Composite, ranges map[string]query.Range) {
	t.Helper()
	sel, err := c.Select(query.Selector{Kind: query.ByPrefix})
	if err != nil {
		t.Fatal(err)
	}
	var codes []int32
	var want []string
	for k := 0; k < sel.Len(); k++ {
		code := sel.Code(k)
		id := c.SeriesID(code)
		for name, rg := range ranges {
			ps, err := c.Rows(code, rg, nil)
			if err != nil {
				t.Fatal(err)
			}
			wp, wok := query.LastValid(ps)
			if w, g := latestText(wp, wok, nil), latestText(c.LatestRow(code, rg)); w != g {
				t.Errorf("%s %s: latest row %q, the merged rows' last valid %q", id, name, g, w)
			}
			if !rg.IsAll() {
				continue
			}
			lp, lok := c.Latest(code)
			if wok != lok || (wok && lp != int32(wp.Rec.Column(datafile.ColumnPeriod).(*array.Date32).Value(int(wp.Lo)))) {
				t.Errorf("%s: Latest %d %v, the merged rows' last valid %q", id, lp, lok, latestText(wp, wok, nil))
			}
			codes = append(codes, int32(code))
			if wok {
				want = append(want, cellText(wp.Rec.Column(datafile.ColumnValue), int(wp.Lo)))
			} else {
				want = append(want, "null")
			}
		}
	}
	got, err := c.LatestValues(context.Background(), codes, memory.NewGoAllocator())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i, code := range codes {
		if g := cellText(got, i); g != want[i] {
			t.Errorf("%s: LatestValues %s, the merged rows' last valid %s", c.SeriesID(int(code)), g, want[i])
		}
	}
}

// appendWrites is applyWrites with each write a run of its own (as the
// write path leaves them until a merge), and two more: a revision of
// every base series' latest row, then of some again (one period, three
// runs, newest winning) and one with a null value.
func appendWrites(t *testing.T, r *query.SnapshotReader) *livedelta.State {
	t.Helper()
	fields, _ := r.Snapshot().Index().Attributes()
	sc, err := livedelta.NewSchema(r.Snapshot().Schema(), fields)
	if err != nil {
		t.Fatal(err)
	}
	var revise, again []tierWrite
	for code := 0; code < int(r.Info().Series); code++ {
		lp, ok := r.Latest(code)
		if !ok {
			continue
		}
		id, per := r.SeriesID(code), period.Format(lp)
		revise = append(revise, tierWrite{id, per, float64(1000 + code), "r"})
		switch code % 3 {
		case 0:
			again = append(again, tierWrite{id, per, float64(2000 + code), "a"})
		case 1:
			again = append(again, tierWrite{id, per, nil, "a"})
		}
	}
	st := livedelta.Empty(sc)
	for k, w := range tierWrites(t, sc, r, revise, again) {
		if st, err = st.Append(context.Background(), memory.NewGoAllocator(), w, uint64(k+1), uint64(k+1), r); err != nil {
			t.Fatal(err)
		}
		w.Release()
	}
	if len(st.Runs()) < 5 {
		t.Fatalf("%d runs: the writes were merged", len(st.Runs()))
	}
	return st
}

// TestLatestKeptAndWalked: a latest query answered from the index gives the
// same rows whether the plan keeps each series' latest period while
// counting (a selection of at most 4096 series) or looks it up again while
// streaming (a larger one), over a snapshot and over a delta that moves
// some series' latest.
func TestLatestKeptAndWalked(t *testing.T) {
	const n = 5000
	root := testsnap.Uniform(t, n, 3)
	s, err := snapshot.Open(filepath.Join(root, "B"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	base, err := query.FromSnapshot("B", s)
	if err != nil {
		t.Fatal(err)
	}
	fields, _ := s.Index().Attributes()
	sc, err := livedelta.NewSchema(s.Schema(), fields)
	if err != nil {
		t.Fatal(err)
	}
	ids := testlake.UniformIDs(n)
	var some []string
	for i := 0; i < n; i += 7 {
		some = append(some, ids[i])
	}
	mem := memory.NewGoAllocator()
	rec := testlake.UniformBatch(some, 0, len(some), false)
	norm, err := livedelta.Normalize(context.Background(), mem, sc, rec, 0, base)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer norm.Release()
	st, err := livedelta.Empty(sc).Append(context.Background(), mem, norm, 1, 1, base)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]query.Reader{"snapshot": base, "delta": query.NewComposite(base, st)} {
		t.Run(name, func(t *testing.T) {
			plan := func(sel query.Selector) *query.Plan {
				p, err := query.NewPlan(r, &query.Request{Select: sel, Range: query.AllPeriods, Latest: true, Columns: []string{"value"}}, query.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			walked := render(t, plan(query.Selector{Kind: query.ByPrefix}), 1<<20)
			var kept []string
			sorted := slices.Sorted(slices.Values(ids)) // an answer lists its series in id order
			for lo := 0; lo < n; lo += 1000 {
				kept = append(kept, render(t, plan(query.Selector{Kind: query.ByIDs, IDs: sorted[lo:min(lo+1000, n)]}), 1<<20)...)
			}
			if len(walked) != n || strings.Join(walked, "\n") != strings.Join(kept, "\n") {
				t.Fatalf("%d rows walked, %d kept; first walked %q, first kept %q", len(walked), len(kept), walked[:1], kept[:1])
			}
		})
	}
}
