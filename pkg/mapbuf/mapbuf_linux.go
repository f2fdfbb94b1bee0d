package mapbuf

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

const mapSupported = true

// mapping is an unlinked temporary file and its shared mapping.
type mapping struct {
	f    *os.File
	data []byte // the whole mapping
	size int    // the file's allocated size
}

// newMapping creates the file (named for a moment, then unlinked: nothing
// is left behind by a crash) in dir.
func newMapping(dir, prefix string) (*mapping, error) {
	f, err := os.CreateTemp(dir, prefix+"-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return &mapping{f: f}, nil
}

// resize makes the file size bytes, allocated on disk (so that a full disk
// is an error here, not a SIGBUS when a page is first written), and maps
// all of it. The old mapping stays until the new one is in place.
func (m *mapping) resize(size int) ([]byte, error) {
	if size > m.size {
		fd := int(m.f.Fd())
		err := syscall.Fallocate(fd, 0, int64(m.size), int64(size-m.size))
		if errors.Is(err, syscall.EOPNOTSUPP) {
			err = m.f.Truncate(int64(size)) // a file system without fallocate
		}
		if err != nil {
			return nil, fmt.Errorf("grow to %d bytes: %w", size, err)
		}
		m.size = size
	}
	data, err := syscall.Mmap(int(m.f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes: %w", size, err)
	}
	if m.data != nil {
		syscall.Munmap(m.data)
	}
	m.data = data
	return data, nil
}

func (m *mapping) close() error {
	var err error
	if m.data != nil {
		err = syscall.Munmap(m.data)
		m.data = nil
	}
	return errors.Join(err, m.f.Close())
}
