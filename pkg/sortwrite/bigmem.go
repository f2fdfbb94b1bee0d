package sortwrite

import (
	"sync"
	"unsafe"
)

// bigArena holds the in-memory build's large column arrays (the stores,
// the periods, the sort keys: about 40 bytes a row) in
// their own anonymous mappings advised for transparent huge pages, where
// the system has them (Linux, THP "madvise" or "always"). On the Go heap
// those arrays are faulted in 4 KiB at a time: at 15M rows some 300,000
// page faults, a quarter of the build's CPU time spent in the kernel, and
// the random gathers and radix scatters then miss the TLB on nearly every
// row. With 2 MiB pages both shrink by ~500×.
//
// Memory from the arena is zeroed, holds no pointers, and is unmapped by
// release, after which no slice it handed out may be used: Build and
// Rebuild release it once everything read from the stores has been
// copied out. Slices below bigMin bytes, and every slice where mapping
// fails or is not supported, come from the Go heap (release leaves those
// to the collector). A nil arena allocates on the heap.
type bigArena struct {
	mu   sync.Mutex
	maps [][]byte
}

// bigMin is the smallest slice the arena maps (a variable so tests can map
// every slice).
var bigMin = 4 << 20

// bigSlice returns n zeroed elements of a pointer-free T.
func bigSlice[T uint32 | int32 | uint64 | byte](a *bigArena, n int) []T {
	var z T
	size := n * int(unsafe.Sizeof(z))
	if a == nil || size < bigMin || size == 0 {
		return make([]T, n)
	}
	b, ok := mapHuge(size)
	if !ok {
		return make([]T, n)
	}
	a.mu.Lock()
	a.maps = append(a.maps, b)
	a.mu.Unlock()
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// release unmaps everything the arena mapped.
func (a *bigArena) release() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, b := range a.maps {
		unmapHuge(b)
	}
	a.maps = nil
}
