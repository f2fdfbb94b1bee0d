package serve

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rawStrings is a string array over the given offsets and data buffers,
// sliced to [off, off+n): what a client's IPC may carry, checked or not.
// It is nil where arrow-go refuses to make the array at all (its last
// offset past the data: an IPC reader refuses the batch).
func rawStrings(offsets []int32, data string, off, n int) (a *array.String) {
	ob := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))
	db := memory.NewBufferBytes([]byte(data))
	d := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, ob, db}, nil, 0, off)
	defer d.Release()
	defer func() {
		if recover() != nil {
			a = nil
		}
	}()
	return array.NewStringData(d)
}

// arrowValid is arrow-go's own full validation of a (the oracle), a panic
// counting as invalid.
func arrowValid(a arrow.Array) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return array.ValidateFull(a) == nil
}

// TestValidateStrings: validateColumn's string check refuses what arrow-go's
// full validation refuses and accepts what it accepts, and names the row
// of a value that is not UTF-8, including values that are valid together
// but not apart (a character split across two values).
func TestValidateStrings(t *testing.T) {
	for _, c := range []struct {
		name    string
		offsets []int32
		data    string
		off, n  int
		want    string // "" valid, else a part of the error
	}{
		{"ascii", []int32{0, 2, 2, 5}, "S1abc", 0, 3, ""},
		{"multibyte", []int32{0, 7, 10, 14}, "Zürich€😀", 0, 3, ""},
		{"sliced", []int32{0, 1, 3, 6}, "aé€", 1, 2, ""},
		{"empty array", []int32{0}, "", 0, 0, ""},
		{"invalid byte", []int32{0, 2, 3, 5}, "ab\xffcd", 0, 3, "row 1: the string is not valid UTF-8"},
		{"truncated at the end", []int32{0, 1, 2}, "a\xc3", 0, 2, "row 1: "},
		{"character split across values", []int32{0, 2, 3, 4}, "xy\xc3\xa9", 0, 3, "row 1: "},
		{"split in a slice", []int32{0, 1, 2, 3}, "a\xc3\xa9", 1, 2, "row 0: "},
		{"overlong encoding", []int32{0, 2}, "\xc0\xaf", 0, 1, "row 0: "},
		{"surrogate", []int32{0, 3}, "\xed\xa0\x80", 0, 1, "row 0: "},
		{"decreasing offsets", []int32{0, 3, 2, 4}, "abcd", 0, 3, "non-decreasing"},
		{"negative offset", []int32{-1, 2}, "ab", 0, 1, "negative"},
		{"offset past the data", []int32{0, 9, 3}, "abc", 0, 2, "non-decreasing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := rawStrings(c.offsets, c.data, c.off, c.n)
			if a == nil {
				t.Fatal("arrow-go refused to make the array")
			}
			defer a.Release()
			err := validateColumn(a)
			if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validateColumn: %v, want %q", err, c.want)
			}
			if ok := arrowValid(a); ok != (err == nil) {
				t.Fatalf("arrow-go's ValidateFull says valid=%v, validateColumn %v", ok, err)
			}
		})
	}
}

// FuzzValidateStrings: for any offsets and data, validateColumn's string
// check agrees with arrow-go's full validation, and never panics.
func FuzzValidateStrings(f *testing.F) {
	f.Add([]byte{0, 2, 3, 5}, []byte("ab\xffcd"), uint8(0))
	f.Add([]byte{0, 2, 3, 4}, []byte("xy\xc3\xa9"), uint8(1))
	f.Add([]byte{0, 7, 10, 14}, []byte("Zürich€😀"), uint8(0))
	f.Fuzz(func(t *testing.T, offs, data []byte, off uint8) {
		if len(offs) == 0 {
			return
		}
		offsets := make([]int32, len(offs))
		for i, o := range offs {
			offsets[i] = int32(int8(o)) // small, sometimes negative or decreasing
		}
		n := len(offsets) - 1 - int(off)%len(offsets)
		a := rawStrings(offsets, string(data), len(offsets)-1-n, n)
		if a == nil {
			return
		}
		defer a.Release()
		err := validateColumn(a)
		if ok := arrowValid(a); ok != (err == nil) {
			t.Fatalf("offsets %v data %q offset %d: arrow-go valid=%v, validateColumn %v", offsets, data, len(offsets)-1-n, ok, err)
		}
	})
}

// BenchmarkValidatePut: validatePut of a 10k-row DoPut batch as the
// ingest benchmarks send (series ids, dates, values, a category), against
// arrow-go's ValidateFull of each column.
func BenchmarkValidatePut(b *testing.B) {
	mem := memory.DefaultAllocator
	ids, cats := array.NewStringBuilder(mem), array.NewStringBuilder(mem)
	days, vals := array.NewDate32Builder(mem), array.NewFloat64Builder(mem)
	for i := 0; i < ingestBatchRows; i++ {
		ids.Append(fmt.Sprintf("S.%07d", i*16%100_000))
		cats.Append(fmt.Sprintf("C%d", i%20))
		days.Append(arrow.Date32(i))
		vals.Append(float64(i))
	}
	cols := []arrow.Array{ids.NewArray(), days.NewArray(), vals.NewArray(), cats.NewArray()}
	sc := arrow.NewSchema([]arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}, {Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64}, {Name: "category", Type: arrow.BinaryTypes.String}}, nil)
	rec := array.NewRecordBatch(sc, cols, ingestBatchRows)
	defer rec.Release()
	for _, c := range cols {
		c.Release()
	}
	b.Run("validatePut", func(b *testing.B) {
		for b.Loop() {
			if err := validatePut(rec, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ingestBatchRows), "ns/row")
	})
	b.Run("arrow-ValidateFull", func(b *testing.B) {
		for b.Loop() {
			for _, c := range rec.Columns() {
				if err := array.ValidateFull(c); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ingestBatchRows), "ns/row")
	})
}
