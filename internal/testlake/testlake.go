// Package testlake writes small Parquet lakes and builds snapshots from
// them for tests across packages (build, read side, server, verifier), so
// each test states its rows inline and nothing is shared through files.
package testlake

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Col is one column of a test file: a name and its values, nil for null.
// Values are string, float64, int64, int32 or arrow.Date32; the Arrow type
// comes from the first non-null value unless typ is set.
type Col struct {
	Name string
	Vals []any
	Typ  arrow.DataType
}

// WriteParquet writes cols as one Parquet file at dir/rel with row groups
// of at most rgRows rows (0: one group).
func WriteParquet(t testing.TB, dir, rel string, rgRows int, cols ...Col) {
	t.Helper()
	var fields []arrow.Field
	var arrs []arrow.Array
	n := -1
	for _, c := range cols {
		dt := c.Typ
		if dt == nil {
			for _, v := range c.Vals {
				switch v.(type) {
				case string:
					dt = arrow.BinaryTypes.String
				case float64:
					dt = arrow.PrimitiveTypes.Float64
				case int64:
					dt = arrow.PrimitiveTypes.Int64
				case int32:
					dt = arrow.PrimitiveTypes.Int32
				case arrow.Date32:
					dt = arrow.FixedWidthTypes.Date32
				}
				if dt != nil {
					break
				}
			}
		}
		if dt == nil {
			dt = arrow.BinaryTypes.String
		}
		b := array.NewBuilder(memory.DefaultAllocator, dt)
		for _, v := range c.Vals {
			if v == nil {
				b.AppendNull()
				continue
			}
			switch bb := b.(type) {
			case *array.StringBuilder:
				bb.Append(v.(string))
			case *array.Float64Builder:
				bb.Append(v.(float64))
			case *array.Int64Builder:
				bb.Append(v.(int64))
			case *array.Int32Builder:
				bb.Append(v.(int32))
			case *array.Date32Builder:
				bb.Append(v.(arrow.Date32))
			default:
				t.Fatalf("column %s: unsupported builder %T", c.Name, b)
			}
		}
		if n >= 0 && len(c.Vals) != n {
			t.Fatalf("column %s has %d values, want %d", c.Name, len(c.Vals), n)
		}
		n = len(c.Vals)
		fields = append(fields, arrow.Field{Name: c.Name, Type: dt, Nullable: true})
		arrs = append(arrs, b.NewArray())
		b.Release()
	}
	sc := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(sc, arrs, int64(n))
	defer rec.Release()
	WriteRecord(t, filepath.Join(dir, filepath.FromSlash(rel)), rgRows, rec)
}

// WriteRecord writes rec as one Parquet file at path (its directory made
// as needed) with row groups of at most rgRows rows (0: one group).
func WriteRecord(t testing.TB, path string, rgRows int, rec arrow.RecordBatch) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if rgRows <= 0 {
		rgRows = int(rec.NumRows()) + 1
	}
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(rgRows))), pqarrow.DefaultWriterProps())
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

// Strs, Floats and Repeat build value lists tersely.
func Strs(v ...string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

func Floats(v ...float64) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

func Repeat(v any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// CutPages removes n page bytes from the Parquet file at path, right after
// its leading magic: the footer still reads, and the last column chunks'
// byte ranges now run past the end of the file (a truncated or spliced
// upload). The file must hold more than n bytes of pages.
func CutPages(t testing.TB, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const magic = 4
	if len(b) < 2*magic+n {
		t.Fatalf("%s: %d bytes, too few to cut %d page bytes from", path, len(b), n)
	}
	if err := os.WriteFile(path, append(b[:magic:magic], b[magic+n:]...), 0o644); err != nil {
		t.Fatal(err)
	}
}
