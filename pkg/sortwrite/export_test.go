package sortwrite

import "unsafe"

// drop unmaps the one slice v the arena handed out, early (the sort's
// scratch, garbage once the keys are sorted); a heap slice is left to the
// collector.
func drop[T uint32 | int32 | uint64 | byte](a *bigArena, v []T) {
	if a == nil || cap(v) == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(v))
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, b := range a.maps {
		if unsafe.Pointer(&b[0]) == p {
			unmapHuge(b)
			a.maps = append(a.maps[:i], a.maps[i+1:]...)
			return
		}
	}
}

// sortRows orders rows by (rank of their series code, period).
func sortRows(rank []uint32, codes []uint32, periods []int32) *order {
	return sortRowsInto(rank, codes, periods, nil, nil)
}
