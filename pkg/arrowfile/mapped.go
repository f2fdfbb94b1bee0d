package arrowfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/fileutil"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// ErrChecksum marks a file whose bytes do not match the expected checksum.
// Such an error is also a corruption error (corrupt.Is).
var ErrChecksum = errors.New("checksum mismatch")

// Mapped is an Arrow IPC file mapped read-only into memory. Record batches
// read from it point straight into the mapping, so opening costs a footer
// parse, not a read of the data. The mapping must outlive every array read
// from it: callers reference-count their handles and Close last.
type Mapped struct {
	Path   string
	Data   []byte
	Reader *ipc.FileReader
}

// Map maps path and parses the IPC footer. An empty or malformed file is
// an error marked corrupt (see package corrupt), never a panic. The file
// must not contain dictionaries.
func Map(path string) (*Mapped, error) { return open(path, true, "") }

// MapVerified is Map after checking the mapped bytes against checksum (a
// FormatChecksum string): the file is hashed where it is mapped, once, and
// before any of it is parsed.
func MapVerified(path, checksum string) (*Mapped, error) { return open(path, true, checksum) }

// Load maps path but reads record batches through arrow-go's copying
// reader, so files with dictionary-encoded fields (the index sidecar) open
// too. Batches read from it live on the heap; the cost is one copy of each
// batch read, proportional to the file's size, not to the data file's.
func Load(path string) (*Mapped, error) { return open(path, false, "") }

// LoadVerified is Load after checking the bytes against checksum (see
// MapVerified).
func LoadVerified(path, checksum string) (*Mapped, error) { return open(path, false, checksum) }

func open(path string, zeroCopy bool, checksum string) (m *Mapped, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < 12 {
		return nil, fmt.Errorf("map %s: %w", path, corrupt.Errorf("%d bytes is too small for an Arrow IPC file", size))
	}
	if size != int64(int(size)) {
		return nil, fmt.Errorf("map %s: file too large to map", path)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	// Opening reads the footer, a few pages at the end: without this hint
	// the fault reads half a readahead window before them (4 MiB of an
	// 8 MiB window). The mapping goes back to normal readahead when open
	// is done.
	advise(data, AccessRandom)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("open %s: %w", path, corrupt.Errorf("malformed Arrow IPC file: %v", r))
		}
		if err != nil {
			syscall.Munmap(data)
			m = nil
			return
		}
		advise(data, AccessNormal)
	}()
	if checksum != "" {
		// One pass over every byte: read ahead far, then back to normal.
		advise(data, AccessSequential)
		h := fileutil.NewHash()
		h.Write(data)
		advise(data, AccessRandom)
		if got := fileutil.FormatChecksum(h); got != checksum {
			return nil, fmt.Errorf("open %s: %w", path, corrupt.Errorf("checksum %s, want %s: %w", got, checksum, ErrChecksum))
		}
	}
	if err := checkFooterBytesOf(data); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var rd *ipc.FileReader
	if zeroCopy {
		rd, err = ipc.NewMappedFileReader(data, ipc.WithBodySizeLimit(BodySizeLimit))
	} else {
		rd, err = ipc.NewFileReader(bytes.NewReader(data), ipc.WithBodySizeLimit(BodySizeLimit))
	}
	if err != nil {
		// The footer passed CheckFooter, so what arrow-go refuses is malformed.
		return nil, fmt.Errorf("open %s: %w", path, corrupt.Mark(err))
	}
	return &Mapped{Path: path, Data: data, Reader: rd}, nil
}

// Batch reads record batch i; its buffers alias the mapping. A malformed
// batch is a corruption error, never a panic.
func (m *Mapped) Batch(i int) (rec arrow.RecordBatch, err error) {
	defer func() {
		if r := recover(); r != nil {
			rec, err = nil, fmt.Errorf("%s: batch %d: %w", m.Path, i, corrupt.Errorf("malformed record batch: %v", r))
		}
	}()
	if i < 0 || i >= m.Reader.NumRecords() {
		return nil, fmt.Errorf("%s: batch %d out of range [0,%d)", m.Path, i, m.Reader.NumRecords())
	}
	rec, err = m.Reader.RecordBatchAt(i)
	if err != nil {
		return nil, fmt.Errorf("%s: batch %d: %w", m.Path, i, corrupt.Mark(err))
	}
	return rec, nil
}

// Close unmaps the file. No array read from it may be used afterwards.
func (m *Mapped) Close() error {
	if m == nil || m.Data == nil {
		return nil
	}
	err := errors.Join(m.Reader.Close(), syscall.Munmap(m.Data))
	m.Data = nil
	return err
}

// checkFooterBytesOf runs CheckFooter's checks over a mapped file, on the
// footer where it lies: no copy (an index's footer holds its code columns'
// values, FORMAT.md §4, so it can be hundreds of KiB).
func checkFooterBytesOf(data []byte) error {
	const tail = 10
	size := int64(len(data))
	if size < int64(len(magic))+tail {
		return corrupt.Errorf("%d bytes is too small for an Arrow IPC file", size)
	}
	n, err := footerLength(data[size-tail:], size)
	if err != nil {
		return err
	}
	return checkFooterBytes(data[size-tail-n:size-tail], size-tail-n)
}
