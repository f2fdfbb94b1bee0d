package wal

import (
	"os"
	"syscall"
)

// syncData makes a file's written bytes durable. fdatasync is enough for an
// append: it flushes the size change with the data, and skips the timestamps.
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
