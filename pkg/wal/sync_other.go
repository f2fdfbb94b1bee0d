//go:build !linux

package wal

import "os"

// syncData makes a file's written bytes durable.
func syncData(f *os.File) error { return f.Sync() }
