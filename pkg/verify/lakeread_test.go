package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// rowGroupLake writes files files of rows rows each, in row groups of
// rgRows, where series S00..S(series-1) each have rows spread over every
// file and row group (the lake is not sorted: ids cycle), an attribute
// constant per series and a null value in every seventh row. edit may
// change a file's columns before it is written.
func rowGroupLake(t *testing.T, dir string, files, rows, rgRows, series int, edit func(file int, ids, pers, vals, units []any) ([]any, []any, []any, []any)) {
	t.Helper()
	for f := range files {
		ids, pers, vals, units := make([]any, rows), make([]any, rows), make([]any, rows), make([]any, rows)
		for i := range rows {
			s := (i*7 + f) % series
			ids[i] = fmt.Sprintf("S%02d", s)
			// a distinct day per (file, row) within a series
			pers[i] = arrow.Date32(10000 + f*rows + i)
			vals[i] = float64(f*rows + i)
			if i%7 == 3 {
				vals[i] = nil
			}
			units[i] = fmt.Sprintf("u%d", s%3)
		}
		if edit != nil {
			ids, pers, vals, units = edit(f, ids, pers, vals, units)
		}
		testlake.WriteParquet(t, dir, fmt.Sprintf("part-%d.parquet", f), rgRows,
			testlake.Col{Name: "series_id", Vals: ids},
			testlake.Col{Name: "period", Vals: pers},
			testlake.Col{Name: "value", Vals: vals, Typ: arrow.PrimitiveTypes.Float64},
			testlake.Col{Name: "units", Vals: units})
	}
}

// TestAgainstRowGroups compares lakes of many row groups, read by one or
// several workers, with a snapshot: a pristine lake passes whatever the
// parallelism, and each kind of difference is found and named.
func TestAgainstRowGroups(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	const files, rows, rgRows, series = 3, 200, 32, 11
	rowGroupLake(t, lake, files, rows, rgRows, series, nil)
	ds := filepath.Join(root, "DS")
	testsnap.Build(t, lake, ds, nil)
	// Units of one row group each as well as whole files.
	defer func(n int64) { minUnitRows = n }(minUnitRows)
	for _, unit := range []int64{1 << 16, 1} {
		minUnitRows = unit
		for _, p := range []int{1, 2, 4} {
			rep, err := Verify(ds, Options{Deep: true, Against: lake, Parallel: p})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK || rep.InputRows != files*rows || rep.InputSeries != series || rep.InputFiles != files {
				t.Fatalf("unit %d parallel %d: ok=%v rows %d series %d files %d:%s", unit, p, rep.OK, rep.InputRows, rep.InputSeries, rep.InputFiles, findings(rep))
			}
		}
	}

	type edit = func(f int, ids, pers, vals, units []any) ([]any, []any, []any, []any)
	cases := []struct {
		name string
		edit edit
		want []string // substrings of the findings
	}{
		{"a duplicated row", func(f int, i, p, v, u []any) ([]any, []any, []any, []any) {
			if f == 1 {
				return append(i, i[40]), append(p, p[40]), append(v, v[40]), append(u, u[40])
			}
			return i, p, v, u
		}, []string{"holds 600 rows, the input 601", `"S06"`, "54 rows in the snapshot, 55 in the input"}},
		{"a value in a later row group", func(f int, i, p, v, u []any) ([]any, []any, []any, []any) {
			if f == 2 {
				v[150] = 0.5
			}
			return i, p, v, u
		}, []string{`"S07"`, "same 55 rows in number but different"}},
		{"a null became zero", func(f int, i, p, v, u []any) ([]any, []any, []any, []any) {
			if f == 0 {
				v[3] = 0.0
			}
			return i, p, v, u
		}, []string{`"S10"`, "different periods or values"}},
		{"a series missing", func(f int, i, p, v, u []any) ([]any, []any, []any, []any) {
			var ni, np, nv, nu []any
			for k := range i {
				if i[k] != "S05" {
					ni, np, nv, nu = append(ni, i[k]), append(np, p[k]), append(nv, v[k]), append(nu, u[k])
				}
			}
			return ni, np, nv, nu
		}, []string{`series 5 "S05"`, "not in the input"}},
		{"extra rows of a new series", func(f int, i, p, v, u []any) ([]any, []any, []any, []any) {
			return append(i, "S99", "S99"), append(p, arrow.Date32(1+f), arrow.Date32(5+f)), append(v, 1.0, nil), append(u, "u0", "u0")
		}, []string{`series "S99"`, "in the input (6 rows) but not in the snapshot"}},
		{"an attribute changed in the first row", func(f int, i, p, v, u []any) ([]any, []any, []any, []any) {
			if f == 0 {
				u[0] = "other"
			}
			return i, p, v, u
		}, []string{`series 0 "S00"`, "attributes differ", `units="u0"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other := filepath.Join(t.TempDir(), "lake")
			rowGroupLake(t, other, files, rows, rgRows, series, tc.edit)
			for _, unit := range []int64{1 << 16, 1} {
				minUnitRows = unit
				for _, p := range []int{1, 3} {
					rep, err := Verify(ds, Options{Against: other, Parallel: p})
					if err != nil {
						t.Fatal(err)
					}
					if rep.OK || rep.Status != StatusDiffers {
						t.Fatalf("unit %d parallel %d: status %q, want %q:%s", unit, p, rep.Status, StatusDiffers, findings(rep))
					}
					all := findings(rep)
					for _, w := range tc.want {
						if !strings.Contains(all, w) {
							t.Errorf("unit %d parallel %d: findings lack %q:%s", unit, p, w, all)
						}
					}
				}
			}
		})
	}

	t.Run("null series id", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "lake")
		rowGroupLake(t, other, files, rows, rgRows, series, func(f int, i, p, v, u []any) ([]any, []any, []any, []any) {
			if f == 1 {
				i[70] = nil
			}
			return i, p, v, u
		})
		minUnitRows = 1
		_, err := Verify(ds, Options{Against: other})
		if !errors.Is(err, ErrCannotVerify) || !strings.Contains(err.Error(), "part-1.parquet") || !strings.Contains(err.Error(), "row 70: series id is null") {
			t.Fatalf("err = %v, want ErrCannotVerify naming part-1.parquet row 70", err)
		}
	})
}

// TestIDTable finds every index series by id, and no other id.
func TestIDTable(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	rowGroupLake(t, lake, 1, 100, 0, 37, nil)
	ds := filepath.Join(root, "DS")
	testsnap.Build(t, lake, ds, nil)
	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := s.Index()
	tab := newIDTable(x)
	for c := 0; c < x.Len(); c++ {
		if got, ok := tab.lookup(x.SeriesID(c)); !ok || int(got) != c {
			t.Errorf("lookup(%q) = %d %v, want %d", x.SeriesID(c), got, ok, c)
		}
	}
	for _, id := range []string{"", "S", "S0", "S37", "S000", "s00", "S00 "} {
		if got, ok := tab.lookup(id); ok {
			t.Errorf("lookup(%q) = %d, want absent", id, got)
		}
	}
}

// TestRowHash: the row digest tells apart what a row holds.
func TestRowHash(t *testing.T) {
	var buf [64]byte
	f8 := func(b ...byte) []byte { return append(b, make([]byte, 8-len(b))...) }
	rows := []struct {
		name  string
		p     int32
		val   []byte
		valid bool
	}{
		{"null", 1, nil, false},
		{"zero", 1, f8(), true},
		{"zero, 4 bytes", 1, []byte{0, 0, 0, 0}, true},
		{"one", 1, f8(1), true},
		{"one, next period", 2, f8(1), true},
		{"null, next period", 2, nil, false},
		{"negative period", -1, f8(1), true},
		{"high byte", 1, f8(0, 0, 0, 0, 0, 0, 0, 1), true},
		{"16 bytes", 1, make([]byte, 16), true},
		{"16 bytes, one", 1, append([]byte{1}, make([]byte, 15)...), true},
	}
	seen := map[uint64]string{}
	for _, r := range rows {
		h := rowHash(&buf, r.p, r.val, r.valid)
		if other, ok := seen[h]; ok {
			t.Errorf("%s and %s hash alike", r.name, other)
		}
		seen[h] = r.name
		if again := rowHash(&buf, r.p, r.val, r.valid); again != h {
			t.Errorf("%s: not deterministic", r.name)
		}
	}
}

// TestAgainstPlainStrings: ids and periods written without a dictionary
// (read plain, not as dictionaries) compare alike, in a lake sorted by
// series and in one whose ids change every row.
func TestAgainstPlainStrings(t *testing.T) {
	for _, shuffled := range []bool{false, true} {
		t.Run(fmt.Sprint("shuffled=", shuffled), func(t *testing.T) {
			root := t.TempDir()
			lake := filepath.Join(root, "lake")
			const series, rows = 13, 40
			var ids, pers []string
			var fs []float64
			for i := range series * rows {
				s, r := i/rows, i%rows
				if shuffled {
					s, r = i%series, i/series
				}
				ids = append(ids, fmt.Sprintf("P%02d", s))
				pers = append(pers, fmt.Sprintf("%d-%02d", 2000+r/12, 1+r%12))
				fs = append(fs, float64(i))
			}
			writePlain(t, filepath.Join(lake, "part-0.parquet"), ids, pers, fs)
			ds := filepath.Join(root, "DS")
			testsnap.Build(t, lake, ds, nil)
			rep, err := Verify(ds, Options{Deep: true, Against: lake})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK || rep.InputSeries != series || rep.InputRows != series*rows {
				t.Fatalf("ok=%v series %d rows %d:%s", rep.OK, rep.InputSeries, rep.InputRows, findings(rep))
			}
			fs[7] = -1
			other := filepath.Join(root, "other")
			writePlain(t, filepath.Join(other, "part-0.parquet"), ids, pers, fs)
			rep, err = Verify(ds, Options{Against: other})
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%q", ids[7]); len(rep.Findings) != 1 || !strings.Contains(rep.Findings[0].Location, want) {
				t.Fatalf("want one finding on %s:%s", want, findings(rep))
			}
		})
	}
}

// writePlain writes a Parquet file of string ids and periods and float
// values, every column plain-encoded (no dictionary).
func writePlain(t *testing.T, path string, ids, pers []string, vals []float64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues(ids, nil)
	b.Field(1).(*array.StringBuilder).AppendValues(pers, nil)
	b.Field(2).(*array.Float64Builder).AppendValues(vals, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithMaxRowGroupLength(100)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
