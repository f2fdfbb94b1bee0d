//go:build !linux

package mapbuf

import "errors"

// Elsewhere than Linux every buffer is on the Go heap.
const mapSupported = false

type mapping struct{}

func newMapping(dir, prefix string) (*mapping, error) {
	return nil, errors.New("file-backed buffers are Linux only")
}

func (m *mapping) resize(size int) ([]byte, error) {
	return nil, errors.New("file-backed buffers are Linux only")
}

func (m *mapping) close() error { return nil }
