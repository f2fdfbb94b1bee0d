package sortwrite

import "syscall"

// mapHuge maps size zeroed bytes, asking for transparent huge pages (the
// advice is best effort: without THP the mapping still works, in 4 KiB
// pages).
func mapHuge(size int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, false
	}
	syscall.Madvise(b, 14 /* MADV_HUGEPAGE */)
	return b, true
}

func unmapHuge(b []byte) { syscall.Munmap(b) }
