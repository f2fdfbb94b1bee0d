package compact

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/query"
)

// sourceRecord is a record of rows: period, value (null every nullEvery
// rows from the first, never with 0) and a string column, sliced from
// offset on so that its arrays do not start at their buffers' start.
func sourceRecord(t *testing.T, rows, offset, nullEvery int) arrow.RecordBatch {
	t.Helper()
	mem := memory.DefaultAllocator
	pb, vb, sb := array.NewDate32Builder(mem), array.NewFloat64Builder(mem), array.NewStringBuilder(mem)
	defer pb.Release()
	defer vb.Release()
	defer sb.Release()
	for i := 0; i < offset+rows; i++ {
		pb.Append(arrow.Date32(i))
		if nullEvery > 0 && i%nullEvery == 0 {
			vb.AppendNull()
		} else {
			vb.Append(float64(i))
		}
		sb.Append(fmt.Sprint("s", i))
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	cols := []arrow.Array{pb.NewArray(), vb.NewArray(), sb.NewArray()}
	whole := array.NewRecordBatch(sc, cols, int64(offset+rows))
	for _, c := range cols {
		c.Release()
	}
	rec := whole.NewSlice(int64(offset), int64(offset+rows))
	whole.Release()
	t.Cleanup(rec.Release)
	return rec
}

// TestConcatRanges: ranges of records with and without nulls, sliced at
// odd offsets, come out as array.Concatenate of their slices gives them.
func TestConcatRanges(t *testing.T) {
	srcs := []arrow.RecordBatch{
		sourceRecord(t, 50, 0, 0),  // no nulls, no bitmap
		sourceRecord(t, 40, 3, 7),  // nulls, offset 3
		sourceRecord(t, 30, 13, 1), // every value null
		sourceRecord(t, 20, 5, 0),
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for trial := 0; trial < 500; trial++ {
		var runs []query.Piece
		var n int64
		for k := rng.IntN(6) + 1; k > 0; k-- {
			rec := srcs[rng.IntN(len(srcs))]
			lo := rng.Int64N(rec.NumRows())
			hi := lo + rng.Int64N(rec.NumRows()-lo+1)
			runs = append(runs, query.Piece{Rec: rec, Lo: lo, Hi: hi})
			n += hi - lo
		}
		for c := 0; c < 3; c++ {
			typ := srcs[0].Schema().Field(c).Type
			got, err := concatRanges(memory.DefaultAllocator, typ, c, runs, n)
			if err != nil {
				t.Fatal(err)
			}
			parts := make([]arrow.Array, len(runs))
			for i, p := range runs {
				parts[i] = array.NewSlice(p.Rec.Column(c), p.Lo, p.Hi)
			}
			want, err := array.Concatenate(parts, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			if !array.Equal(got, want) || got.NullN() != want.NullN() || got.Len() != int(n) {
				t.Fatalf("trial %d column %d: got %v (%d nulls)\nwant %v (%d nulls)", trial, c, got, got.NullN(), want, want.NullN())
			}
			if err := array.ValidateFull(got); err != nil {
				t.Fatalf("trial %d column %d: %v", trial, c, err)
			}
			got.Release()
			want.Release()
			for _, p := range parts {
				p.Release()
			}
		}
	}
}

// TestConcatRangesTypeMismatch: a range whose column has another type than
// the schema's is an error, not a copy of the wrong width.
func TestConcatRangesTypeMismatch(t *testing.T) {
	rec := sourceRecord(t, 4, 0, 0)
	if _, err := concatRanges(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64, 1, []query.Piece{{Rec: rec, Lo: 0, Hi: 4}}, 4); err == nil {
		t.Fatal("a float64 column concatenated as int64")
	}
}

// TestConcatRangesDictionary: ranges of dictionary columns whose records
// have different dictionaries come out as arrow unifies them, not as the
// indices copied (which would name the other record's values).
func TestConcatRangesDictionary(t *testing.T) {
	mem := memory.DefaultAllocator
	typ := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	sc := arrow.NewSchema([]arrow.Field{{Name: "flag", Type: typ, Nullable: true}}, nil)
	record := func(vals ...string) arrow.RecordBatch {
		b := array.NewDictionaryBuilder(mem, typ).(*array.BinaryDictionaryBuilder)
		defer b.Release()
		for _, v := range vals {
			if err := b.AppendString(v); err != nil {
				t.Fatal(err)
			}
		}
		col := b.NewArray()
		defer col.Release()
		rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(len(vals)))
		t.Cleanup(rec.Release)
		return rec
	}
	a, b := record("x", "y", "x"), record("z", "x")
	got, err := concatRanges(mem, typ, 0, []query.Piece{{Rec: a, Lo: 1, Hi: 3}, {Rec: b, Lo: 0, Hi: 2}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	d := got.(*array.Dictionary)
	var vals []string
	for i := 0; i < d.Len(); i++ {
		vals = append(vals, d.Dictionary().(*array.String).Value(d.GetValueIndex(i)))
	}
	if fmt.Sprint(vals) != "[y x z x]" {
		t.Fatalf("got %v, want [y x z x]", vals)
	}
}
