// Package bufpool is a memory.Allocator that takes freed buffers back:
// arrow-go's Parquet readers and writers allocate their page, level and
// index buffers afresh for every column chunk and grow them by
// reallocation; a Recycler hands the next chunk the buffers the last one
// freed instead of the collector's freshly zeroed memory.
package bufpool

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Recycler is a memory.Allocator over pools of buffers whose capacities
// are powers of two (at least 4 KiB). Its memory reads as zero like Go's
// allocator's: Allocate clears a recycled buffer, Reallocate keeps the
// bytes it had and clears the rest. Free takes back only buffers it
// handed out; others are left to the collector. The zero value is ready;
// it is safe for concurrent use.
type Recycler struct {
	classes [48]sync.Pool
}

var _ memory.Allocator = (*Recycler)(nil)

func class(size int) int { return bits.Len(uint(max(size, 4096) - 1)) }

// Allocate returns size zero bytes.
func (r *Recycler) Allocate(size int) []byte {
	buf := r.take(size)
	clear(buf)
	return buf
}

// take is a buffer of size bytes, a recycled one not cleared.
func (r *Recycler) take(size int) []byte {
	c := class(size)
	if c < len(r.classes) {
		if b, ok := r.classes[c].Get().(*[]byte); ok {
			return (*b)[:size]
		}
	}
	return make([]byte, size, 1<<c)
}

// Reallocate returns b resized to size bytes: b's bytes kept, the rest
// zero; b itself is taken back when the result does not fit in it.
func (r *Recycler) Reallocate(size int, b []byte) []byte {
	n := min(len(b), size)
	if size <= cap(b) {
		b = b[:size]
	} else {
		nb := r.take(size)
		copy(nb, b)
		r.Free(b)
		b = nb
	}
	clear(b[n:])
	return b
}

// Free takes b back for a later Allocate or Reallocate.
func (r *Recycler) Free(b []byte) {
	c := class(cap(b))
	if cap(b) != 1<<c || c >= len(r.classes) {
		return // not one of ours: the collector's
	}
	b = b[:0]
	r.classes[c].Put(&b)
}
