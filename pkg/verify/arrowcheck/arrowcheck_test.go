package arrowcheck

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func i32(v ...int32) *memory.Buffer {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return memory.NewBufferBytes(b)
}

func TestData(t *testing.T) {
	str := arrow.BinaryTypes.String
	vals := memory.NewBufferBytes([]byte("abcdef"))
	dict := array.NewData(str, 2, []*memory.Buffer{nil, i32(0, 1, 3), vals}, nil, 0, 0)
	dictType := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: str}
	withDict := func(idx *memory.Buffer, n int) arrow.ArrayData {
		return array.NewDataWithDictionary(dictType, n, []*memory.Buffer{nil, idx}, 0, 0, dict)
	}
	cases := []struct {
		name string
		d    arrow.ArrayData
		want string // "" for no error, else a substring
	}{
		{"good strings", array.NewData(str, 3, []*memory.Buffer{nil, i32(0, 1, 3, 6), vals}, nil, 0, 0), ""},
		{"sliced strings", array.NewData(str, 2, []*memory.Buffer{nil, i32(0, 1, 3, 6), vals}, nil, 0, 1), ""},
		{"offset past the values", array.NewData(str, 3, []*memory.Buffer{nil, i32(0, 1, 30, 6), vals}, nil, 0, 0), "row 1: offset 30 outside the value buffer of 6 bytes"},
		{"decreasing offsets", array.NewData(str, 3, []*memory.Buffer{nil, i32(0, 4, 3, 6), vals}, nil, 0, 0), "row 1: offsets decrease"},
		{"negative first offset", array.NewData(str, 1, []*memory.Buffer{nil, i32(-1, 2), vals}, nil, 0, 0), "row 0: offset -1"},
		{"short offsets", array.NewData(str, 3, []*memory.Buffer{nil, i32(0, 1), vals}, nil, 0, 0), "offsets buffer of 8 bytes for 3 values"},
		{"short fixed", array.NewData(arrow.PrimitiveTypes.Int64, 3, []*memory.Buffer{nil, memory.NewBufferBytes(make([]byte, 16))}, nil, 0, 0), "value buffer of 16 bytes for 3 values of 8 bytes"},
		{"short validity", array.NewData(arrow.PrimitiveTypes.Int8, 9, []*memory.Buffer{memory.NewBufferBytes([]byte{0xff}), memory.NewBufferBytes(make([]byte, 9))}, nil, 1, 0), "validity bitmap of 1 bytes for 9 values"},
		{"good dictionary", withDict(i32(1, 0, 1), 3), ""},
		{"dictionary index out of range", withDict(i32(1, 2, 0), 3), "row 1: dictionary index 2 outside the dictionary of 2 values"},
		{"negative dictionary index", withDict(i32(-1), 1), "dictionary index -1"},
		{"null type", array.NewData(arrow.Null, 5, []*memory.Buffer{nil}, nil, 5, 0), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Data(tc.d)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzData builds arrays from arbitrary buffers (the shape a damaged file
// gives arrow-go) and checks that Data never panics, and that an array it
// accepts can have every value read without a panic.
func FuzzData(f *testing.F) {
	f.Add(byte(0), uint8(3), uint8(0), []byte{0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 6, 0, 0, 0}, []byte("abcdef"), []byte{})
	f.Add(byte(2), uint8(2), uint8(1), []byte{1, 0, 0, 0, 7, 0, 0, 0}, []byte("abcdef"), []byte{3})
	f.Add(byte(1), uint8(4), uint8(0), make([]byte, 32), []byte{}, []byte{0x0f})
	f.Fuzz(func(t *testing.T, kind byte, n, off uint8, b1, b2, valid []byte) {
		var validity *memory.Buffer
		if len(valid) > 0 {
			validity = memory.NewBufferBytes(valid)
		}
		nulls := array.UnknownNullCount
		if validity == nil {
			nulls = 0
		}
		var d arrow.ArrayData
		switch kind % 3 {
		case 0:
			d = array.NewData(arrow.BinaryTypes.String, int(n), []*memory.Buffer{validity, memory.NewBufferBytes(b1), memory.NewBufferBytes(b2)}, nil, nulls, int(off))
		case 1:
			d = array.NewData(arrow.PrimitiveTypes.Int64, int(n), []*memory.Buffer{validity, memory.NewBufferBytes(b1)}, nil, nulls, int(off))
		default:
			dict := array.NewData(arrow.BinaryTypes.String, 2, []*memory.Buffer{nil, i32(0, 1, 3), memory.NewBufferBytes([]byte("abc"))}, nil, 0, 0)
			d = array.NewDataWithDictionary(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
				int(n), []*memory.Buffer{validity, memory.NewBufferBytes(b1)}, nulls, int(off), dict)
		}
		if Data(d) != nil {
			return
		}
		// Accepted: reading every value must be safe.
		switch kind % 3 {
		case 0:
			a := array.NewStringData(d)
			for i := 0; i < a.Len(); i++ {
				_ = a.Value(i)
			}
		case 1:
			a := array.NewInt64Data(d)
			for i := 0; i < a.Len(); i++ {
				_ = a.Value(i)
			}
		default:
			a := array.NewDictionaryData(d)
			s := a.Dictionary().(*array.String)
			for i := 0; i < a.Len(); i++ {
				if a.IsValid(i) {
					_ = s.Value(a.GetValueIndex(i))
				}
			}
		}
	})
}

// BenchmarkRecordIndex checks a 1M-series index's string columns: the
// series ids and a dictionary-encoded attribute (what snapverify and
// snapinspect pay per open).
func BenchmarkRecordIndex(b *testing.B) {
	const n = 1 << 20
	ids := array.NewStringBuilder(memory.DefaultAllocator)
	codes := array.NewInt32Builder(memory.DefaultAllocator)
	for i := 0; i < n; i++ {
		ids.Append("PET.SERIES_" + strings.Repeat("X", i%7) + string(rune('A'+i%26)))
		codes.Append(int32(i % 3))
	}
	dict := array.NewData(arrow.BinaryTypes.String, 3, []*memory.Buffer{nil, i32(0, 1, 2, 3), memory.NewBufferBytes([]byte("abc"))}, nil, 0, 0)
	ca := codes.NewArray()
	da := array.NewDictionaryData(array.NewDataWithDictionary(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String},
		n, ca.Data().Buffers(), 0, 0, dict))
	sc := arrow.NewSchema([]arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}, {Name: "units", Type: da.DataType()}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{ids.NewArray(), da}, n)
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		if err := Record(rec); err != nil {
			b.Fatal(err)
		}
	}
}
