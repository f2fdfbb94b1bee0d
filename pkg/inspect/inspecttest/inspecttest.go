// Package inspecttest builds the small, deterministic dataset that the
// tests of pkg/inspect and cmd/snapinspect inspect: two vintages with
// known differences, built from inline Parquet inputs with a fixed clock,
// so every byte of every file (and so every checksum and size in golden
// output) is the same on every run.
package inspecttest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// Name is the dataset name of Build's dataset.
const Name = "PRICES"

// Created1 and Created2 are the manifests' creation times.
var (
	Created1 = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	Created2 = time.Date(2024, 7, 1, 12, 30, 0, 0, time.UTC)
)

// Known differences between vintage 1 and 2 (what Diff must find).
const (
	SeriesA, SeriesB                                 = 6, 6
	RowsA, RowsB                                     = 20, 22
	SeriesAdded, SeriesRemoved, SeriesChanged        = 1, 1, 2
	SeriesUnchanged                                  = 3
	RowsAdded, RowsRemoved, RowsChanged              = 5, 3, 2
	AddedSeries, RemovedSeries                       = "PET.WTI.D", "ZZ.OLD.Q"
	ChangedNG, ChangedBrent                          = "NG.HH.D", "PET.BRENT.D"
	NGAdded, NGRemoved, NGChanged                    = 2, 0, 1
	BrentAdded, BrentRemoved, BrentChanged           = 0, 1, 1
	CorruptID                                 uint64 = 3
)

type row struct {
	id, period string
	value      any // float64 or nil
	units      string
	category   any // string or nil
	status     string
}

// Vintage 1. status varies within NG.HH.D, so it stays a data column;
// units and category are constant per series, so they become attributes.
var v1 = []row{
	{"NG.HH.D", "2024-01-01", 2.5, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-02", 2.6, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-03", 2.55, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-04", 2.7, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-05", 2.8, "$/MMBtu", "Natural Gas/Prices/Spot", "prelim"},
	{"PET.BRENT.D", "2024-01-02", 77.0, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.D", "2024-01-03", nil, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.D", "2024-01-04", 78.25, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.D", "2024-01-05", nil, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2023-11", 83.1, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2023-12", 77.6, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2024-01", 80.1, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2024-02", 81.7, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.COKE.A", "2021", 1200.0, "$/t", "PetroleumCoke/Prices", "final"},
	{"PET.COKE.A", "2022", 1350.5, "$/t", "PetroleumCoke/Prices", "final"},
	{"PET.COKE.A", "2023", 1100.0, "$/t", "PetroleumCoke/Prices", "final"},
	{"PET.EMPTY.W", "2024-W01", nil, "$/bbl", "Petroleum", "final"},
	{"PET.EMPTY.W", "2024-W02", nil, "$/bbl", "Petroleum", "final"},
	{"ZZ.OLD.Q", "2023-Q3", 100.0, "index", nil, "final"},
	{"ZZ.OLD.Q", "2023-Q4", 101.0, "index", nil, "final"},
}

// Vintage 2: NG.HH.D gains two days and revises one; PET.BRENT.D loses its
// last row and fills a null; ZZ.OLD.Q is gone; PET.WTI.D is new.
var v2 = []row{
	{"NG.HH.D", "2024-01-01", 2.5, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-02", 2.6, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-03", 2.55, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-04", 2.7, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-05", 2.85, "$/MMBtu", "Natural Gas/Prices/Spot", "final"},
	{"NG.HH.D", "2024-01-06", 2.9, "$/MMBtu", "Natural Gas/Prices/Spot", "prelim"},
	{"NG.HH.D", "2024-01-07", 3.05, "$/MMBtu", "Natural Gas/Prices/Spot", "prelim"},
	{"PET.BRENT.D", "2024-01-02", 77.0, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.D", "2024-01-03", 77.5, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.D", "2024-01-04", 78.25, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2023-11", 83.1, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2023-12", 77.6, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2024-01", 80.1, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.BRENT.M", "2024-02", 81.7, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.COKE.A", "2021", 1200.0, "$/t", "PetroleumCoke/Prices", "final"},
	{"PET.COKE.A", "2022", 1350.5, "$/t", "PetroleumCoke/Prices", "final"},
	{"PET.COKE.A", "2023", 1100.0, "$/t", "PetroleumCoke/Prices", "final"},
	{"PET.EMPTY.W", "2024-W01", nil, "$/bbl", "Petroleum", "final"},
	{"PET.EMPTY.W", "2024-W02", nil, "$/bbl", "Petroleum", "final"},
	{"PET.WTI.D", "2024-01-02", 72.7, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.WTI.D", "2024-01-03", 72.95, "$/bbl", "Petroleum/Prices/Spot", "final"},
	{"PET.WTI.D", "2024-01-04", 73.81, "$/bbl", "Petroleum/Prices/Spot", "final"},
}

// writeLake writes rows as Parquet files under dir: the rows are split in
// two files (part-0, part-1) at split so that lineage lists several inputs.
func writeLake(t testing.TB, dir string, rows []row, split int) {
	t.Helper()
	for k, part := range [][]row{rows[:split], rows[split:]} {
		var ids, periods, units, status []any
		var values, cats []any
		for _, r := range part {
			ids = append(ids, r.id)
			periods = append(periods, r.period)
			values = append(values, r.value)
			units = append(units, r.units)
			cats = append(cats, r.category)
			status = append(status, r.status)
		}
		testlake.WriteParquet(t, dir, "part-"+string(rune('0'+k))+".parquet", 0,
			testlake.Col{Name: "series_id", Vals: ids},
			testlake.Col{Name: "period", Vals: periods},
			testlake.Col{Name: "value", Vals: values},
			testlake.Col{Name: "units", Vals: units},
			testlake.Col{Name: "category", Vals: cats},
			testlake.Col{Name: "status", Vals: status},
		)
	}
}

// Build writes the inputs under root and builds dataset root/PRICES with
// snapshot 1 (from lake1) and 2 (from lake2, CURRENT), then, when
// withCorrupt, a manifest 3 that does not parse. It returns the dataset
// directory.
func Build(t testing.TB, root string, withCorrupt bool) string {
	t.Helper()
	return build(t, root, withCorrupt, coldfile.Policy{})
}

// BuildTiered builds the same two vintages as Build (no corrupt
// manifest) with tier policy p, so that every report can be compared
// with the all-hot dataset's.
func BuildTiered(t testing.TB, root string, p coldfile.Policy) string {
	t.Helper()
	return build(t, root, false, p)
}

func build(t testing.TB, root string, withCorrupt bool, tiers coldfile.Policy) string {
	t.Helper()
	ds := filepath.Join(root, Name)
	for i, v := range []struct {
		rows  []row
		split int
		now   time.Time
	}{{v1, 9, Created1}, {v2, 10, Created2}} {
		lake := filepath.Join(root, "lake"+string(rune('1'+i)))
		writeLake(t, lake, v.rows, v.split)
		now := v.now
		_, err := sortwrite.Build(context.Background(), sortwrite.Options{
			Input: lake, Out: ds, Parallel: 2, Tool: "servingsnap test",
			Now: func() time.Time { return now }, Tiers: tiers,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if withCorrupt {
		p := filepath.Join(ds, filepath.FromSlash(dataset.ManifestPath(CorruptID)))
		if err := os.WriteFile(p, []byte("{\"format\": \"servingsnap.manifest\", \"format_version\": 1, \"snapshot_id\": \"three\"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ds
}

// BuildNoCategory builds dataset root/NOCAT, one snapshot whose inputs
// have no category column.
func BuildNoCategory(t testing.TB, root string) string {
	t.Helper()
	lake := filepath.Join(root, "lake-nocat")
	testlake.WriteParquet(t, lake, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "A", "B")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2020", "2021", "2020")},
		testlake.Col{Name: "value", Vals: testlake.Floats(1, 2, 3)},
		testlake.Col{Name: "units", Vals: testlake.Strs("u", "u", "v")},
	)
	ds := filepath.Join(root, "NOCAT")
	if _, err := sortwrite.Build(context.Background(), sortwrite.Options{
		Input: lake, Out: ds, Parallel: 1, Tool: "servingsnap test",
		Now: func() time.Time { return Created1 },
	}); err != nil {
		t.Fatal(err)
	}
	return ds
}
