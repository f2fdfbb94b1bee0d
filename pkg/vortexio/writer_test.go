package vortexio

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// roundTrip writes the columns with our writer and reads them back.
func roundTrip(t *testing.T, sc *arrow.Schema, cols []arrow.Array, chunkRows int) *File {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, sc, WriterOptions{ChunkRows: chunkRows})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	if len(cols) > 0 {
		n = int64(cols[0].Len())
	}
	// Feed in uneven batches to exercise chunk boundaries.
	for a := int64(0); a < n; {
		b := min(n, a+777)
		parts := make([]arrow.Array, len(cols))
		for i, c := range cols {
			parts[i] = array.NewSlice(c, a, b)
		}
		rec := array.NewRecordBatch(sc, parts, b-a)
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		a = b
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestWriterRoundTripFixtures writes each fixture's source table with our
// writer and reads it back with our reader.
func TestWriterRoundTripFixtures(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			sc, cols := readIPCFile(t, "testdata/"+name+".arrow")
			for _, chunk := range []int{1000, 65536} {
				f := roundTrip(t, sc, cols, chunk)
				rec, err := f.ReadRange(nil, 0, f.NumRows())
				if err != nil {
					t.Fatal(err)
				}
				for i := range cols {
					sameArray(t, sc.Field(i).Name, cols[i], rec.Column(i))
				}
				rec.Release()
			}
		})
	}
}
