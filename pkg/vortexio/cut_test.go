package vortexio

import (
	"bytes"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestCut: chunks end where Cut is called and every ChunkRows rows in
// between; the file reads back the same rows, and a range read inside one
// cut chunk equals the slice of the input.
func TestCut(t *testing.T) {
	rec := seriesBatch(30, 5)
	defer rec.Release()
	n := rec.NumRows()
	cuts := []int64{0, 7, 7, 200, 201, 1500, n}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, rec.Schema(), WriterOptions{ChunkRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for i := 1; i < len(cuts); i++ {
		a, b := cuts[i-1], cuts[i]
		part := rec.NewSlice(a, b)
		if err := w.Write(part); err != nil {
			t.Fatal(err)
		}
		part.Release()
		if err := w.Cut(); err != nil {
			t.Fatal(err)
		}
		for left := b - a; left > 0; left -= 1000 {
			want = append(want, uint64(min(left, 1000)))
		}
	}
	if got := w.ChunkRows(); !slices.Equal(got, want) {
		t.Fatalf("chunks %v, want %v", got, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, n}, {7, 200}, {200, 201}, {201, 1500}, {1500, n}} {
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
	if err := w.Cut(); err == nil {
		t.Error("Cut after Close succeeded")
	}
}
