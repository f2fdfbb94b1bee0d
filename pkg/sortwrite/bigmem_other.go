//go:build !linux

package sortwrite

// mapHuge is Linux only; elsewhere the arena allocates on the Go heap.
func mapHuge(size int) ([]byte, bool) { return nil, false }

func unmapHuge(b []byte) {}
