package lakegen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
)

const eiaDir = "../../data/eia-prices"

// The README table of data/eia-prices.
var eiaReadme = map[string]int{
	"PET.RBRTE.D": 9958, "PET.RBRTE.W": 2049, "PET.RBRTE.M": 471, "PET.RBRTE.A": 39,
	"PET.RWTC.D": 10226, "PET.RWTC.W": 2120, "PET.RWTC.M": 487, "PET.RWTC.A": 40,
	"NG.RNGWHHD.D": 7437, "NG.RNGWHHD.M": 355,
}

func readLake(t *testing.T, root string) map[string][]rowText {
	t.Helper()
	bySeries := map[string][]rowText{}
	for _, name := range lakeFiles(t, root) {
		m := partFileRE.FindStringSubmatch(name)
		if m == nil {
			t.Fatalf("unexpected file %s", name)
		}
		rows, err := parquet.ReadFile[rowText](filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if !strings.HasPrefix(r.Period, m[1]) {
				t.Fatalf("%s: period %s outside its partition", name, r.Period)
			}
			bySeries[r.SeriesID] = append(bySeries[r.SeriesID], r)
		}
	}
	return bySeries
}

func TestGenerateEIA(t *testing.T) {
	out := t.TempDir()
	sum, err := GenerateEIA(context.Background(), eiaDir, out)
	if err != nil {
		t.Fatal(err)
	}
	bySeries := readLake(t, out)
	total := 0
	for id, want := range eiaReadme {
		if got := len(bySeries[id]); got != want {
			t.Errorf("%s: %d rows, README says %d", id, got, want)
		}
		total += want
	}
	if len(bySeries) != len(eiaReadme) || sum.Series != 10 || sum.Rows != int64(total) {
		t.Errorf("series %d, summary %+v, want 10 series and %d rows", len(bySeries), sum, total)
	}
	if files := lakeFiles(t, out); sum.Files != len(files) || files[0] != "year=1986/part-0.parquet" || files[len(files)-1] != "year=2026/part-0.parquet" {
		t.Errorf("files %v, summary %+v", files, sum)
	}

	for id, rows := range bySeries {
		first := rows[0]
		for _, r := range rows {
			if !periodREs[r.Frequency].MatchString(r.Period) {
				t.Fatalf("%s: %s period %q", id, r.Frequency, r.Period)
			}
			if r.Units != first.Units || r.Name != first.Name || r.Category != first.Category || r.Frequency != first.Frequency {
				t.Fatalf("%s: attributes change: %+v vs %+v", id, first, r)
			}
		}
		m := idRE.FindStringSubmatch(id)
		if f, _ := ParseFrequency(first.Frequency); m == nil || m[2] != f.Letter() {
			t.Errorf("%s: frequency %s", id, first.Frequency)
		}
		if !slices.IsSortedFunc(rows, func(a, b rowText) int { return strings.Compare(a.Period, b.Period) }) {
			t.Errorf("%s: periods out of order", id)
		}
		wantUnits, wantCat := "$/bbl", "Petroleum/Prices/Spot"
		if strings.HasPrefix(id, "NG.") {
			wantUnits, wantCat = "$/MMBtu", "Natural Gas/Prices/Spot"
		}
		if first.Units != wantUnits || first.Category != wantCat {
			t.Errorf("%s: units %q category %q", id, first.Units, first.Category)
		}
	}
	check := func(id, period string, want *float64) {
		t.Helper()
		for _, r := range bySeries[id] {
			if r.Period == period {
				if (r.Value == nil) != (want == nil) || (want != nil && *r.Value != *want) {
					t.Errorf("%s %s: value %v, want %v", id, period, deref(r.Value), deref(want))
				}
				return
			}
		}
		t.Errorf("%s: no period %s", id, period)
	}
	v := func(x float64) *float64 { return &x }
	check("PET.RBRTE.M", "1987-05", v(18.58)) // 1987-05-15 in the CSV
	check("PET.RBRTE.A", "1987", v(18.53))    // 1987-06-30 in the CSV
	check("NG.RNGWHHD.M", "1997-01", v(3.45)) // already YYYY-MM
	check("PET.RBRTE.W", "1987-05-15", v(18.58))
	check("PET.RWTC.D", "2020-04-20", v(-36.98))
	check("NG.RNGWHHD.D", "2018-01-05", nil) // empty Price cell
	if got := bySeries["PET.RBRTE.D"][0].Name; got != "Europe Brent Spot Price FOB" {
		t.Errorf("Brent name %q", got)
	}
	if got := bySeries["PET.RWTC.M"][0].Name; got != "Cushing, OK WTI Spot Price FOB" {
		t.Errorf("WTI name %q", got)
	}
	if got := bySeries["NG.RNGWHHD.D"][0].Name; got != "Henry Hub Natural Gas Spot Price" {
		t.Errorf("Henry Hub name %q", got)
	}

	// Refuses a non-empty directory; the options form can overwrite.
	if _, err := GenerateEIA(context.Background(), eiaDir, out); err == nil {
		t.Error("GenerateEIA into a non-empty directory succeeded")
	}
	again, err := GenerateEIAWith(context.Background(), EIAOptions{CSVDir: eiaDir, Out: out, Overwrite: true, PeriodAsDate: true})
	if err != nil || again.Rows != sum.Rows || again.Files != sum.Files {
		t.Errorf("overwrite: %+v, %v", again, err)
	}
}

func TestGenerateEIAMalformed(t *testing.T) {
	for _, tc := range []struct {
		file, old, new, want string
	}{
		{"wti-monthly.csv", "1986-09-15,14.87", "1986-09-15,14.87,3", "wti-monthly.csv:10: want 2 fields"},
		{"brent-daily.csv", "1987-05-22,18.55", "1987-05-22,abc", "brent-daily.csv:4: bad price"},
		{"henryhub-monthly.csv", "1997-03,1.89", "1997-13,1.89", "henryhub-monthly.csv:4: bad monthly period"},
		{"brent-year.csv", "Date,Price", "When,Price", "brent-year.csv:1: header"},
		{"wti-weekly.csv", "1986-01-10,25.99", "1986-01-03,25.99", "wti-weekly.csv:3: period 1986-01-03 repeats line 2"},
	} {
		dir := t.TempDir()
		for _, s := range EIASeriesTable() {
			b, err := os.ReadFile(filepath.Join(eiaDir, s.File))
			if err != nil {
				t.Fatal(err)
			}
			if s.File == tc.file {
				if !strings.Contains(string(b), tc.old) {
					t.Fatalf("%s does not contain %q", s.File, tc.old)
				}
				b = []byte(strings.Replace(string(b), tc.old, tc.new, 1))
			}
			if err := os.WriteFile(filepath.Join(dir, s.File), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(t.TempDir(), "lake")
		_, err := GenerateEIA(context.Background(), dir, out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.file, err, tc.want)
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("%s: failed run left %d entries in out", tc.file, len(ents))
		}
	}
}

// TestArrowReads reads generated files with arrow-go (pqarrow), the other
// Parquet implementation: the builder's reader.
func TestArrowReads(t *testing.T) {
	for _, asDate := range []bool{false, true} {
		t.Run(fmt.Sprintf("PeriodAsDate=%v", asDate), func(t *testing.T) {
			opt := Options{Out: t.TempDir(), Series: 200, FromYear: 2023, ToYear: 2024, RowGroupRows: 1000, PeriodAsDate: asDate}
			generate(t, opt)
			path := filepath.Join(opt.Out, "year=2024", "part-0.parquet")

			rdr, err := file.OpenParquetFile(path, false)
			if err != nil {
				t.Fatal(err)
			}
			defer rdr.Close()
			if rdr.NumRowGroups() < 2 {
				t.Errorf("arrow sees %d row groups", rdr.NumRowGroups())
			}
			fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			tbl, err := fr.ReadTable(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer tbl.Release()

			periodType := arrow.DataType(arrow.BinaryTypes.String)
			if asDate {
				periodType = arrow.FixedWidthTypes.Date32
			}
			want := []struct {
				name     string
				typ      arrow.DataType
				nullable bool
			}{
				{"series_id", arrow.BinaryTypes.String, false},
				{"period", periodType, false},
				{"value", arrow.PrimitiveTypes.Float64, true},
				{"units", arrow.BinaryTypes.String, false},
				{"frequency", arrow.BinaryTypes.String, false},
				{"name", arrow.BinaryTypes.String, false},
				{"category", arrow.BinaryTypes.String, false},
			}
			sc := tbl.Schema()
			if sc.NumFields() != len(want) {
				t.Fatalf("arrow schema %v", sc)
			}
			for k, w := range want {
				f := sc.Field(k)
				if f.Name != w.name || !arrow.TypeEqual(f.Type, w.typ) || f.Nullable != w.nullable {
					t.Errorf("field %d: %s %s nullable=%v, want %s %s nullable=%v", k, f.Name, f.Type, f.Nullable, w.name, w.typ, w.nullable)
				}
			}

			// Same rows, in the same order, as parquet-go reads.
			var pgIDs []string
			var pgVals []*float64
			if asDate {
				rows, err := parquet.ReadFile[rowDate](path)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					pgIDs, pgVals = append(pgIDs, r.SeriesID), append(pgVals, r.Value)
				}
			} else {
				rows, err := parquet.ReadFile[rowText](path)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					pgIDs, pgVals = append(pgIDs, r.SeriesID), append(pgVals, r.Value)
				}
			}
			if tbl.NumRows() != int64(len(pgIDs)) {
				t.Fatalf("arrow reads %d rows, parquet-go %d", tbl.NumRows(), len(pgIDs))
			}
			k := 0
			for _, chunk := range tbl.Column(0).Data().Chunks() {
				ids := chunk.(*array.String)
				for i := range ids.Len() {
					if ids.Value(i) != pgIDs[k+i] {
						t.Fatalf("row %d: arrow id %s, parquet-go %s", k+i, ids.Value(i), pgIDs[k+i])
					}
				}
				k += ids.Len()
			}
			k = 0
			nulls := 0
			for _, chunk := range tbl.Column(2).Data().Chunks() {
				vals := chunk.(*array.Float64)
				for i := range vals.Len() {
					pv := pgVals[k+i]
					if vals.IsNull(i) != (pv == nil) || (pv != nil && vals.Value(i) != *pv) {
						t.Fatalf("row %d: arrow value %v (null %v), parquet-go %v", k+i, vals.Value(i), vals.IsNull(i), deref(pv))
					}
					if pv == nil {
						nulls++
					}
				}
				k += vals.Len()
			}
			t.Logf("%d rows, %d nulls agree between arrow-go and parquet-go", k, nulls)
		})
	}
}
