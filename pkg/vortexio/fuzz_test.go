package vortexio

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// FuzzReader opens arbitrary bytes as a Vortex file and reads every column
// of every row: any panic, hang or runaway allocation is a bug. The seed
// corpus is the reference-written fixtures. Run it with a short
// -fuzzminimizetime (e.g. 5s): minimising a 30 KB seed-derived input takes
// the default 60 s, during which the exec counter stands still.
func FuzzReader(f *testing.F) {
	for _, name := range fixtureNames(f) {
		b, err := os.ReadFile("testdata/" + name + ".vortex")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// Plus a file of our own writer, so the corpus holds fastlanes.delta,
	// vortex.masked and patched bit-packing.
	rec := seriesBatch(8, 1)
	f.Add(writeVortex(f, rec, 1024))
	rec.Release()
	f.Fuzz(func(t *testing.T, data []byte) {
		vf, err := Open(bytes.NewReader(data), int64(len(data)), Options{MaxChunkRows: 1 << 16, MaxSegmentBytes: 1 << 22})
		if err != nil {
			return
		}
		var buf bytes.Buffer
		_ = Describe(&buf, vf)
		budget := int64(1 << 18)
		for a := int64(0); a < vf.NumRows() && budget > 0; a += 4096 {
			b := min(a+4096, vf.NumRows())
			budget -= b - a
			rec, err := vf.ReadRange(nil, a, b)
			if err != nil {
				return
			}
			if rec.NumRows() != b-a {
				t.Fatalf("batch of %d rows, want %d", rec.NumRows(), b-a)
			}
			rec.Release()
		}
	})
}

// FuzzWriterRoundTrip: whatever the rows, what our writer writes our reader
// reads back equal (write → read → equal), for every chunk size and both
// editions. The bytes are cut into 8-byte words, one row each, shaped into
// the columns the writer's encoders compete for: sorted codes with runs
// (run-end, dict, bit-packing), per-run ascending dates (delta, FoR),
// nullable decimal-like and raw floats (ALP, ALP-RD, patches, NaNs),
// integers of every width (bit-packing with patches), a nullable
// low-cardinality string, a bool and a struct.
func FuzzWriterRoundTrip(f *testing.F) {
	seed := make([]byte, 8*3000)
	for i := range seed {
		seed[i] = byte(i*7 + i/13)
	}
	f.Add(seed, uint16(1024), false)
	f.Add(seed[:8*5], uint16(1), true)
	f.Add([]byte{}, uint16(8192), false)
	f.Add(bytes.Repeat([]byte{0}, 8*2048), uint16(1000), false)
	f.Add(bytes.Repeat([]byte{0xff}, 8*700), uint16(333), true)
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16, core bool) {
		const maxRows = 1 << 14
		n := min(len(data)/8, maxRows)
		sc, cols := fuzzColumns(data[:8*n])
		chunkRows := 1 + int(chunk)%9000
		zoneRows := (int(chunk) / 7) % 3 * 500 // 0 (no zone maps), 500 or 1000
		var buf bytes.Buffer
		w, err := NewWriter(&buf, sc, WriterOptions{ChunkRows: chunkRows, CoreEdition: core, Workers: 2, ZoneRows: zoneRows})
		if err != nil {
			t.Fatal(err)
		}
		// Two batches of uneven size, to cross chunk boundaries.
		cut := int64(n / 3)
		for _, r := range [][2]int64{{0, cut}, {cut, int64(n)}} {
			parts := make([]arrow.Array, len(cols))
			for i, c := range cols {
				parts[i] = array.NewSlice(c, r[0], r[1])
			}
			rec := array.NewRecordBatch(sc, parts, r[1]-r[0])
			if err := w.Write(rec); err != nil {
				t.Fatalf("write rows %d–%d: %v", r[0], r[1], err)
			}
			rec.Release()
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		vf, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()), Options{})
		if err != nil {
			t.Fatalf("our reader refuses our writer's %d-byte file: %v", buf.Len(), err)
		}
		if vf.NumRows() != int64(n) {
			t.Fatalf("file has %d rows, wrote %d", vf.NumRows(), n)
		}
		if n == 0 {
			return
		}
		rec, err := vf.ReadRange(nil, 0, int64(n))
		if err != nil {
			t.Fatalf("read back: %v", err)
		}
		defer rec.Release()
		for i := range cols {
			if !sameArray(t, sc.Field(i).Name, cols[i], rec.Column(i)) {
				t.FailNow()
			}
		}
		// A range read inside the file decodes the same rows.
		a, b := int64(n/4), int64(n/4+n/2)
		sub, err := vf.ReadRange(nil, a, b)
		if err != nil {
			t.Fatalf("read rows %d–%d: %v", a, b, err)
		}
		defer sub.Release()
		for i := range cols {
			want := array.NewSlice(cols[i], a, b)
			ok := sameArray(t, sc.Field(i).Name+" (range)", want, sub.Column(i))
			want.Release()
			if !ok {
				t.FailNow()
			}
		}
	})
}

// fuzzColumns shapes 8-byte words into one row each of the fuzz columns.
func fuzzColumns(data []byte) (*arrow.Schema, []arrow.Array) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "code", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "raw", Type: arrow.PrimitiveTypes.Float64},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "units", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	code, day := uint32(0), int32(15000)
	units := []string{"MWh", "GWh", "", "thousand barrels", "€/MWh", "x"}
	for i := 0; i+8 <= len(data); i += 8 {
		w := binary.LittleEndian.Uint64(data[i:])
		lo := byte(w)
		if lo&3 == 0 { // a new series: the code goes up, dates restart
			code += uint32(1 + (w>>2)&1)
			day = 15000 + int32((w>>8)&0x3ff)
		} else {
			day += 1 + int32((w>>4)&0x1f)
		}
		b.Field(0).(*array.Uint32Builder).Append(code)
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32(day))
		if lo&0x70 == 0x70 {
			b.Field(2).(*array.Float64Builder).AppendNull()
		} else {
			b.Field(2).(*array.Float64Builder).Append(float64(int64(w>>24)%1000003) / 100)
		}
		b.Field(3).(*array.Float64Builder).Append(math.Float64frombits(w))
		if lo == 0x55 {
			b.Field(4).(*array.Int64Builder).AppendNull()
		} else {
			b.Field(4).(*array.Int64Builder).Append(int64(w) >> (w >> 58))
		}
		if u := int(w>>32) % (len(units) + 1); u == len(units) {
			b.Field(5).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(5).(*array.StringBuilder).Append(units[u])
		}
		switch (w >> 40) & 3 {
		case 0:
			b.Field(6).(*array.BooleanBuilder).AppendNull()
		default:
			b.Field(6).(*array.BooleanBuilder).Append((w>>42)&1 == 1)
		}
		// A null struct row: arrow-go's builder appends a null to every
		// child itself (so child "a" is nullable).
		sb := b.Field(7).(*array.StructBuilder)
		if (w>>44)&7 == 0 {
			sb.AppendNull()
			continue
		}
		sb.Append(true)
		sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(w >> 48))
		if (w>>47)&1 == 1 {
			sb.FieldBuilder(1).(*array.StringBuilder).AppendNull()
		} else {
			sb.FieldBuilder(1).(*array.StringBuilder).Append(units[int(w>>50)%len(units)])
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		cols[i] = rec.Column(i)
		cols[i].Retain()
	}
	return sc, cols
}
