package vortexio

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestRangeDecodeOwnWriter: a range read of the writer's files (delta,
// masked, alp with patches, dict, runend, sequence, bitpacked with patches:
// the encodings that decode a range without the rest of the chunk) equals
// the slice of the input, for ranges inside one 1024-row block, across
// blocks and across chunks, with and without CoreEdition.
func TestRangeDecodeOwnWriter(t *testing.T) {
	rec := seriesBatch(80, 9)
	defer rec.Release()
	n := rec.NumRows()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, opt := range []WriterOptions{{ChunkRows: 2500}, {ChunkRows: 4096, CoreEdition: true}, {ChunkRows: 700}} {
		data := writeVortexWith(t, rec, opt)
		f, err := Open(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ranges := [][2]int64{{0, n}, {0, 1}, {n - 1, n}, {1023, 1025}, {1024, 2048}, {1000, 3000}, {5, 5}}
		for k := 0; k < 200; k++ {
			a := rng.Int64N(n)
			ranges = append(ranges, [2]int64{a, a + rng.Int64N(min(n-a, 1500)+1)})
		}
		for _, r := range ranges {
			got, err := f.ReadRange(nil, r[0], r[1])
			if err != nil {
				t.Fatalf("%+v rows %v: %v", opt, r, err)
			}
			exp := rec.NewSlice(r[0], r[1])
			for c := 0; c < int(rec.NumCols()); c++ {
				if !array.Equal(got.Column(c), exp.Column(c)) {
					t.Fatalf("%+v rows %v column %s differ", opt, r, rec.ColumnName(c))
				}
			}
			got.Release()
			exp.Release()
		}
	}
}

// TestRangeDecodeEqualsWhole: for every fixture and every column, a range
// decode of a flat chunk equals the whole decode sliced (what the read
// did before range decoding), at block edges and at random.
func TestRangeDecodeEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, name := range fixtureNames(t) {
		f, err := OpenFile("testdata/" + name + ".vortex")
		if err != nil {
			t.Fatal(err)
		}
		var flats []*Layout
		var walk func(l *Layout)
		walk = func(l *Layout) {
			if l.ID == "vortex.flat" {
				flats = append(flats, l)
			}
			kids := l.Children
			if l.ID == "vortex.zoned" || l.ID == "vortex.stats" {
				kids = kids[:1]
			}
			for _, k := range kids {
				walk(k)
			}
		}
		walk(f.Root())
		for _, l := range flats {
			n := int(l.RowCount)
			if n == 0 {
				continue
			}
			seg, err := f.segment(l.Segments[0])
			if err != nil {
				t.Fatal(err)
			}
			nd, err := f.parseFlat(seg)
			if err != nil {
				t.Fatal(err)
			}
			d := decoder{maxRows: f.opts.MaxChunkRows}
			whole, err := d.decode(nd, l.DType, n)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			wa, err := whole.toArrow()
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 12; k++ {
				a := rng.IntN(n)
				b := a + rng.IntN(n-a+1)
				if k == 0 {
					a, b = min(1023, n-1), min(1025, n)
				}
				v, err := d.decodeRange(nd, l.DType, n, a, b)
				if err != nil {
					t.Fatalf("%s %s rows [%d,%d): %v", name, nd, a, b, err)
				}
				ga, err := v.toArrow()
				if err != nil {
					t.Fatal(err)
				}
				ws := array.NewSlice(wa, int64(a), int64(b))
				sameArray(t, fmt.Sprintf("%s %s [%d:%d]", name, nd, a, b), ws, ga)
				ws.Release()
				ga.Release()
			}
			wa.Release()
		}
		f.Close()
	}
}
