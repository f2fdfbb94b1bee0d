package testsnap

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TieredLakeSeries is how many series TieredLake writes.
const TieredLakeSeries = 80

// TieredLake writes a lake meant for the tier tests: monthly series from
// 2019-01 to 2024-12 whose shapes put rows on every side of a hot window
// (series starting late, so wholly hot under a hot-since; series ending
// early, so cold but for their last row; gaps of missing months; value
// nulls here and there; null tails of 3 and of 30 months, so the latest
// non-null value lies in the cold rows; one series all null), a varying
// string column (flag) that stays in the data file, and two attributes
// (units, category). Ids are T000, T001, …
func TieredLake(t testing.TB, dir string) {
	t.Helper()
	var ids, periods, flags, units, cats []any
	var values []any
	for i := 0; i < TieredLakeSeries; i++ {
		start, end := (i%5)*6, 72 // months after 2019-01
		if i%7 == 3 {
			end = 30 // ends 2021-06
		}
		var ms []int
		for m := start; m < end; m++ {
			if i%8 == 7 && m%3 == 1 && m != end-1 {
				continue // gaps
			}
			ms = append(ms, m)
		}
		for k, m := range ms {
			ids = append(ids, fmt.Sprintf("T%03d", i))
			periods = append(periods, fmt.Sprintf("%04d-%02d", 2019+m/12, m%12+1))
			var v any = float64(i*1000 + m)
			switch {
			case i == 13:
				v = nil // all null
			case i%4 == 1 && k >= len(ms)-30:
				v = nil // a long null tail: the latest value is old
			case i%4 == 2 && k >= len(ms)-3:
				v = nil
			case i%6 == 5 && k%5 == 0:
				v = nil
			}
			values = append(values, v)
			flags = append(flags, map[bool]string{true: "a", false: "b"}[m%2 == 0])
			units = append(units, fmt.Sprintf("u%d", i%3))
			cats = append(cats, fmt.Sprintf("Cat/%d", i%2))
		}
	}
	testlake.WriteParquet(t, dir, "part-0.parquet", 1000,
		testlake.Col{Name: "series_id", Vals: ids},
		testlake.Col{Name: "period", Vals: periods},
		testlake.Col{Name: "value", Vals: values, Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "flag", Vals: flags},
		testlake.Col{Name: "units", Vals: units},
		testlake.Col{Name: "category", Vals: cats},
	)
}

// TierCase is one way to build the tiered lake: a name and a policy (the
// zero policy is the all-hot build every tiered one must read like).
type TierCase struct {
	Name   string
	Policy coldfile.Policy
}

// TierCases are the builds the tier tests compare with the all-hot one:
// a hot-since window, a hot-rows window, both, and every row cold
// (--format vortex).
func TierCases(t testing.TB) []TierCase {
	t.Helper()
	pol := func(since string, rows int64, format string) coldfile.Policy {
		p, err := coldfile.PolicyOf(since, rows, format)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return []TierCase{
		{"SINCE", pol("2023-01-01", 0, "")},
		{"ROWS", pol("", 5, "")},
		{"BOTH", pol("2024-01-01", 12, "")},
		{"VORTEX", pol("", 0, coldfile.FormatVortex)},
	}
}

// BuildTiers builds the lake at lake into ROOT/HOT (all hot) and one
// dataset per TierCases entry, ROOT/<name>, with batches of batchRows
// (0: the default), and returns the cases.
func BuildTiers(t testing.TB, lake, root string, batchRows int) []TierCase {
	t.Helper()
	cases := TierCases(t)
	Build(t, lake, filepath.Join(root, "HOT"), func(o *sortwrite.Options) { o.BatchRows = batchRows })
	for _, c := range cases {
		Build(t, lake, filepath.Join(root, c.Name), func(o *sortwrite.Options) { o.BatchRows, o.Tiers = batchRows, c.Policy })
	}
	return cases
}
