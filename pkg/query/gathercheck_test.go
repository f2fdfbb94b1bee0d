package query

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// badStrings is a string column of three values whose offsets are then
// overwritten with offs (in place, as a damaged index file would have them).
func badStrings(t *testing.T, offs []int32) *array.String {
	t.Helper()
	b := array.NewStringBuilder(memory.DefaultAllocator)
	b.AppendValues([]string{"aa", "bbb", "c"}, nil)
	a := b.NewStringArray()
	t.Cleanup(a.Release)
	copy(arrow.Int32Traits.CastFromBytes(a.Data().Buffers()[1].Bytes()), offs)
	return a
}

func TestCheckGather(t *testing.T) {
	for _, tc := range []struct {
		name  string
		offs  []int32
		codes []int32
		bad   bool
	}{
		{"good", []int32{0, 2, 5, 6}, []int32{0, 2}, false},
		{"past the data", []int32{0, 2, 5, 900}, []int32{2}, true},
		{"bad row not gathered", []int32{0, 2, 5, 900}, []int32{0, 1}, false},
		{"decreasing", []int32{0, 4, 2, 6}, []int32{1}, true},
		{"negative", []int32{-3, 2, 5, 6}, []int32{0}, true},
		{"row outside", []int32{0, 2, 5, 6}, []int32{3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkGather(badStrings(t, tc.offs), tc.codes)
			if tc.bad != (err != nil) {
				t.Fatalf("checkGather: %v, want bad=%v", err, tc.bad)
			}
			if err != nil && !corrupt.Is(err) {
				t.Fatalf("not marked corrupt: %v", err)
			}
		})
	}
}

func TestCheckGatherDictionary(t *testing.T) {
	mem := memory.DefaultAllocator
	dict := badStrings(t, []int32{0, 2, 5, 6})
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{0, 2, 7}, nil) // 7: outside the dictionary
	ind := ib.NewInt32Array()
	defer ind.Release()
	d := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, ind, dict)
	defer d.Release()
	// Only the rows gathered are checked: the bad index is row 2's.
	for _, tc := range []struct {
		rows   []int32
		lo, hi int
		bad    bool
	}{
		{[]int32{0, 1}, 0, 2, false},
		{[]int32{2}, 2, 3, true},
		{[]int32{1, 2, 0}, 0, 3, true},
	} {
		err := checkGather(d, tc.rows)
		if (err != nil) != tc.bad || (err != nil && !corrupt.Is(err)) {
			t.Errorf("gather of rows %v: %v, want bad=%v (marked corrupt)", tc.rows, err, tc.bad)
		}
		err = checkDictSpan(d, tc.lo, tc.hi)
		if (err != nil) != tc.bad || (err != nil && !corrupt.Is(err)) {
			t.Errorf("rows [%d, %d): %v, want bad=%v (marked corrupt)", tc.lo, tc.hi, err, tc.bad)
		}
	}
	if err := checkDictSpan(d, 1, 4); err == nil || !corrupt.Is(err) {
		t.Errorf("rows [1, 4) of 3: %v, want a corrupt error", err)
	}
}
