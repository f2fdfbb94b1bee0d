package wal

import (
	"os"
	"syscall"
)

// syncData makes a file's written bytes durable. fdatasync is enough: it
// skips the timestamps, and flushes a size change with the data when there
// is one (a version-1 append); into a preallocated segment there is none.
func syncData(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
