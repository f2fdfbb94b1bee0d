package sortwrite

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/internal/testlake"
)

// writeTimestamps writes one file whose period column is a timestamp in
// zone tz, with the Arrow schema stored so that a reader sees the zone.
func writeTimestamps(t *testing.T, path, tz string, ids []string, micros []int64) {
	t.Helper()
	typ := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: tz}
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	sb.AppendValues(ids, nil)
	tb := array.NewTimestampBuilder(memory.DefaultAllocator, typ)
	for _, m := range micros {
		tb.Append(arrow.Timestamp(m))
	}
	vb := array.NewFloat64Builder(memory.DefaultAllocator)
	for range ids {
		vb.Append(1)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}, {Name: "period", Type: typ}, {Name: "value", Type: arrow.PrimitiveTypes.Float64}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{sb.NewArray(), tb.NewArray(), vb.NewArray()}, int64(len(ids)))
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
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

// TestInputChecks: inputs a build must refuse with an error naming the
// file, column or row, rather than accept silently or hang.
func TestInputChecks(t *testing.T) {
	idv := func(ids ...string) testlake.Col { return testlake.Col{Name: "series_id", Vals: testlake.Strs(ids...)} }
	per := func(ps ...string) testlake.Col { return testlake.Col{Name: "period", Vals: testlake.Strs(ps...)} }
	val := func(vs ...float64) testlake.Col { return testlake.Col{Name: "value", Vals: testlake.Floats(vs...)} }
	cases := []struct {
		name  string
		files func(t *testing.T, dir string)
		opt   func(*Options)
		want  []string // substrings of the error
	}{
		{"columns differ only in case, one file", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1), testlake.Col{Name: "Value", Vals: testlake.Floats(2)})
		}, nil, []string{`"value"`, `"Value"`, "a.parquet", "differ only in case"}},
		{"columns differ only in case, two files", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1), testlake.Col{Name: "units", Vals: testlake.Strs("$")})
			testlake.WriteParquet(t, d, "b.parquet", 0, idv("S"), per("2021"), val(1), testlake.Col{Name: "Units", Vals: testlake.Strs("$")})
		}, nil, []string{`"units"`, `"Units"`, "a.parquet", "b.parquet", "differ only in case"}},
		{"period string in one file, integer in another", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1))
			testlake.WriteParquet(t, d, "b.parquet", 0, idv("S"), testlake.Col{Name: "period", Vals: []any{int64(2021)}}, val(1))
		}, nil, []string{`column "period"`, "a.parquet", "b.parquet", "utf8", "int64", "type"}},
		{"empty series id", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 2, idv("S", "S", "T", ""), per("2020", "2021", "2022", "2023"), val(1, 2, 3, 4))
		}, nil, []string{"a.parquet row group 1 row 1", `column "series_id"`, "empty"}},
		{"unknown time zone", func(t *testing.T, d string) {
			writeTimestamps(t, filepath.Join(d, "a.parquet"), "Mars/Olympus_Mons", []string{"S"}, []int64{1_600_000_000_000_000})
		}, nil, []string{"a.parquet", `column "period"`, "Mars/Olympus_Mons", "time zone"}},
		{"attribute named like an index column", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S", "S"), per("2020", "2021"), val(1, 2), testlake.Col{Name: "row_offset", Vals: testlake.Strs("x", "x")})
		}, nil, []string{`column "row_offset"`, "a.parquet", "a column of their own", "rename"}},
		{"data column named like the data file's series_code", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S", "S"), per("2020", "2021"), val(1, 2), testlake.Col{Name: "series_code", Vals: testlake.Floats(7, 8)})
		}, nil, []string{`column "series_code"`, "a.parquet", "a column of their own"}},
		{"column named like the lookup table, second file only", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1))
			testlake.WriteParquet(t, d, "b.parquet", 0, idv("T"), per("2020"), val(1), testlake.Col{Name: "lookup_code", Vals: testlake.Floats(3)})
		}, nil, []string{`column "lookup_code"`, "b.parquet"}},
		{"column named like a tier column in an untiered build", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1), testlake.Col{Name: "cold_start", Vals: testlake.Floats(3)})
		}, nil, []string{`column "cold_start"`, "a.parquet"}},
		{"extra column named series_id beside --series-column", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, testlake.Col{Name: "sid", Vals: testlake.Strs("S")}, per("2020"), val(1), testlake.Col{Name: "series_id", Vals: testlake.Strs("x")})
		}, func(o *Options) { o.SeriesColumn = "sid" }, []string{`column "series_id"`, "a.parquet", "every answer", "--series-column"}},
		{"extra column differing in case from value", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), testlake.Col{Name: "obs", Vals: testlake.Floats(1)}, testlake.Col{Name: "VALUE", Vals: testlake.Floats(2)})
		}, func(o *Options) { o.ValueColumn = "obs" }, []string{`column "VALUE"`, `"value"`, "more than case", "--value-column"}},
		{"column in servingsnap's namespace", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1), testlake.Col{Name: "servingsnap.attributes_given", Vals: testlake.Floats(1)})
		}, nil, []string{`column "servingsnap.attributes_given"`, "a.parquet", "servingsnap's own"}},
		{"fifo named parquet", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1))
			if err := syscall.Mkfifo(filepath.Join(d, "b.parquet"), 0o644); err != nil {
				t.Fatal("mkfifo:", err)
			}
		}, nil, []string{"b.parquet", "not a regular file", "named pipe"}},
		{"socket named parquet", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1))
			mksock(t, filepath.Join(d, "s.parquet"))
		}, nil, []string{"s.parquet", "not a regular file", "socket"}},
		{"device named parquet", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), per("2020"), val(1))
			if err := os.Symlink("/dev/zero", filepath.Join(d, "z.parquet")); err != nil {
				t.Fatal(err)
			}
		}, nil, []string{"z.parquet", "not a regular file", "device"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, out := t.TempDir(), filepath.Join(t.TempDir(), "DS")
			tc.files(t, in)
			_, err := build(t, in, out, tc.opt)
			if err == nil {
				t.Fatal("build succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, err := os.Stat(filepath.Join(out, "CURRENT")); !os.IsNotExist(err) {
				t.Errorf("a failed build left CURRENT behind")
			}
		})
	}
}

// mksock leaves a Unix socket at path (the listener is closed at cleanup;
// the file stays until then).
func mksock(t *testing.T, path string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal("socket:", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal("bind a Unix socket:", err)
	}
}
