package datafile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
)

var testSchema = Schema(arrow.PrimitiveTypes.Float64, []arrow.Field{{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}})

// batch is one record batch to write: codes and periods, where a period
// of nullPeriod (or a code of nullCode) is written as a null.
type batch struct {
	codes   []uint32
	periods []int32
}

const (
	nullCode   = ^uint32(0)
	nullPeriod = int32(-1 << 31)
)

func (b batch) record(t *testing.T, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	rb := array.NewRecordBuilder(mem, testSchema)
	defer rb.Release()
	for i, c := range b.codes {
		if c == nullCode {
			rb.Field(ColumnSeriesCode).AppendNull()
		} else {
			rb.Field(ColumnSeriesCode).(*array.Uint32Builder).Append(c)
		}
		if p := b.periods[i]; p == nullPeriod {
			rb.Field(ColumnPeriod).AppendNull()
		} else {
			rb.Field(ColumnPeriod).(*array.Date32Builder).Append(arrow.Date32(p))
		}
		rb.Field(ColumnValue).(*array.Float64Builder).Append(float64(i))
		rb.Field(NumFixed).AppendNull()
	}
	return rb.NewRecordBatch()
}

func writeAll(t *testing.T, path string, batches []batch) (*Writer, error) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	w, err := Create(path, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		rec := b.record(t, mem)
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return w, err
		}
	}
	return w, nil
}

func TestWriterLocations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.arrow")
	w, err := writeAll(t, path, []batch{
		{codes: []uint32{0, 0, 1}, periods: []int32{10, 20, 5}},
		{codes: []uint32{2, 2, 2, 3}, periods: []int32{-3, 0, 7, 7}},
		{codes: []uint32{4}, periods: []int32{1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if info.Rows != 8 || info.Batches != 3 {
		t.Errorf("info = %+v, want 8 rows in 3 batches", info)
	}
	want := []Location{
		{Batch: 0, BatchOffset: 0, RowOffset: 0, RowCount: 2, FirstPeriod: 10, LastPeriod: 20},
		{Batch: 0, BatchOffset: 2, RowOffset: 2, RowCount: 1, FirstPeriod: 5, LastPeriod: 5},
		{Batch: 1, BatchOffset: 0, RowOffset: 3, RowCount: 3, FirstPeriod: -3, LastPeriod: 7},
		{Batch: 1, BatchOffset: 3, RowOffset: 6, RowCount: 1, FirstPeriod: 7, LastPeriod: 7},
		{Batch: 2, BatchOffset: 0, RowOffset: 7, RowCount: 1, FirstPeriod: 1, LastPeriod: 1},
	}
	got := w.Locations()
	if len(got) != len(want) {
		t.Fatalf("%d locations, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("series %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after Close: %v", err)
	}
	m, err := arrowfile.Map(path)
	if err != nil {
		t.Fatalf("the file does not map after Abort-after-Close: %v", err)
	}
	defer m.Close()
	if err := CheckSchema(m.Reader.Schema()); err != nil {
		t.Error(err)
	}
	if m.Reader.NumRecords() != 3 {
		t.Errorf("%d batches in the file, want 3", m.Reader.NumRecords())
	}
}

// TestWriterChecks: every invariant violation fails the write with an
// error naming the batch, the row and the values, and nothing is left.
func TestWriterChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches []batch
		want    string
	}{
		{"codes start above 0", []batch{{[]uint32{1, 1}, []int32{1, 2}}},
			"batch 0 row 0: series_code 1, want 0"},
		{"a code is skipped", []batch{{[]uint32{0, 0, 2}, []int32{1, 2, 1}}},
			"batch 0 row 2: series_code 2 after 0 skips codes"},
		{"codes decrease", []batch{{[]uint32{0, 1, 0}, []int32{1, 1, 2}}},
			"batch 0 row 2: series_code 0 after 1; codes must not decrease"},
		{"a series straddles two batches", []batch{{[]uint32{0, 1}, []int32{1, 1}}, {[]uint32{1, 2}, []int32{2, 1}}},
			"batch 1 row 0: series_code 1 continues from batch 0"},
		{"the next batch skips a code", []batch{{[]uint32{0, 1}, []int32{1, 1}}, {[]uint32{3}, []int32{1}}},
			"batch 1 row 0: series_code 3, want 2"},
		{"a period repeats", []batch{{[]uint32{0, 1, 1}, []int32{1, 18262, 18262}}},
			"batch 0 row 2: series_code 1 period 2020-01-01 is not after 2020-01-01"},
		{"periods decrease", []batch{{[]uint32{0}, []int32{1}}, {[]uint32{1, 1}, []int32{18293, 18262}}},
			"batch 1 row 1: series_code 1 period 2020-01-01 is not after 2020-02-01"},
		{"a null series code", []batch{{[]uint32{0, nullCode}, []int32{1, 2}}},
			"batch 0 row 1: series_code is null (1 nulls in the batch)"},
		{"a null period", []batch{{[]uint32{0}, []int32{1}}, {[]uint32{1, 1, 1}, []int32{1, nullPeriod, nullPeriod}}},
			"batch 1 row 1: period is null (2 nulls in the batch)"},
		{"an empty batch", []batch{{[]uint32{0}, []int32{1}}, {}},
			"batch 1 is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "data.arrow")
			w, err := writeAll(t, path, tc.batches)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			rec := batch{[]uint32{0}, []int32{1}}.record(t, memory.DefaultAllocator)
			defer rec.Release()
			if err := w.Write(rec); err == nil {
				t.Error("a write after a failed one succeeded")
			}
			if _, err := w.Close(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Close after a failed write: %v, want the write's error", err)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the file is still there after a failed write and Close: %v", err)
			}
			if err := w.Abort(); err != nil {
				t.Errorf("Abort after Close: %v", err)
			}
		})
	}
}

func TestWriterRefusesSchemas(t *testing.T) {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	nullableKey := Schema(arrow.PrimitiveTypes.Float64, nil)
	f := nullableKey.Fields()
	f[ColumnPeriod].Nullable = true
	md := nullableKey.Metadata()
	for _, tc := range []struct {
		name   string
		schema *arrow.Schema
		want   string
	}{
		{"a dictionary column", Schema(arrow.PrimitiveTypes.Float64, []arrow.Field{{Name: "units", Type: dict, Nullable: true}}),
			`column "units" is dictionary-encoded`},
		{"a nullable key", arrow.NewSchema(f, &md), "column period is nullable"},
		{"no metadata", arrow.NewSchema(Schema(arrow.PrimitiveTypes.Float64, nil).Fields(), nil), "servingsnap.file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Create(filepath.Join(t.TempDir(), "data.arrow"), tc.schema)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}

	// A batch of another schema.
	path := filepath.Join(t.TempDir(), "data.arrow")
	w, err := Create(path, Schema(arrow.PrimitiveTypes.Float64, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	rec := batch{[]uint32{0}, []int32{1}}.record(t, memory.DefaultAllocator)
	defer rec.Release()
	if err := w.Write(rec); err == nil || !strings.Contains(err.Error(), "batch 0: schema") {
		t.Errorf("error %v, want one about batch 0's schema", err)
	}
}

// TestWriterTakeLocations: taking the locations after each batch hands
// each series out once, as Locations would have listed them, and the code
// checks go on across takes.
func TestWriterTakeLocations(t *testing.T) {
	batches := []batch{
		{codes: []uint32{0, 0, 1}, periods: []int32{10, 20, 5}},
		{codes: []uint32{2, 2, 2, 3}, periods: []int32{-3, 0, 7, 7}},
		{codes: []uint32{4}, periods: []int32{1}},
	}
	ref, err := writeAll(t, filepath.Join(t.TempDir(), "data.arrow"), batches)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Abort()
	want := ref.Locations()

	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	w, err := Create(filepath.Join(t.TempDir(), "data.arrow"), testSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	var got []Location
	for i, b := range append(batches, batch{codes: []uint32{4}, periods: []int32{9}}) {
		rec := b.record(t, mem)
		err := w.Write(rec)
		rec.Release()
		if i == len(batches) {
			if err == nil || !strings.Contains(err.Error(), "series_code 4 continues from batch 2") {
				t.Errorf("a batch repeating a taken series: %v, want the straddling series named", err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n := len(got)
		got = w.TakeLocations(got)
		if len(got) == n || len(w.Locations()) != 0 {
			t.Fatalf("batch %d: took %d locations, %d left", i, len(got)-n, len(w.Locations()))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("taken %+v, want %+v", got, want)
	}
}
