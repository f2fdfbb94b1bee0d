package livedelta

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
)

// countingCoder is a BaseCoder over a fixed id → code map that counts
// its probes.
type countingCoder struct {
	codes  map[string]int
	probes int
}

func (c *countingCoder) BaseCode(id string) (int, bool) {
	c.probes++
	code, ok := c.codes[id]
	return code, ok
}

func (c *countingCoder) Attr(string, int) (arrow.Array, int, bool) { return nil, 0, false }

// TestNormalizeCodes: without attributes, each row's code is its series'
// base code (-1 for a series the base lacks), whether the ids come as
// utf8 or dictionary-encoded (sliced, so the offset counts); a dictionary
// is probed once per value a row uses, not once per row nor for unused
// values.
func TestNormalizeCodes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s, err := NewSchema(datafile.Schema(arrow.PrimitiveTypes.Float64, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	rowsIDs := []string{"B", "A", "NEW", "B", "B", "A"}
	want := []int32{1, 0, -1, 1, 1, 0}
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	for _, tc := range []struct {
		name   string
		idType arrow.DataType
		probes int
	}{
		{"utf8", arrow.BinaryTypes.String, len(rowsIDs)},
		{"dictionary", dictType, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := arrow.NewSchema([]arrow.Field{
				{Name: "series_id", Type: tc.idType},
				{Name: "period", Type: arrow.FixedWidthTypes.Date32},
				{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			}, nil)
			bld := array.NewRecordBuilder(mem, sc)
			defer bld.Release()
			// a leading row sliced off, and a dictionary value no row uses
			all := append([]string{"UNUSED"}, rowsIDs...)
			for i, id := range all {
				switch b := bld.Field(0).(type) {
				case *array.StringBuilder:
					b.Append(id)
				case *array.BinaryDictionaryBuilder:
					if err := b.AppendString(id); err != nil {
						t.Fatal(err)
					}
				}
				bld.Field(1).(*array.Date32Builder).Append(arrow.Date32(10957 + i))
				bld.Field(2).(*array.Float64Builder).Append(float64(i))
			}
			full := bld.NewRecordBatch()
			defer full.Release()
			rec := full.NewSlice(1, full.NumRows())
			defer rec.Release()
			coder := &countingCoder{codes: map[string]int{"A": 0, "B": 1, "UNUSED": 2}}
			norm, codes, err := NormalizeCodes(context.Background(), mem, s, rec, 0, coder, coder)
			if err != nil {
				t.Fatal(err)
			}
			defer norm.Release()
			if len(codes) != len(want) {
				t.Fatalf("%d codes for %d rows", len(codes), len(want))
			}
			for i := range want {
				if codes[i] != want[i] {
					t.Errorf("row %d (%s): code %d, want %d", i, rowsIDs[i], codes[i], want[i])
				}
			}
			if coder.probes != tc.probes {
				t.Errorf("%d probes, want %d", coder.probes, tc.probes)
			}
		})
	}
}

// TestNormalizeCodesAttrs: with attribute columns in the dataset but not
// in the write, the codes are still every row's, a series the base lacks
// and the delta does not know is refused naming its first row, and each
// such series is asked of Known once.
func TestNormalizeCodesAttrs(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := testSchema(t)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	build := func(ids ...string) arrow.RecordBatch {
		bld := array.NewRecordBuilder(mem, sc)
		defer bld.Release()
		for i, id := range ids {
			bld.Field(0).(*array.StringBuilder).Append(id)
			bld.Field(1).(*array.Date32Builder).Append(arrow.Date32(10957 + i))
			bld.Field(2).(*array.Float64Builder).Append(float64(i))
		}
		return bld.NewRecordBatch()
	}
	coder := &countingCoder{codes: map[string]int{"A": 0, "B": 1}}
	rec := build("B", "A", "B")
	norm, codes, err := NormalizeCodes(context.Background(), mem, s, rec, 0, coder, coder)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	norm.Release()
	if want := []int32{1, 0, 1}; len(codes) != 3 || codes[0] != want[0] || codes[1] != want[1] || codes[2] != want[2] {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	rec = build("A", "NEW", "NEW")
	_, _, err = NormalizeCodes(context.Background(), mem, s, rec, 4, coder, coder)
	rec.Release()
	if err == nil || !strings.Contains(err.Error(), "row 1") || !strings.Contains(err.Error(), `"NEW" is new`) {
		t.Fatalf("a new series without attributes: %v", err)
	}
}
