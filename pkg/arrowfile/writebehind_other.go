//go:build !linux

package arrowfile

import "os"

// Elsewhere the kernel's own writeback and Close's fsync do it all.
func startWriteback(*os.File, int64, int64) {}
func waitWriteback(*os.File, int64, int64)  {}
