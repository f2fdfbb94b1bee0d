package vortexio

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// seriesBatch builds a table shaped like a snapshot's hot data file: series
// codes sorted ascending, each series a run of dates of one frequency
// (daily, weekly, monthly, quarterly, annual; so period jumps back at every
// series boundary), and a multiplicative random walk with 0 to 3 decimals,
// levels from ~1 to ~10^7 and ~0.5% nulls.
func seriesBatch(nseries int, seed uint64) arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(seed, seed))
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_code", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	codes := b.Field(0).(*array.Uint32Builder)
	periods := b.Field(1).(*array.Date32Builder)
	values := b.Field(2).(*array.Float64Builder)
	for s := 0; s < nseries; s++ {
		start := time.Date(2000+rng.IntN(20), time.Month(1+rng.IntN(12)), 1, 0, 0, 0, 0, time.UTC)
		freq := rng.IntN(5)
		n := 10 + rng.IntN(300)
		level := math.Pow(10, rng.Float64()*7)
		scale := math.Pow(10, float64(rng.IntN(4)))
		for i := 0; i < n; i++ {
			var d time.Time
			switch freq {
			case 0:
				d = start.AddDate(0, 0, i)
			case 1:
				d = start.AddDate(0, 0, 7*i)
			case 2:
				d = start.AddDate(0, i, 0)
			case 3:
				d = start.AddDate(0, 3*i, 0)
			default:
				d = start.AddDate(i, 0, 0)
			}
			codes.Append(uint32(s))
			periods.Append(arrow.Date32FromTime(d))
			level *= math.Exp(rng.NormFloat64() * 0.05)
			if rng.Float64() < 0.005 {
				values.AppendNull()
			} else {
				values.Append(math.Round(level*scale) / scale)
			}
		}
	}
	return b.NewRecordBatch()
}

func TestDeltaEncodeDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, B := range []int{8, 16, 32, 64} {
		for _, n := range []int{1, 100, 1024, 3000} {
			xs := make([]uint64, n)
			valid := make([]byte, bitmapLen(n))
			x := rng.Uint64()
			for i := range xs {
				if i%97 == 0 {
					x = rng.Uint64() // a jump, as at a series boundary
				}
				x += uint64(rng.IntN(50))
				xs[i] = x & maskBits(uint(B))
				if rng.IntN(20) != 0 {
					bitSet(valid, i)
				}
			}
			for _, v := range [][]byte{nil, valid} {
				bases, deltas := deltaEncode(xs, v, B)
				if len(deltas)%1024 != 0 || len(bases) != len(deltas)/1024*(1024/B) {
					t.Fatalf("B=%d n=%d: %d bases, %d deltas", B, n, len(bases), len(deltas))
				}
				for _, off := range []int{0, n / 3} {
					got, err := deltaDecode(bases, deltas, B, off, n-off)
					if err != nil {
						t.Fatal(err)
					}
					for i, g := range got {
						p := off + i
						if (v == nil || bitGet(v, p)) && g != xs[p] {
							t.Fatalf("B=%d n=%d off=%d row %d: %d, want %d", B, n, off, p, g, xs[p])
						}
					}
				}
			}
		}
	}
}

// TestDeltaLanesAreRuns pins down why delta pays on sorted runs: for 32-
// and 64-bit types a FastLanes lane is B consecutive rows, so a delta is
// the difference to the previous row.
func TestDeltaLanesAreRuns(t *testing.T) {
	for _, B := range []int{32, 64} {
		dl := deltaLayouts[B]
		for l := 0; l < dl.lanes; l++ {
			for r := 1; r < B; r++ {
				if dl.orig[l*B+r] != dl.orig[l*B+r-1]+1 {
					t.Fatalf("B=%d lane %d row %d: position %d after %d", B, l, r, dl.orig[l*B+r], dl.orig[l*B+r-1])
				}
			}
		}
	}
}

// TestUntransposeBits checks our inverse of the reference's validity
// transposition (transpose_bits sets output bit transpose(i) to input bit i).
func TestUntransposeBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := make([]byte, 256)
	for i := range in {
		in[i] = byte(rng.Uint32())
	}
	tr := make([]byte, 256)
	for b := 0; b < 2; b++ {
		for i := 0; i < 1024; i++ {
			if bitGet(in, b*1024+i) {
				bitSet(tr, b*1024+flTranspose(i))
			}
		}
	}
	if got := untransposeBits(tr, 2048); !bytes.Equal(got, in) {
		t.Fatal("untransposeBits does not invert transpose_bits")
	}
}

// TestBitPackedPatches: a few huge values must become patches rather than
// widen the bit width of every row.
func TestBitPackedPatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs := make([]uint64, 5000)
	for i := range xs {
		xs[i] = uint64(rng.IntN(16))
		if i%1000 == 7 {
			xs[i] = 1 << 40
		}
	}
	c := newPCol(primDType(U64, false), xs, nil)
	e := encodePrim(c, 0, noDelta|noDict)
	if e.enc != "fastlanes.bitpacked" || len(e.kids) != 2 {
		t.Fatalf("got %s with %d children, want patched fastlanes.bitpacked", e.enc, len(e.kids))
	}
	if s := e.size(); s > 5*128*4+200 {
		t.Errorf("size %d: patches did not keep the width at 4 bits", s)
	}
}

// TestSeriesTableEncodings writes a snapshot-shaped table, reads it back and
// checks the chooser found delta for the dates and kept the file small.
func TestSeriesTableEncodings(t *testing.T) {
	rec := seriesBatch(400, 9)
	defer rec.Release()
	for _, chunk := range []int{8192, 65536} {
		data := writeVortex(t, rec, chunk)
		f, err := Open(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.ReadRange(nil, 0, f.NumRows())
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < int(rec.NumCols()); i++ {
			sameArray(t, rec.ColumnName(i), rec.Column(i), got.Column(i))
		}
		got.Release()
		enc, err := f.Encodings()
		if err != nil {
			t.Fatal(err)
		}
		if enc["fastlanes.delta"] == 0 {
			t.Errorf("chunk %d: no fastlanes.delta in %v", chunk, enc)
		}
		cb := columnBytes(f)
		rows := float64(rec.NumRows())
		t.Logf("chunk %d: %d rows, %d bytes; bits/row: series_code %.2f period %.2f value %.2f; %v", chunk, rec.NumRows(), len(data),
			float64(cb["series_code"])*8/rows, float64(cb["period"])*8/rows, float64(cb["value"])*8/rows, enc)
		if p := float64(cb["period"]) * 8 / rows; p > 8 {
			t.Errorf("chunk %d: period takes %.1f bits/row", chunk, p)
		}
	}
}

// TestNullableDeltaRoundTrip forces delta on a nullable integer column (it
// is wrapped in vortex.masked) and reads it back.
func TestNullableDeltaRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n := 5000
	xs := make([]uint64, n)
	valid := make([]byte, bitmapLen(n))
	x := int64(1e12)
	for i := range xs {
		x += int64(rng.IntN(2001)) - 1000
		xs[i] = uint64(x)
		if rng.IntN(50) != 0 {
			bitSet(valid, i)
		}
	}
	dt := primDType(I64, true)
	e := deltaNode(newPCol(dt, xs, valid), 0)
	if e.enc != "vortex.masked" || e.kids[0].enc != "fastlanes.delta" {
		t.Fatalf("got %s(%s), want vortex.masked(fastlanes.delta)", e.enc, e.kids[0].enc)
	}
	v := decodeENode(t, e, dt, n)
	for i := 0; i < n; i++ {
		if v.isValid(i) != bitGet(valid, i) {
			t.Fatalf("row %d: valid %v", i, v.isValid(i))
		}
		if bitGet(valid, i) && raw64(v)[i] != xs[i] {
			t.Fatalf("row %d: %d, want %d", i, raw64(v)[i], xs[i])
		}
	}
}

// decodeENode serializes e with a Writer's segment code and decodes it.
func decodeENode(t *testing.T, e *enode, dt *DType, n int) *vec {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, arrow.NewSchema(nil, nil), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := w.off
	if _, err := w.writeArray(e); err != nil {
		t.Fatal(err)
	}
	if err := w.out.Flush(); err != nil {
		t.Fatal(err)
	}
	f := &File{arrayIDs: w.arrayIDs}
	seg := w.segs[0]
	b := buf.Bytes()[seg.offset : seg.offset+uint64(seg.length)]
	_ = start
	nd, err := f.parseFlat(b)
	if err != nil {
		t.Fatal(err)
	}
	d := decoder{maxRows: 1 << 30}
	v, err := d.decode(nd, dt, n)
	if err != nil {
		t.Fatal(err)
	}
	return v.materialize()
}

// TestCoreEdition: with CoreEdition the writer must not use the encodings
// outside edition core2025.06.0, and the data must still round-trip.
func TestCoreEdition(t *testing.T) {
	rec := seriesBatch(100, 3)
	defer rec.Release()
	data := writeVortexWith(t, rec, WriterOptions{CoreEdition: true})
	f, err := Open(bytes.NewReader(data), int64(len(data)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := f.Encodings()
	if err != nil {
		t.Fatal(err)
	}
	if enc["fastlanes.delta"]+enc["vortex.masked"] > 0 {
		t.Errorf("CoreEdition file uses %v", enc)
	}
	got, err := f.ReadRange(nil, 0, f.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i := 0; i < int(rec.NumCols()); i++ {
		sameArray(t, rec.ColumnName(i), rec.Column(i), got.Column(i))
	}
}
