package vortexio

import "fmt"

// Cut ends the current chunk at the rows written so far, so that the next
// row begins a new chunk (of every column). A caller that knows where its
// reads begin and end (the cold tier: one series' rows) cuts there, and a
// read of such a range decodes only its own chunks: no neighbouring rows.
// Chunks still close on their own every WriterOptions.ChunkRows rows, so a
// long run between cuts stays bounded. Cutting with nothing buffered is a
// no-op.
func (w *Writer) Cut() error {
	if w.closed {
		return fmt.Errorf("vortexio: cut after close")
	}
	return w.flush(true)
}

// ChunkRows is the row count of each chunk written so far (of the first
// column: every column is cut at the same rows), in file order.
func (w *Writer) ChunkRows() []uint64 {
	if len(w.chunks) == 0 {
		return nil
	}
	out := make([]uint64, len(w.chunks[0]))
	for i, c := range w.chunks[0] {
		out[i] = c.rows
	}
	return out
}
