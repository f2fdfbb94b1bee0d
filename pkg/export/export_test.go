package export_test

import (
	"context"
	"encoding/csv"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// readTable reads an exported file back into one record batch per file
// format: Parquet through pqarrow, Arrow IPC through the file reader.
func readTable(t *testing.T, path string) arrow.Table {
	t.Helper()
	switch filepath.Ext(path) {
	case ".parquet":
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	case ".arrow":
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := ipc.NewFileReader(f)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var recs []arrow.RecordBatch
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.RecordBatch(i)
			if err != nil {
				t.Fatal(err)
			}
			rec.Retain()
			recs = append(recs, rec)
		}
		return array.NewTableFromRecords(r.Schema(), recs)
	}
	t.Fatalf("no reader for %s", path)
	return nil
}

// column returns a table column's values as strings (nulls as "").
func column(t *testing.T, tbl arrow.Table, name string) []string {
	t.Helper()
	idx := tbl.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q in %s", name, tbl.Schema())
	}
	var out []string
	for _, c := range tbl.Column(idx[0]).Data().Chunks() {
		for i := 0; i < c.Len(); i++ {
			if c.IsNull(i) {
				out = append(out, "")
			} else {
				out = append(out, c.ValueStr(i))
			}
		}
	}
	return out
}

func TestExportFormats(t *testing.T) {
	root := t.TempDir()
	ds := inspecttest.Build(t, root, false)
	out := t.TempDir()
	wantCols := []string{"series_id", "period", "value", "status", "category", "units"}
	for _, ext := range []string{".parquet", ".arrow", ".csv"} {
		t.Run(ext, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			path := filepath.Join(out, "prices"+ext)
			res, err := export.Export(context.Background(), export.Options{Dataset: ds, Out: path, Allocator: mem, BatchBytes: 64})
			if err != nil {
				t.Fatal(err)
			}
			// A whole snapshot to Parquet is written as the portable copy
			// is (Batches counts its row groups: one here); the other
			// formats stream batches of the budget.
			if res.Rows != inspecttest.RowsB || res.Series != inspecttest.SeriesB || res.SnapshotID != 2 || (res.Batches < 2) != (ext == ".parquet") {
				t.Errorf("result %+v: want %d rows of %d series of snapshot 2 (in several batches but as Parquet)", res, inspecttest.RowsB, inspecttest.SeriesB)
			}
			if !slices.Equal(sorted(res.Columns), sorted(wantCols)) || res.Columns[0] != "series_id" || res.Columns[1] != "period" {
				t.Errorf("columns %v, want series_id, period, then %v", res.Columns, wantCols[2:])
			}
			if st, err := os.Stat(path); err != nil || st.Size() != res.Bytes {
				t.Errorf("file: %v, size %v, result says %d", err, st, res.Bytes)
			}
			var ids, periods, values, units []string
			if ext == ".csv" {
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				recs, err := csv.NewReader(f).ReadAll()
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(recs[0], res.Columns) {
					t.Errorf("CSV header %v, want %v", recs[0], res.Columns)
				}
				at := func(name string) int { return slices.Index(recs[0], name) }
				for _, r := range recs[1:] {
					ids, periods, values, units = append(ids, r[at("series_id")]), append(periods, r[at("period")]), append(values, r[at("value")]), append(units, r[at("units")])
				}
			} else {
				tbl := readTable(t, path)
				defer tbl.Release()
				for _, f := range tbl.Schema().Fields() {
					if _, dict := f.Type.(*arrow.DictionaryType); dict {
						t.Errorf("column %s is still dictionary-encoded", f.Name)
					}
				}
				ids, periods, values, units = column(t, tbl, "series_id"), column(t, tbl, "period"), column(t, tbl, "value"), column(t, tbl, "units")
			}
			if len(ids) != inspecttest.RowsB {
				t.Fatalf("%d rows read back, want %d", len(ids), inspecttest.RowsB)
			}
			if !slices.IsSorted(ids) || ids[0] != "NG.HH.D" || ids[len(ids)-1] != "PET.WTI.D" {
				t.Errorf("series ids %v: want real ids in order", ids)
			}
			// Row 0 is NG.HH.D 2024-01-01 2.5 $/MMBtu; PET.BRENT.D's 1200-row is a
			// float written in plain form in CSV.
			if periods[0] != "2024-01-01" || values[0] != "2.5" || units[0] != "$/MMBtu" {
				t.Errorf("first row %s %s %s %s", ids[0], periods[0], values[0], units[0])
			}
			if i := slices.Index(ids, "PET.COKE.A"); i < 0 || values[i] != "1200" {
				t.Errorf("PET.COKE.A first value %q, want 1200", values[i])
			}
		})
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestExportSelection(t *testing.T) {
	root := t.TempDir()
	ds := inspecttest.Build(t, root, false)
	out := filepath.Join(t.TempDir(), "x.csv")
	cases := []struct {
		name string
		o    export.Options
		rows int64
	}{
		{"series and range", export.Options{Series: []string{"PET.BRENT.M", "NG.HH.D"}, From: "2024-01", To: "2024-01"}, 7 + 1},
		{"prefix", export.Options{Prefix: "PET.BRENT"}, 3 + 4},
		{"category", export.Options{Category: "Petroleum"}, 3 + 4 + 2 + 3},
		{"vintage 1", export.Options{Snapshot: 1, Prefix: "ZZ"}, 2},
		{"to a year", export.Options{Prefix: "PET.COKE", To: "2022"}, 2},
	}
	for _, c := range cases {
		c.o.Dataset, c.o.Out, c.o.Overwrite = ds, out, true
		res, err := export.Export(context.Background(), c.o)
		if err != nil || res.Rows != c.rows {
			t.Errorf("%s: %+v, %v; want %d rows", c.name, res, err, c.rows)
		}
	}
	res, err := export.Export(context.Background(), export.Options{Dataset: ds, Out: out, Overwrite: true, NoAttributes: true, Prefix: "NG"})
	if err != nil || slices.Contains(res.Columns, "units") {
		t.Errorf("without attributes: %+v, %v", res, err)
	}
}

func TestExportErrors(t *testing.T) {
	root := t.TempDir()
	ds := inspecttest.Build(t, root, false)
	dir := t.TempDir()
	out := filepath.Join(dir, "x.parquet")
	cases := []struct {
		o        export.Options
		want     string
		notExist bool
	}{
		{export.Options{Snapshot: 9}, "snapshot 9 of PRICES does not exist (vintages: 1, 2; CURRENT is 2)", true},
		{export.Options{Dataset: filepath.Join(root, "NOPE")}, "does not exist", true},
		{export.Options{Series: []string{"NOPE"}}, `"NOPE" not found`, false},
		{export.Options{Series: []string{"NG.HH.D"}, Prefix: "PET"}, "not several", false},
		{export.Options{From: "2024-13"}, "--from", false},
		{export.Options{From: "2024", To: "2023"}, "after", false},
		{export.Options{Out: filepath.Join(dir, "x.txt")}, "unknown extension", false},
	}
	for _, c := range cases {
		if c.o.Dataset == "" {
			c.o.Dataset = ds
		}
		if c.o.Out == "" {
			c.o.Out = out
		}
		_, err := export.Export(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, fs.ErrNotExist) != c.notExist {
			t.Errorf("%+v: %v; want %q (not-exist %v)", c.o, err, c.want, c.notExist)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed exports left %v", ents)
	}
	if _, err := export.Export(context.Background(), export.Options{Dataset: ds, Out: out}); err != nil {
		t.Fatal(err)
	}
	if _, err := export.Export(context.Background(), export.Options{Dataset: ds, Out: out}); err == nil || !strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("export over an existing file: %v", err)
	}
}

// TestExportLarge streams a dataset of many batches with a small budget
// (a period range, so the answer is streamed rather than written as a
// whole copy).
func TestExportLarge(t *testing.T) {
	root := t.TempDir()
	_, ds := testsnap.Sample(t, root, "SYN", 300, 3, func(o *sortwrite.Options) { o.BatchRows = 1000 })
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	path := filepath.Join(t.TempDir(), "syn.parquet")
	res, err := export.Export(context.Background(), export.Options{Dataset: ds, Out: path, Allocator: mem, BatchBytes: 16 << 10, From: "1990"})
	if err != nil {
		t.Fatal(err)
	}
	tbl := readTable(t, path)
	defer tbl.Release()
	if tbl.NumRows() != res.Rows || res.Series != 300 || res.Batches < 10 {
		t.Errorf("read back %d rows; result %+v", tbl.NumRows(), res)
	}
}
