package compact

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// batchBuffers is the allocator of an untiered compaction's data batches:
// a batch's column buffers (a few MiB each at 1M rows) come back when the
// writer releases the batch, and the next batch takes them instead of the
// Go heap allocating new ones and the collector sweeping the old. Without
// it every batch leaves its buffers to the collector, and the heap's free
// but not yet returned spans grow with the number of batches, that is with
// the base. Sizes are rounded up to powers of two; memory is zeroed, as
// Go's allocator's is. At most keep buffers a size are kept.
//
// A tiered compaction does not use it: the cold writer may keep slices of
// a batch past its release.
type batchBuffers struct {
	mu   sync.Mutex // Allocate runs on the merge's goroutine, Free on the writer's
	free [48][][]byte
}

const keepBuffers = 16

func sizeClass(size int) int { return bits.Len(uint(max(size, 4096) - 1)) }

func (a *batchBuffers) Allocate(size int) []byte {
	c := sizeClass(size)
	a.mu.Lock()
	if n := len(a.free[c]); n > 0 {
		b := a.free[c][n-1]
		a.free[c] = a.free[c][:n-1]
		a.mu.Unlock()
		b = b[:size]
		clear(b)
		return b
	}
	a.mu.Unlock()
	return make([]byte, size, 1<<c)
}

func (a *batchBuffers) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

func (a *batchBuffers) Free(b []byte) {
	c := sizeClass(cap(b))
	if cap(b) != 1<<c || c >= len(a.free) {
		return // not one of ours: the collector's
	}
	a.mu.Lock()
	if len(a.free[c]) < keepBuffers {
		a.free[c] = append(a.free[c], b[:0])
	}
	a.mu.Unlock()
}

var _ memory.Allocator = (*batchBuffers)(nil)
