package query_test

import (
	"context"
	"errors"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

var (
	fixOnce sync.Once
	fixRoot string
)

// open opens the inspecttest dataset (vintage 2, whose rows the cases
// below spell out by hand) and the one without a category attribute.
func open(t *testing.T) (prices, nocat *query.SnapshotReader) {
	t.Helper()
	fixOnce.Do(func() {
		var err error
		if fixRoot, err = os.MkdirTemp("", "query-test-"); err != nil {
			t.Fatal(err)
		}
		inspecttest.Build(t, fixRoot, false)
		inspecttest.BuildNoCategory(t, fixRoot)
	})
	rd := func(name string) *query.SnapshotReader {
		s, err := snapshot.Open(filepath.Join(fixRoot, name), snapshot.Options{VerifyData: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		r, err := query.FromSnapshot(name, s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	return rd(inspecttest.Name), rd("NOCAT")
}

func TestMain(m *testing.M) {
	code := m.Run()
	testsnap.RemoveUniform()
	for _, d := range []string{fixRoot, tierDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

func ids(s ...string) query.Selector { return query.Selector{Kind: query.ByIDs, IDs: s} }

func days(t *testing.T, from, to string) query.Range {
	t.Helper()
	r := query.AllPeriods
	var err error
	if from != "" {
		if r.From, err = period.Parse(from); err != nil {
			t.Fatal(err)
		}
	}
	if to != "" {
		if r.To, err = period.Parse(to); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// render streams a plan and writes one line per row: id, period, then
// every other column (nulls as "null"), with dictionaries decoded.
func render(t *testing.T, p *query.Plan, budget int64) []string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var out []string
	st, err := p.Stream(context.Background(), mem, budget, func(rec arrow.RecordBatch) error {
		for i := 0; i < int(rec.NumRows()); i++ {
			cells := make([]string, rec.NumCols())
			for c := range cells {
				cells[c] = cellText(rec.Column(c), i)
			}
			out = append(out, strings.Join(cells, " "))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != p.Rows() || int64(len(out)) != p.Rows() {
		t.Errorf("streamed %d rows (%d lines), plan said %d", st.Rows, len(out), p.Rows())
	}
	return out
}

func cellText(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch a := a.(type) {
	case *array.Dictionary:
		return cellText(a.Dictionary(), a.GetValueIndex(i))
	case *array.Date32:
		return period.Format(int32(a.Value(i)))
	}
	return a.ValueStr(i)
}

func TestPlan(t *testing.T) {
	prices, _ := open(t)
	cases := []struct {
		name string
		req  query.Request
		want []string
	}{
		{"one series", query.Request{Select: ids("PET.WTI.D"), Range: query.AllPeriods, Columns: []string{"value"}},
			[]string{"PET.WTI.D 2024-01-02 72.7", "PET.WTI.D 2024-01-03 72.95", "PET.WTI.D 2024-01-04 73.81"}},
		{"ids in any order, duplicates, a range", query.Request{Select: ids("PET.WTI.D", "NG.HH.D", "NG.HH.D"), Range: days(t, "2024-01-03", "2024-01-04"), Columns: []string{"value"}},
			[]string{"NG.HH.D 2024-01-03 2.55", "NG.HH.D 2024-01-04 2.7", "PET.WTI.D 2024-01-03 72.95", "PET.WTI.D 2024-01-04 73.81"}},
		{"default columns keep the varying one", query.Request{Select: ids("NG.HH.D"), Range: days(t, "2024-01-06", "")},
			[]string{"NG.HH.D 2024-01-06 2.9 prelim", "NG.HH.D 2024-01-07 3.05 prelim"}},
		{"prefix", query.Request{Select: query.Selector{Kind: query.ByPrefix, Prefix: "PET.BRENT."}, Range: days(t, "2024-01-04", "2024-02-15"), Columns: []string{"value"}},
			[]string{"PET.BRENT.D 2024-01-04 78.25", "PET.BRENT.M 2024-02-01 81.7"}},
		{"category below a slash, latest from the index", query.Request{Select: query.Selector{Kind: query.ByCategory, Category: "Petroleum"}, Range: query.AllPeriods, Latest: true, Columns: []string{"value"}},
			[]string{"PET.BRENT.D 2024-01-04 78.25", "PET.BRENT.M 2024-02-01 81.7", "PET.WTI.D 2024-01-04 73.81"}},
		{"latest in a range reads the rows", query.Request{Select: ids("NG.HH.D", "PET.BRENT.D", "PET.EMPTY.W"), Range: days(t, "", "2024-01-03"), Latest: true, Columns: []string{"value"}},
			[]string{"NG.HH.D 2024-01-03 2.55", "PET.BRENT.D 2024-01-03 77.5"}},
		{"attributes", query.Request{Select: ids("PET.COKE.A"), Range: days(t, "2023", ""), Columns: []string{"value"}, Attributes: true},
			[]string{"PET.COKE.A 2023-01-01 1100 $/t PetroleumCoke/Prices"}},
		{"no columns", query.Request{Select: ids("PET.EMPTY.W"), Range: query.AllPeriods, Columns: []string{}},
			[]string{"PET.EMPTY.W 2024-01-01", "PET.EMPTY.W 2024-01-08"}},
		{"limit", query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: query.AllPeriods, Columns: []string{"value"}, Limit: 3},
			[]string{"NG.HH.D 2024-01-01 2.5", "NG.HH.D 2024-01-02 2.6", "NG.HH.D 2024-01-03 2.55"}},
		{"a range with no rows", query.Request{Select: ids("PET.COKE.A"), Range: days(t, "2030", "")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := query.NewPlan(prices, &tc.req, query.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			// Batching must not change the answer: one row per batch, and
			// everything in one.
			for _, budget := range []int64{1, 1 << 20} {
				got := render(t, p, budget)
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("budget %d:\n got %q\nwant %q", budget, got, tc.want)
				}
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	prices, nocat := open(t)
	all := query.Selector{Kind: query.ByPrefix}
	cases := []struct {
		name string
		r    query.Reader
		req  query.Request
		lim  query.Limits
		kind error
		msg  string
	}{
		{"unknown id", prices, query.Request{Select: ids("PET.WTI.D", "NOPE")}, query.Limits{}, query.ErrNotFound, `series "NOPE" not found in dataset "PRICES" (snapshot 2)`},
		{"unknown ids", prices, query.Request{Select: ids("X", "Y")}, query.Limits{}, query.ErrNotFound, `2 of 2 series not found`},
		{"unknown column", prices, query.Request{Select: all, Columns: []string{"vaule"}}, query.Limits{}, query.ErrInvalid, `unknown column "vaule" in dataset "PRICES" (columns: series_id, period, value, status, units (attribute), category (attribute))`},
		{"unknown category", prices, query.Request{Select: query.Selector{Kind: query.ByCategory, Category: "Coal"}}, query.Limits{}, query.ErrNotFound, `category "Coal" not found`},
		{"category is a boundary", prices, query.Request{Select: query.Selector{Kind: query.ByCategory, Category: "Petroleum/Pri"}}, query.Limits{}, query.ErrNotFound, `category "Petroleum/Pri" not found`},
		{"no category attribute", nocat, query.Request{Select: query.Selector{Kind: query.ByCategory, Category: "x"}}, query.Limits{}, query.ErrInvalid, `has no "category" attribute`},
		{"stale snapshot", prices, query.Request{Select: all, Snapshot: 1}, query.Limits{}, query.ErrStale, `serving snapshot 2, the request asks for snapshot 1`},
		{"bounds reversed", prices, query.Request{Select: all, Range: query.Range{From: 10, To: 9}}, query.Limits{}, query.ErrInvalid, `starts after it ends`},
		{"too many listed", prices, query.Request{Select: ids("A", "B"), Range: query.AllPeriods}, query.Limits{MaxSeries: 1}, query.ErrLimit, `2 series requested`},
		{"too many rows for a list", prices, query.Request{Select: ids("NG.HH.D"), Range: query.AllPeriods}, query.Limits{MaxRows: 6}, query.ErrLimit, `matches 7 rows`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.Range == (query.Range{}) {
				tc.req.Range = query.AllPeriods
			}
			_, err := query.NewPlan(tc.r, &tc.req, tc.lim)
			var qe *query.Error
			if !errors.Is(err, tc.kind) || !errors.As(err, &qe) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want %v containing %q", err, tc.kind, tc.msg)
			}
		})
	}
	// The limits bound lists only: a prefix answer of more rows is fine.
	p, err := query.NewPlan(prices, &query.Request{Select: all, Range: query.AllPeriods}, query.Limits{MaxSeries: 1, MaxRows: 2})
	if err != nil || p.Rows() != inspecttest.RowsB {
		t.Fatalf("prefix past the list limits: %v, %v", p, err)
	}
}

// TestMatchCategory is the category rule both snapinspect and the server
// use.
func TestMatchCategory(t *testing.T) {
	for _, tc := range []struct {
		v, c string
		want bool
	}{
		{"Petroleum", "Petroleum", true},
		{"Petroleum/Prices/Spot", "Petroleum", true},
		{"Petroleum/Prices/Spot", "Petroleum/", true},
		{"Petroleum/Prices/Spot", "Petroleum/Prices", true},
		{"PetroleumCoke/Prices", "Petroleum", false},
		{"Petroleum", "Petroleum/Prices", false},
		{"Petroleum/Pri", "Petroleum/Prices", false},
		{"Petroleum/Prices/Spot", "Petroleum/Pri", false},
		{"Petroleum/Prices/Spot", "Petroleum/Prices/Spot", true},
		{"Natural Gas/Prices", "Prices", false},
		{"", "", true},
		{"x", "", false},
	} {
		if got := query.MatchCategory(tc.v, tc.c); got != tc.want {
			t.Errorf("MatchCategory(%q, %q) = %v", tc.v, tc.c, got)
		}
	}
}
