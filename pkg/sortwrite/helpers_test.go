package sortwrite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sidecar"
)

// col is one column of a test file: a name and its values, nil for null.
// Values are string, float64, int64, int32 or arrow.Date32; the Arrow type
// comes from the first non-null value unless typ is set.
type col struct {
	name string
	vals []any
	typ  arrow.DataType
}

// writeParquet writes cols as one Parquet file at dir/rel with row groups
// of at most rgRows rows (0: one group).
func writeParquet(t testing.TB, dir, rel string, rgRows int, cols ...col) {
	t.Helper()
	var fields []arrow.Field
	var arrs []arrow.Array
	n := -1
	for _, c := range cols {
		dt := c.typ
		if dt == nil {
			for _, v := range c.vals {
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
		for _, v := range c.vals {
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
				t.Fatalf("column %s: unsupported builder %T", c.name, b)
			}
		}
		if n >= 0 && len(c.vals) != n {
			t.Fatalf("column %s has %d values, want %d", c.name, len(c.vals), n)
		}
		n = len(c.vals)
		fields = append(fields, arrow.Field{Name: c.name, Type: dt, Nullable: true})
		arrs = append(arrs, b.NewArray())
		b.Release()
	}
	sc := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(sc, arrs, int64(n))
	defer rec.Release()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if rgRows <= 0 {
		rgRows = n + 1
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(rgRows))), pqarrow.DefaultWriterProps())
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

// strs and floats build value lists tersely.
func strs(v ...string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

func floats(v ...float64) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

func repeat(v any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// build runs Build with test defaults.
func build(t testing.TB, in, out string, mod func(*Options)) (*Summary, error) {
	t.Helper()
	opt := Options{Input: in, Out: out, Parallel: 2}
	if mod != nil {
		mod(&opt)
	}
	return Build(context.Background(), opt)
}

// snapshotRows reads a published snapshot back: per series id, its
// (period, value) rows in file order, and the index.
type seriesRow struct {
	Period int32
	Value  any
}

func readBack(t testing.TB, dsDir string) (*manifest.Manifest, map[string][]seriesRow, arrow.RecordBatch) {
	t.Helper()
	ds, err := manifest.OpenDataset(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Current()
	if err != nil {
		t.Fatal(err)
	}
	df, _ := m.FileByRole(manifest.RoleData)
	xf, _ := m.FileByRole(manifest.RoleIndex)
	xm, err := arrowfile.Load(ds.Path(xf.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { xm.Close() })
	xrec, err := xm.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	x, err := sidecar.New(xrec)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := arrowfile.Map(ds.Path(df.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dm.Close() })
	out := map[string][]seriesRow{}
	for b := 0; b < dm.Reader.NumRecords(); b++ {
		rec, err := dm.Batch(b)
		if err != nil {
			t.Fatal(err)
		}
		codes := rec.Column(0).(*array.Uint32).Uint32Values()
		periods := rec.Column(1).(*array.Date32).Date32Values()
		vals := rec.Column(2)
		for i := range codes {
			id := x.SeriesID(int(codes[i]))
			var v any
			if vals.IsValid(i) {
				v = vals.GetOneForMarshal(i)
			}
			out[id] = append(out[id], seriesRow{int32(periods[i]), v})
		}
		rec.Release()
	}
	return m, out, xrec
}
