package vortexio

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// zonesBatch: sorted u32 codes, date32 periods, a nullable int64 with a
// run of nulls longer than a zone, negative int8s, and a float (no zone
// map).
func zonesBatch(n int) arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(11, 12))
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "code", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "q", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "small", Type: arrow.PrimitiveTypes.Int8},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	code := uint32(0)
	for i := 0; i < n; i++ {
		if rng.IntN(40) == 0 {
			code += 1 + uint32(rng.IntN(3))
		}
		b.Field(0).(*array.Uint32Builder).Append(code)
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32(int32(rng.IntN(20000)) - 5000))
		if i >= 130 && i < 420 {
			b.Field(2).(*array.Int64Builder).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(rng.Int64() - 1<<62)
		}
		b.Field(3).(*array.Int8Builder).Append(int8(rng.IntN(256) - 128))
		b.Field(4).(*array.Float64Builder).Append(rng.Float64())
	}
	return b.NewRecordBatch()
}

// TestZoneMapsExact: with ZoneRows, every integer and date column is a
// vortex.zoned layout whose zone table (decoded from the bytes the
// reference reads) holds, per ZoneRows rows, exactly the min and max of the
// non-null values (null for an all-null zone) and the null count; the
// float column has none; the file reads back equal to the input, whole and
// by ranges. Chunks are cut off the zone grid on purpose.
func TestZoneMapsExact(t *testing.T) {
	const zone = 100
	rec := zonesBatch(1234)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, rec.Schema(), WriterOptions{ChunkRows: 256, ZoneRows: zone})
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range [][2]int64{{0, 7}, {7, 333}, {333, 1234}} {
		part := rec.NewSlice(cut[0], cut[1])
		if err := w.Write(part); err != nil {
			t.Fatal(err)
		}
		part.Release()
		if err := w.Cut(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadRange(nil, 0, rec.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	if !array.RecordEqual(got, rec) {
		t.Fatal("file with zone maps reads back different rows")
	}
	got.Release()
	for _, r := range [][2]int64{{99, 101}, {250, 700}, {1200, 1234}} {
		got, err := f.ReadRange(nil, r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		exp := rec.NewSlice(r[0], r[1])
		if !array.RecordEqual(got, exp) {
			t.Errorf("rows %v differ", r)
		}
		got.Release()
		exp.Release()
	}
	n := int(rec.NumRows())
	for c, l := range f.Root().Children {
		name := rec.ColumnName(c)
		dt := f.DType().Fields[c]
		if !zoneable(dt) {
			if l.ID == "vortex.zoned" {
				t.Errorf("%s: zone map on a %s column", name, dt)
			}
			continue
		}
		if l.ID != "vortex.zoned" || len(l.Children) != 2 || l.Children[0].RowCount != uint64(n) {
			t.Fatalf("%s: layout %s, want vortex.zoned over the data", name, l.ID)
		}
		if !bytes.Equal(l.Metadata, zonedMetadata(zone)) {
			t.Errorf("%s: zoned metadata %x", name, l.Metadata)
		}
		zl := l.Children[1]
		nz := (n + zone - 1) / zone
		if zl.ID != "vortex.flat" || zl.RowCount != uint64(nz) {
			t.Fatalf("%s: zone table %s of %d rows, want flat of %d", name, zl.ID, zl.RowCount, nz)
		}
		seg, err := f.segment(zl.Segments[0])
		if err != nil {
			t.Fatal(err)
		}
		nd, err := f.parseFlat(seg)
		if err != nil {
			t.Fatal(err)
		}
		d := decoder{maxRows: 1 << 20}
		zt, err := d.decode(nd, zoneTableDType(dt), nz)
		if err != nil {
			t.Fatalf("%s: zone table: %v", name, err)
		}
		maxs, _ := zt.kids[0].materialize().ints()
		mins, _ := zt.kids[1].materialize().ints()
		nulls, _ := zt.kids[2].ints()
		col := rec.Column(c)
		vals, _ := mustVec(t, col, dt).ints()
		for z := 0; z < nz; z++ {
			lo, hi := z*zone, min(n, (z+1)*zone)
			var nn []int64
			nullN := 0
			for i := lo; i < hi; i++ {
				if col.IsNull(i) {
					nullN++
				} else {
					nn = append(nn, vals[i])
				}
			}
			order := func(a, b int64) int {
				if storage(dt).PType.isSigned() {
					return cmp.Compare(a, b)
				}
				return cmp.Compare(uint64(a), uint64(b))
			}
			label := fmt.Sprintf("%s zone %d", name, z)
			if uint64(nulls[z]) != uint64(nullN) {
				t.Errorf("%s: null_count %d, want %d", label, nulls[z], nullN)
			}
			if len(nn) == 0 {
				if zt.kids[0].isValid(z) || zt.kids[1].isValid(z) {
					t.Errorf("%s: all null, but min/max are set", label)
				}
				continue
			}
			if !zt.kids[0].isValid(z) || !zt.kids[1].isValid(z) {
				t.Fatalf("%s: min/max null", label)
			}
			if want := slices.MinFunc(nn, order); mins[z] != want {
				t.Errorf("%s: min %d, want %d", label, mins[z], want)
			}
			if want := slices.MaxFunc(nn, order); maxs[z] != want {
				t.Errorf("%s: max %d, want %d", label, maxs[z], want)
			}
		}
	}
}

func mustVec(t *testing.T, a arrow.Array, dt *DType) *vec {
	v, err := fromArrow(a, dt)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNoZoneMapsByDefault: without ZoneRows the layout is as before
// (struct → chunked → flat, no vortex.zoned id in the footer).
func TestNoZoneMapsByDefault(t *testing.T) {
	rec := zonesBatch(500)
	defer rec.Release()
	data := writeVortexWith(t, rec, WriterOptions{ChunkRows: 128})
	if bytes.Contains(data, []byte("vortex.zoned")) {
		t.Fatal("zoned layout written without ZoneRows")
	}
}
