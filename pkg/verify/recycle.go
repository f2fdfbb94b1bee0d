package verify

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
)

// recycler is the memory.Allocator of the lake's Parquet readers: the
// buffers one row group is decoded and decompressed into are freed when
// it is done, and the next row group takes them back instead of
// allocating (and the collector sweeping) a few MB per column chunk.
// Size classes are powers of two; memory is zeroed like Go's allocator's.
type recycler struct {
	classes [48]sync.Pool
}

var lakeBuffers recycler

func bufClass(size int) int { return bits.Len(uint(max(size, 4096) - 1)) }

func (r *recycler) Allocate(size int) []byte {
	c := bufClass(size)
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
	c := bufClass(cap(b))
	if cap(b) != 1<<c || c >= len(r.classes) {
		return // not one of ours: the collector's
	}
	b = b[:0]
	r.classes[c].Put(&b)
}

var _ memory.Allocator = (*recycler)(nil)

// lakeReadProps are the reader properties of the lake's files: recycled
// buffers, and column chunks streamed through a small buffer rather than
// copied whole into a fresh one.
func lakeReadProps() *parquet.ReaderProperties {
	p := parquet.NewReaderProperties(&lakeBuffers)
	p.BufferedStreamEnabled = true
	p.BufferSize = 64 << 10
	return p
}
