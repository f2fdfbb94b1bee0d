package vortexio

import (
	"bytes"
	"os"
	"testing"
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
