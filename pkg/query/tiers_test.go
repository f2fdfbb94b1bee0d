package query_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// The tier tests' oracle is the same lake built all hot (testsnap.TieredLake
// into HOT): whatever the tier policy, a tiered snapshot must read exactly
// like it, range by range and series by series. No helper of the read path
// computes the expected rows.

var (
	tierOnce  sync.Once
	tierRoot  string
	tierDir   string // removed by TestMain
	tierCases []testsnap.TierCase
)

// tierFixture builds HOT and the tiered datasets once (small batches, so
// the hot rows of a series sit in several batches of the file); TestMain
// removes them.
func tierFixture(t *testing.T) (string, []testsnap.TierCase) {
	t.Helper()
	tierOnce.Do(func() {
		root, err := os.MkdirTemp("", "query-tiers-")
		if err != nil {
			t.Fatal(err)
		}
		tierDir = root
		lake := filepath.Join(root, "lake")
		testsnap.TieredLake(t, lake)
		tierCases = testsnap.BuildTiers(t, lake, root, 700)
		tierRoot = root
	})
	if tierRoot == "" {
		t.Fatal("tier fixture failed earlier")
	}
	return tierRoot, tierCases
}

func openTier(t *testing.T, dir string, cache *coldfile.Cache) *query.SnapshotReader {
	t.Helper()
	s, err := snapshot.Open(dir, snapshot.Options{VerifyData: true, ColdCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	r, err := query.FromSnapshot("T", s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tierRanges are period ranges on every side of the hot windows of
// TierCases (hot since 2023-01-01; the last 5 rows; since 2024-01-01 or
// the last 12 rows) over months 2019-01..2024-12.
func tierRanges(t *testing.T) map[string]query.Range {
	return map[string]query.Range{
		"all":               query.AllPeriods,
		"before the window": days(t, "", "2020-12-31"),
		"old, bounded":      days(t, "2020-03-01", "2020-05-31"),
		"inside the window": days(t, "2024-09-01", "2024-11-30"),
		"after the data":    days(t, "2025-01-01", ""),
		"before the data":   days(t, "", "2018-12-31"),
		"straddling 2023":   days(t, "2022-06-01", "2023-06-30"),
		"straddling 2024":   days(t, "2024-01-01", "2024-09-30"),
		"one month":         days(t, "2023-01-01", "2023-01-31"),
		"a gap's month":     days(t, "2019-02-01", "2019-02-28"),
		"mid to end":        days(t, "2021-03-01", ""),
	}
}

func pick(m map[string]query.Range, names ...string) map[string]query.Range {
	out := map[string]query.Range{}
	for _, n := range names {
		out[n] = m[n]
	}
	return out
}

// pieceRows renders pieces as "period value flag" lines (the series code
// column is left out: it is the code, equal in both builds by construction
// of the index, and checked by the stream tests through series ids).
func pieceRows(ps []query.Piece) []string {
	var out []string
	for _, p := range ps {
		per := p.Rec.Column(datafile.ColumnPeriod).(*array.Date32)
		val := p.Rec.Column(datafile.ColumnValue)
		flag := p.Rec.Column(p.Rec.Schema().FieldIndices("flag")[0])
		for i := p.Lo; i < p.Hi; i++ {
			out = append(out, fmt.Sprintf("%s %s %s", period.Format(int32(per.Value(int(i)))), cellText(val, int(i)), cellText(flag, int(i))))
		}
	}
	return out
}

func latestText(p query.Piece, ok bool, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if !ok {
		return "none"
	}
	if p.Len() != 1 {
		return fmt.Sprintf("a piece of %d rows", p.Len())
	}
	return strings.Join(pieceRows([]query.Piece{p}), "")
}

// compareReaders checks every series and range of want (the all-hot
// reader) against got: Rows, LatestRow, Latest and Periods.
func compareReaders(t *testing.T, want, got query.Reader, ranges map[string]query.Range) {
	t.Helper()
	if want.Info().Series != got.Info().Series || want.Info().Rows != got.Info().Rows {
		t.Fatalf("info %+v, all hot %+v", got.Info(), want.Info())
	}
	sel, err := want.Select(query.Selector{Kind: query.ByPrefix})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < sel.Len(); k++ {
		code := sel.Code(k)
		id := want.SeriesID(code)
		if g := got.SeriesID(code); g != id {
			t.Fatalf("code %d: series %q, all hot %q", code, g, id)
		}
		for name, rg := range ranges {
			wp, err := want.Rows(code, rg, nil)
			if err != nil {
				t.Fatal(err)
			}
			gp, err := got.Rows(code, rg, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", id, name, err)
			}
			if w, g := pieceRows(wp), pieceRows(gp); strings.Join(w, "\n") != strings.Join(g, "\n") {
				t.Errorf("%s %s: rows\n got %q\nwant %q", id, name, g, w)
			}
			wl, gl := latestText(want.LatestRow(code, rg)), latestText(got.LatestRow(code, rg))
			if wl != gl {
				t.Errorf("%s %s: latest row %q, all hot %q", id, name, gl, wl)
			}
		}
		wlp, wok := want.Latest(code)
		glp, gok := got.Latest(code)
		if wlp != glp || wok != gok {
			t.Errorf("%s: latest period %d %v, all hot %d %v", id, glp, gok, wlp, wok)
		}
		if wr, ok := want.(interface{ Periods(int) []arrow.Date32 }); ok {
			gr := got.(interface{ Periods(int) []arrow.Date32 })
			if w, g := fmt.Sprint(wr.Periods(code)), fmt.Sprint(gr.Periods(code)); w != g {
				t.Errorf("%s: periods\n got %s\nwant %s", id, g, w)
			}
		}
	}
}

// TestTieredSnapshotReader reads every tiered build like the all-hot one,
// with no cache, a cache that holds everything (read twice: the second
// pass is served from it) and one so small that every read evicts.
func TestTieredSnapshotReader(t *testing.T) {
	root, cases := tierFixture(t)
	hot := openTier(t, filepath.Join(root, "HOT"), nil)
	if hot.Snapshot().Tiered() {
		t.Fatal("the all-hot build is tiered")
	}
	ranges := tierRanges(t)
	caches := []struct {
		name  string
		cache func() *coldfile.Cache
	}{
		{"no cache", func() *coldfile.Cache { return nil }},
		{"large cache", func() *coldfile.Cache { return coldfile.NewCache(1 << 30) }},
		{"tiny cache", func() *coldfile.Cache { return coldfile.NewCache(2048) }},
	}
	for _, tc := range cases {
		for _, cc := range caches {
			t.Run(tc.Name+"/"+cc.name, func(t *testing.T) {
				cache := cc.cache()
				r := openTier(t, filepath.Join(root, tc.Name), cache)
				if !r.Snapshot().Tiered() {
					t.Fatal("not tiered")
				}
				if tc.Policy.AllCold && r.Snapshot().NumBatches() != 0 {
					t.Errorf("--format vortex: %d hot batches, want none", r.Snapshot().NumBatches())
				}
				if cache == nil {
					// every read decodes: a few ranges are enough
					compareReaders(t, hot, r, pick(ranges, "all", "straddling 2023", "straddling 2024", "before the window", "one month"))
					return
				}
				compareReaders(t, hot, r, ranges)
				st1 := cache.Stats()
				compareReaders(t, hot, r, ranges)
				st2 := cache.Stats()
				if st2.Misses == 0 {
					t.Errorf("cache stats %+v: nothing decoded", st2)
				}
				switch cc.name {
				case "large cache":
					if st2.Misses != st1.Misses || st2.Hits <= st1.Hits || st2.Evictions != 0 {
						t.Errorf("second pass: stats %+v after %+v: want hits only", st2, st1)
					}
				case "tiny cache":
					if st2.Evictions == 0 || st2.Used > st2.Budget {
						t.Errorf("stats %+v: want evictions under the budget", st2)
					}
				}
			})
		}
	}
}

// TestTieredConcurrentReads reads tiered series from several goroutines
// through one small shared cache (run with -race).
func TestTieredConcurrentReads(t *testing.T) {
	root, _ := tierFixture(t)
	hot := openTier(t, filepath.Join(root, "HOT"), nil)
	cache := coldfile.NewCache(64 << 10)
	r := openTier(t, filepath.Join(root, "SINCE"), cache)
	want := make([]string, hot.Info().Series)
	for c := range want {
		ps, err := hot.Rows(c, query.AllPeriods, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[c] = strings.Join(pieceRows(ps), "\n")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 3*len(want); k++ {
				c := (k*7 + g*13) % len(want)
				ps, err := r.Rows(c, query.AllPeriods, nil)
				if err == nil && strings.Join(pieceRows(ps), "\n") != want[c] {
					err = fmt.Errorf("series %s differs from the all-hot build", r.SeriesID(c))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := cache.Stats(); st.Hits == 0 || st.Used > st.Budget {
		t.Errorf("cache stats %+v", st)
	}
}

// tierRequests are whole requests streamed through Plan over both builds.
func tierRequests(t *testing.T) map[string]query.Request {
	all := query.Selector{Kind: query.ByPrefix}
	return map[string]query.Request{
		"full history":        {Select: all, Range: query.AllPeriods},
		"recent only":         {Select: all, Range: days(t, "2024-06-01", "")},
		"straddling":          {Select: all, Range: days(t, "2022-10-01", "2023-03-31"), Attributes: true},
		"old only, ids":       {Select: ids("T001", "T003", "T013", "T017", "T050"), Range: days(t, "", "2020-06-30")},
		"latest, whole range": {Select: all, Range: query.AllPeriods, Latest: true},
		"latest before 2023":  {Select: all, Range: days(t, "", "2022-12-31"), Latest: true},
		"latest in a window":  {Select: query.Selector{Kind: query.ByCategory, Category: "Cat/1"}, Range: days(t, "2021-01-01", "2024-03-31"), Latest: true, Attributes: true},
		"limit":               {Select: all, Range: days(t, "2022-01-01", ""), Limit: 200},
	}
}

// comparePlans streams each request over both readers (checked
// allocators, one row per batch and everything in one) and compares.
func comparePlans(t *testing.T, want, got query.Reader) {
	t.Helper()
	for name, req := range tierRequests(t) {
		wp, err := query.NewPlan(want, &req, query.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		gp, err := query.NewPlan(got, &req, query.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if wp.Rows() != gp.Rows() {
			t.Errorf("%s: plan counts %d rows, all hot %d", name, gp.Rows(), wp.Rows())
		}
		w := render(t, wp, 1<<20)
		if len(w) == 0 {
			t.Fatalf("%s: the all-hot answer is empty: a test that cannot fail", name)
		}
		for _, budget := range []int64{1, 1 << 20} {
			if g := render(t, gp, budget); strings.Join(g, "\n") != strings.Join(w, "\n") {
				t.Errorf("%s, budget %d: %d rows differ from the all-hot %d", name, budget, len(g), len(w))
			}
		}
	}
}

func TestTieredPlans(t *testing.T) {
	root, cases := tierFixture(t)
	hot := openTier(t, filepath.Join(root, "HOT"), nil)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			comparePlans(t, hot, openTier(t, filepath.Join(root, tc.Name), coldfile.NewCache(1<<20)))
		})
	}
}

// tierWrites are live writes over the tiered lake: revisions of cold rows
// (2019–2020), of hot rows (2024), a null over a value, rows after the
// last period, rows inside a gap, and a series only the delta has.
func tierWrites(t *testing.T, sc *livedelta.Schema, r *query.SnapshotReader, extra ...[]tierWrite) []arrow.RecordBatch {
	t.Helper()
	type w = tierWrite
	batches := [][]w{
		{{"T000", "2019-01", 1.5, "x"}, {"T000", "2024-12", 2.5, "x"}, {"T001", "2019-06", nil, "x"}, {"T013", "2020-01", 13.0, "x"}},
		{{"T003", "2021-06", 3.5, "y"}, {"T003", "2021-07", 3.75, "y"}, {"T007", "2019-02", 7.5, "y"}, {"T009", "2025-01", 9.5, "y"}},
		{{"T000", "2019-01", 1.75, "z"}, {"T005", "2023-01", nil, "z"}, {"T005", "2024-12", nil, "z"}, {"U000", "2020-01", 100.0, "z"}, {"U000", "2024-01", 101.0, "z"}},
	}
	batches = append(batches, extra...)
	mem := memory.NewGoAllocator()
	var out []arrow.RecordBatch
	for k, ws := range batches {
		fields := []arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}, {Name: "period", Type: arrow.BinaryTypes.String},
			{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true}, {Name: "flag", Type: arrow.BinaryTypes.String},
			{Name: "units", Type: arrow.BinaryTypes.String}, {Name: "category", Type: arrow.BinaryTypes.String}}
		b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
		for _, x := range ws {
			b.Field(0).(*array.StringBuilder).Append(x.id)
			b.Field(1).(*array.StringBuilder).Append(x.per)
			if x.v == nil {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.Float64Builder).Append(x.v.(float64))
			}
			b.Field(3).(*array.StringBuilder).Append(x.flag)
			var n int
			fmt.Sscanf(x.id[1:], "%d", &n)
			units, cat := fmt.Sprintf("u%d", n%3), fmt.Sprintf("Cat/%d", n%2)
			if x.id[0] == 'U' {
				units, cat = "new", "Cat/1"
			}
			b.Field(4).(*array.StringBuilder).Append(units)
			b.Field(5).(*array.StringBuilder).Append(cat)
		}
		rec := b.NewRecordBatch()
		b.Release()
		norm, err := livedelta.Normalize(context.Background(), mem, sc, rec, k, r)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, norm)
	}
	return out
}

// tierWrite is one row of a live write: series, period, value (nil for
// null) and flag.
type tierWrite struct {
	id, per string
	v       any
	flag    string
}

func applyWrites(t *testing.T, r *query.SnapshotReader) *livedelta.State {
	t.Helper()
	fields, _ := r.Snapshot().Index().Attributes()
	sc, err := livedelta.NewSchema(r.Snapshot().Schema(), fields)
	if err != nil {
		t.Fatal(err)
	}
	st := livedelta.Empty(sc)
	for k, w := range tierWrites(t, sc, r) {
		if st, err = st.Apply(context.Background(), memory.NewGoAllocator(), w, uint64(k+1), uint64(k+1), r); err != nil {
			t.Fatal(err)
		}
		w.Release()
	}
	return st
}

// TestTieredComposite merges the same delta over the all-hot and each
// tiered base: revisions of cold rows and of hot rows, and new series,
// read the same.
func TestTieredComposite(t *testing.T) {
	root, cases := tierFixture(t)
	hotBase := openTier(t, filepath.Join(root, "HOT"), nil)
	hot := query.NewComposite(hotBase, applyWrites(t, hotBase))
	if hot.Info().Series != hotBase.Info().Series+1 {
		t.Fatalf("composite series %d: the delta's new series is missing", hot.Info().Series)
	}
	ranges := tierRanges(t)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			base := openTier(t, filepath.Join(root, tc.Name), coldfile.NewCache(1<<20))
			c := query.NewComposite(base, applyWrites(t, base))
			compareReaders(t, hot, c, ranges)
			comparePlans(t, hot, c)
		})
	}
}
