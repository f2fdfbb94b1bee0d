package sortwrite

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
)

// recycler is the memory.Allocator of the page reader's Parquet readers:
// the buffers a column chunk's page reader decompresses into are freed
// when it closes, and the next chunk's reader takes them back instead of
// allocating (and the collector sweeping) a few MB per column chunk. Size
// classes are powers of two; memory is zeroed like Go's allocator's.
type recycler struct {
	classes [48]sync.Pool
}

var pageBuffers recycler

func class(size int) int { return bits.Len(uint(max(size, 4096) - 1)) }

func (r *recycler) Allocate(size int) []byte {
	c := class(size)
	if b, ok := r.classes[c].Get().(*[]byte); ok {
		buf := (*b)[:size]
		clear(buf)
		return buf
	}
	return make([]byte, size, 1<<c)
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

func (r *recycler) Free(b []byte) {
	c := class(cap(b))
	if cap(b) != 1<<c || c >= len(r.classes) {
		return // not one of ours: the collector's
	}
	b = b[:0]
	r.classes[c].Put(&b)
}

var _ memory.Allocator = (*recycler)(nil)

// pageReadProps are the reader properties of the page reader's files:
// recycled buffers, and column chunks streamed through a small buffer
// rather than copied whole into a fresh one (the pages are copied into
// the decompression buffer anyway).
func pageReadProps() *parquet.ReaderProperties {
	p := parquet.NewReaderProperties(&pageBuffers)
	p.BufferedStreamEnabled = true
	p.BufferSize = 64 << 10
	return p
}

// scratchPool recycles the page reader's level and index scratch.
var scratchPool = sync.Pool{New: func() any { return new(pageScratch) }}
