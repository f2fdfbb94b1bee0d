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

// Kept is a memory.Allocator for one job's buffers (a compaction's data
// batches): like Recycler, but it keeps at most Keep freed buffers of each
// size in a list of its own, which no collection empties, so a job that
// frees a batch's buffers as it allocates the next one's reuses them for
// its whole life, and the heap does not grow with the number of batches.
// The buffers go with the Kept. Memory reads as zero; safe for concurrent
// use (a batch is allocated on one goroutine and freed on another).
type Kept struct {
	Keep int // buffers kept a size; 0: 16

	mu   sync.Mutex
	free [48][][]byte
}

var _ memory.Allocator = (*Kept)(nil)

// Allocate returns size zero bytes.
func (k *Kept) Allocate(size int) []byte {
	buf := k.take(size)
	clear(buf)
	return buf
}

func (k *Kept) take(size int) []byte {
	c := class(size)
	if c < len(k.free) {
		k.mu.Lock()
		if n := len(k.free[c]); n > 0 {
			b := k.free[c][n-1]
			k.free[c] = k.free[c][:n-1]
			k.mu.Unlock()
			return b[:size]
		}
		k.mu.Unlock()
	}
	return make([]byte, size, 1<<c)
}

// Reallocate returns b resized to size bytes: b's bytes kept, the rest
// zero; b itself is taken back when the result does not fit in it.
func (k *Kept) Reallocate(size int, b []byte) []byte {
	n := min(len(b), size)
	if size <= cap(b) {
		b = b[:size]
	} else {
		nb := k.take(size)
		copy(nb, b)
		k.Free(b)
		b = nb
	}
	clear(b[n:])
	return b
}

// Free keeps b for a later Allocate when fewer than Keep of its size are
// kept; otherwise, or when b is not one it handed out, b is the
// collector's.
func (k *Kept) Free(b []byte) {
	c := class(cap(b))
	if cap(b) != 1<<c || c >= len(k.free) {
		return
	}
	keep := k.Keep
	if keep <= 0 {
		keep = 16
	}
	k.mu.Lock()
	if len(k.free[c]) < keep {
		k.free[c] = append(k.free[c], b[:0])
	}
	k.mu.Unlock()
}
