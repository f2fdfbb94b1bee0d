package snapshot

// Faults on access. A published snapshot's files never change (invariant
// 2), but an operator's restore, a cp over a file or a partial rsync can
// still truncate or rewrite one under a process that maps it. Reading a
// page past the new end of a mapped file is SIGBUS, which kills a Go
// program unless the goroutine set runtime/debug.SetPanicOnFault, in which
// case it is a panic whose value carries the faulting address. These
// helpers let such a caller (the server) say which snapshot the fault was
// in, and notice a changed file before touching it.

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// fileStamp is what a stat of a snapshot file said at open.
type fileStamp struct {
	rel   string // as the manifest lists it
	size  int64
	mtime int64 // UnixNano
	ino   uint64
}

// stampFiles records the data and index files' stat at open (after the
// size checks, so a later difference is a change made while open).
func (s *Snapshot) stampFiles(files ...manifest.File) {
	for _, f := range files {
		if st, err := os.Stat(s.Dataset.Path(f.Path)); err == nil {
			s.stamps = append(s.stamps, fileStamp{rel: f.Path, size: st.Size(), mtime: st.ModTime().UnixNano(), ino: inode(st)})
		}
	}
}

// FilesChanged stats the snapshot's mapped files and reports, as an error
// marked corrupt naming the file, one that is gone, has another size than
// its manifest records, or was modified or replaced since open. It costs a
// stat per file, so a server can call it every reload poll. nil: as opened.
func (s *Snapshot) FilesChanged() error {
	for _, st := range s.stamps {
		fi, err := os.Stat(s.Dataset.Path(st.rel))
		switch {
		case err != nil:
			return corrupt.InFile(st.rel, fmt.Errorf("%s: %w", st.rel, err))
		case fi.Size() != st.size:
			return corrupt.InFile(st.rel, fmt.Errorf("%s changed while served: %d bytes, was %d", st.rel, fi.Size(), st.size))
		case fi.ModTime().UnixNano() != st.mtime:
			return corrupt.InFile(st.rel, fmt.Errorf("%s modified while served (mtime %s)", st.rel, fi.ModTime().UTC().Format("2006-01-02T15:04:05.000Z")))
		case inode(fi) != st.ino:
			return corrupt.InFile(st.rel, fmt.Errorf("%s replaced while served (another inode)", st.rel))
		}
	}
	return nil
}

// Contains reports whether addr lies inside one of the snapshot's mapped
// files: the address of a fault (runtime.Error's Addr) tells which
// snapshot's files are damaged.
func (s *Snapshot) Contains(addr uintptr) bool {
	for _, m := range [][]byte{s.mappedData(), s.mappedIndex()} {
		if len(m) == 0 {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if addr >= lo && addr < lo+uintptr(len(m)) {
			return true
		}
	}
	return false
}

func (s *Snapshot) mappedData() []byte {
	if s.data == nil {
		return nil
	}
	return s.data.Data
}

func (s *Snapshot) mappedIndex() []byte {
	if s.index == nil {
		return nil
	}
	return s.index.Data
}
