package query_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/query"
)

// streamTotals is Aggregate's definition: stream the plan and count.
func streamTotals(t *testing.T, r query.Reader, req query.Request) query.Totals {
	t.Helper()
	req.Columns, req.Attributes = []string{}, false
	p, err := query.NewPlan(r, &req, query.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tot := query.Totals{First: math.MaxInt32, Last: math.MinInt32}
	seen := map[string]bool{}
	_, err = p.Stream(context.Background(), memory.NewGoAllocator(), 1<<20, func(rec arrow.RecordBatch) error {
		ids := rec.Column(0).(*array.Dictionary)
		dict := ids.Dictionary().(*array.String)
		ps := rec.Column(1).(*array.Date32)
		for i := 0; i < int(rec.NumRows()); i++ {
			tot.Rows++
			seen[dict.Value(ids.GetValueIndex(i))] = true
			tot.First, tot.Last = min(tot.First, int32(ps.Value(i))), max(tot.Last, int32(ps.Value(i)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tot.Series = int64(len(seen))
	if tot.Rows == 0 {
		tot.First, tot.Last = 0, 0
	}
	return tot
}

func checkTotals(t *testing.T, name string, r query.Reader, req query.Request) {
	t.Helper()
	got, err := query.Aggregate(r, &req, query.Limits{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if want := streamTotals(t, r, req); got != want {
		t.Errorf("%s: totals %+v, streaming the rows gives %+v", name, got, want)
	}
}

// TestAggregate: the totals (from the index where a series lies whole in
// the range, from its rows otherwise) are what streaming the rows counts,
// on a snapshot, on every tiered layout and with a delta merged over them.
func TestAggregate(t *testing.T) {
	prices, _ := open(t)
	all := query.Selector{Kind: query.ByPrefix}
	for name, req := range map[string]query.Request{
		"everything":          {Select: all, Range: query.AllPeriods},
		"one series":          {Select: ids("PET.WTI.D"), Range: query.AllPeriods},
		"a range cuts":        {Select: ids("PET.WTI.D", "NG.HH.D"), Range: days(t, "2024-01-03", "2024-01-04")},
		"prefix":              {Select: query.Selector{Kind: query.ByPrefix, Prefix: "PET.BRENT."}, Range: days(t, "2024-01-04", "2024-02-15")},
		"category latest":     {Select: query.Selector{Kind: query.ByCategory, Category: "Petroleum"}, Range: query.AllPeriods, Latest: true},
		"latest in a range":   {Select: ids("NG.HH.D", "PET.BRENT.D", "PET.EMPTY.W"), Range: days(t, "", "2024-01-03"), Latest: true},
		"a range with no row": {Select: ids("PET.COKE.A"), Range: days(t, "2030", "")},
		"a prefix of nothing": {Select: query.Selector{Kind: query.ByPrefix, Prefix: "ZZZ"}, Range: query.AllPeriods},
	} {
		checkTotals(t, name, prices, req)
	}
	got, err := query.Aggregate(prices, &query.Request{Select: all, Range: query.AllPeriods}, query.Limits{})
	if err != nil || got.Rows != prices.Info().Rows || got.Series != prices.Info().Series {
		t.Errorf("whole dataset: %+v, %v; the index says %d rows in %d series", got, err, prices.Info().Rows, prices.Info().Series)
	}

	root, cases := tierFixture(t)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			base := openTier(t, filepath.Join(root, tc.Name), coldfile.NewCache(1<<20))
			c := query.NewComposite(base, applyWrites(t, base))
			for rname, rg := range tierRanges(t) {
				for _, latest := range []bool{false, true} {
					req := query.Request{Select: all, Range: rg, Latest: latest}
					checkTotals(t, rname, base, req)
					checkTotals(t, rname+" with the delta", c, req)
				}
			}
		})
	}
}

func TestAggregateErrors(t *testing.T) {
	prices, _ := open(t)
	for _, tc := range []struct {
		req  query.Request
		lim  query.Limits
		kind error
	}{
		{query.Request{Select: ids("NOPE"), Range: query.AllPeriods}, query.Limits{}, query.ErrNotFound},
		{query.Request{Select: ids("A", "B"), Range: query.AllPeriods}, query.Limits{MaxSeries: 1}, query.ErrLimit},
		{query.Request{Select: ids("PET.WTI.D"), Range: query.Range{From: 2, To: 1}}, query.Limits{}, query.ErrInvalid},
		{query.Request{Select: ids("PET.WTI.D"), Range: query.AllPeriods, Snapshot: 1}, query.Limits{}, query.ErrStale},
	} {
		if _, err := query.Aggregate(prices, &tc.req, tc.lim); !errors.Is(err, tc.kind) {
			t.Errorf("%+v: %v, want %v", tc.req, err, tc.kind)
		}
	}
}
