package sortwrite

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// writePagesLake writes a lake of two files whose columns cover what the
// page reader takes (strings, float64/32, int64/32, date32; nulls or not;
// required columns) and what it leaves to pqarrow (int8, bool), with the
// given writer properties.
func writePagesLake(t *testing.T, dir string, datePeriods bool, props ...parquet.WriterProperty) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	periodType := arrow.DataType(arrow.BinaryTypes.String)
	if datePeriods {
		periodType = arrow.FixedWidthTypes.Date32
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: periodType},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "units", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "code", Type: arrow.PrimitiveTypes.Int32},
		{Name: "ratio", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "since", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "tiny", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "empty", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	for f := range 2 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for s := range 60 {
			id := fmt.Sprintf("S%03d-%d", s, s*s%7)
			for m := range 30 {
				b.Field(0).(*array.StringBuilder).Append(id)
				if datePeriods {
					b.Field(1).(*array.Date32Builder).Append(arrow.Date32(18262 + 400*f + m*31))
				} else {
					b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("%d-%02d", 2000+f*3+m/12, m%12+1))
				}
				null := rng.IntN(9) == 0
				appendOr(b.Field(2), null, func() { b.Field(2).(*array.Float64Builder).Append(rng.Float64() * 1e6) })
				appendOr(b.Field(3), s%5 == 0, func() { b.Field(3).(*array.StringBuilder).Append([]string{"MW", "GWh", "t"}[s%3]) })
				appendOr(b.Field(4), null, func() { b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("name of series %d, a longer text", s)) })
				appendOr(b.Field(5), m%4 == 0, func() { b.Field(5).(*array.Int64Builder).Append(int64(s) << 33) })
				b.Field(6).(*array.Int32Builder).Append(int32(s - 30))
				appendOr(b.Field(7), null, func() { b.Field(7).(*array.Float32Builder).Append(float32(m) / 3) })
				appendOr(b.Field(8), s%2 == 0, func() { b.Field(8).(*array.Date32Builder).Append(arrow.Date32(10000 + s)) })
				appendOr(b.Field(9), null, func() { b.Field(9).(*array.Int8Builder).Append(int8(m)) })
				appendOr(b.Field(10), null, func() { b.Field(10).(*array.BooleanBuilder).Append(m%2 == 0) })
				b.Field(11).AppendNull()
				appendOr(b.Field(12), null, func() { b.Field(12).(*array.StringBuilder).Append(fmt.Sprintf("unique %x", rng.Uint64())) })
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)))
		if err != nil {
			t.Fatal(err)
		}
		wp := parquet.NewWriterProperties(append([]parquet.WriterProperty{parquet.WithMaxRowGroupLength(700)}, props...)...)
		w, err := pqarrow.NewFileWriter(sc, fh, wp, pqarrow.DefaultWriterProps())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
}

func appendOr(b array.Builder, null bool, val func()) {
	if null {
		b.AppendNull()
		return
	}
	val()
}

// TestPageReaderMatchesArrow builds lakes written every way the page
// reader meets (dictionary or plain pages, page versions 1 and 2, many
// small pages, a dictionary that overflows into plain pages mid-chunk,
// codecs) with the page reader and without it: the data and index files
// must be byte-identical, and the page reader must have taken the columns
// it is meant for.
func TestPageReaderMatchesArrow(t *testing.T) {
	cases := []struct {
		name  string
		date  bool
		props []parquet.WriterProperty
		paged []string // columns the page reader must take (in some row group)
	}{
		{name: "dictionary", paged: []string{"series_id", "period", "value", "units", "name", "count", "code", "ratio", "since"}},
		{name: "date periods", date: true, paged: []string{"period"}},
		{name: "plain", props: []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}, paged: []string{"value", "count", "code", "ratio"}},
		{name: "plain date periods", date: true, props: []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}, paged: []string{"period", "value"}},
		{name: "v2 pages", props: []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2)}, paged: []string{"series_id", "value", "units"}},
		{name: "v2 plain", props: []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDictionaryDefault(false)}, paged: []string{"value"}},
		{name: "small pages", props: []parquet.WriterProperty{parquet.WithDataPageSize(256), parquet.WithBatchSize(37)}, paged: []string{"series_id", "value", "name"}},
		{name: "dictionary overflow", props: []parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(300), parquet.WithBatchSize(50)}, paged: []string{"series_id"}},
		{name: "snappy", props: []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Snappy)}, paged: []string{"series_id", "value"}},
		{name: "zstd v2", props: []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd), parquet.WithDataPageVersion(parquet.DataPageV2)}, paged: []string{"series_id", "value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := t.TempDir()
			writePagesLake(t, in, tc.date, tc.props...)
			var mu sync.Mutex
			took := map[string]bool{}
			onPaged = func(c string) { mu.Lock(); took[c] = true; mu.Unlock() }
			defer func() { onPaged = nil }()
			fast := builtFiles(t, in)
			pageReaderOff = true
			defer func() { pageReaderOff = false }()
			slow := builtFiles(t, in)
			for _, role := range []string{manifest.RoleData, manifest.RoleIndex} {
				if !bytes.Equal(fast[role], slow[role]) {
					t.Errorf("%s file differs with the page reader (%d bytes) and without (%d bytes)", role, len(fast[role]), len(slow[role]))
				}
			}
			for _, c := range tc.paged {
				if !took[c] {
					t.Errorf("the page reader did not take column %q (took %v)", c, slices.Sorted(mapsKeys(took)))
				}
			}
			for _, c := range []string{"tiny", "flag"} {
				if took[c] {
					t.Errorf("the page reader took column %q, which it cannot decode", c)
				}
			}
		})
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// builtFiles builds in and returns the data and index files' bytes.
func builtFiles(t *testing.T, in string) map[string][]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "DS")
	if _, err := build(t, in, out, nil); err != nil {
		t.Fatal(err)
	}
	ds, err := dataset.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Current()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, role := range []string{manifest.RoleData, manifest.RoleIndex} {
		f, ok := m.FileByRole(role)
		if !ok {
			t.Fatalf("no %s file", role)
		}
		b, err := os.ReadFile(ds.Path(f.Path))
		if err != nil {
			t.Fatal(err)
		}
		files[role] = b
	}
	return files
}

// TestBigArenaMatchesHeap builds with every large array mapped (bigMin 1)
// and with none (the Go heap): the files must be byte-identical, and the
// arena must have mapped and then released its slices.
func TestBigArenaMatchesHeap(t *testing.T) {
	in := t.TempDir()
	writePagesLake(t, in, false)
	old := bigMin
	defer func() { bigMin = old }()
	bigMin = 1 << 62
	heap := builtFiles(t, in)
	bigMin = 1
	mapped := builtFiles(t, in)
	for _, role := range []string{manifest.RoleData, manifest.RoleIndex} {
		if !bytes.Equal(heap[role], mapped[role]) {
			t.Errorf("%s file differs with mapped arrays (%d bytes) and heap arrays (%d bytes)", role, len(mapped[role]), len(heap[role]))
		}
	}
	var a bigArena
	v := bigSlice[uint64](&a, 1000)
	w := bigSlice[byte](&a, 10)
	if len(a.maps) != 2 || len(v) != 1000 || len(w) != 10 || v[999] != 0 {
		t.Fatalf("arena holds %d mappings, slices of %d and %d", len(a.maps), len(v), len(w))
	}
	v[999] = 7
	drop(&a, v)
	if len(a.maps) != 1 {
		t.Errorf("after drop, %d mappings, want 1", len(a.maps))
	}
	a.release()
	if len(a.maps) != 0 {
		t.Errorf("after release, %d mappings", len(a.maps))
	}
}
