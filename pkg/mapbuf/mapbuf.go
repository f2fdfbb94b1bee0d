// Package mapbuf holds growable byte buffers whose large ones live in
// mapped, already unlinked temporary files rather than on the Go heap.
//
// A writer that must hold a column per series until it can write the
// whole column (the index sidecar: one record batch at the end) would
// otherwise keep bytes that grow with the snapshot in anonymous memory,
// which the kernel can only keep or kill. Pages of a shared file mapping
// are page cache instead: the kernel writes them back and evicts them
// under pressure, and they never count as the process's RssAnon.
//
// Buffers come from an Arena, which owns their files: Release unmaps and
// closes every one. A buffer starts on the Go heap and moves to a file
// once it needs more than the arena's heap limit, so small writers (tests,
// small snapshots) make no files at all. Growth that fails (a full disk,
// a file system without fallocate or ftruncate) keeps the buffer correct
// by moving it back to the heap, and is reported by Arena.Err: the writer
// checks it and fails instead of crashing later on a page the disk could
// not hold. On systems without mmap (not Linux) every buffer is on the
// heap.
package mapbuf

import (
	"errors"
	"fmt"
)

// Arena owns a writer's buffers and their files. It is not safe for
// concurrent use: one writer's goroutine owns it.
type Arena struct {
	dir     string
	heapMax int
	bufs    []*Buf
	err     error
	n       int // files made, for their names
}

// minMapped is the smallest size a file-backed buffer is mapped at.
const minMapped = 1 << 20

// NewArena returns an arena whose buffers spill to temporary files in dir
// once they grow past heapMax bytes (0: every buffer that holds anything).
func NewArena(dir string, heapMax int) *Arena {
	return &Arena{dir: dir, heapMax: heapMax}
}

// New returns an empty buffer of the arena.
func (a *Arena) New() *Buf {
	b := &Buf{a: a}
	a.bufs = append(a.bufs, b)
	return b
}

// Err is the first growth of a buffer that failed, nil if none: the
// buffers still hold what was appended (on the heap), but the caller asked
// for memory outside the Go heap and did not get it.
func (a *Arena) Err() error { return a.err }

// Release unmaps and closes every buffer's file; no slice a buffer
// returned may be used afterwards. It may be called more than once.
func (a *Arena) Release() error {
	var errs []error
	for _, b := range a.bufs {
		errs = append(errs, b.release())
	}
	a.bufs = nil
	return errors.Join(errs...)
}

// Mapped is how many bytes the arena's buffers hold in mapped files.
func (a *Arena) Mapped() int {
	n := 0
	for _, b := range a.bufs {
		if b.m != nil {
			n += len(b.data)
		}
	}
	return n
}

func (a *Arena) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// Buf is a growable byte buffer: Bytes is valid until the next call that
// grows it (Append, AppendZeros, Reserve) or the arena's Release.
type Buf struct {
	a    *Arena
	data []byte // len = bytes held; cap = room (the whole mapping when mapped)
	m    *mapping
}

// Len is the number of bytes held.
func (b *Buf) Len() int { return len(b.data) }

// Bytes returns the bytes held, to read or change in place.
func (b *Buf) Bytes() []byte { return b.data }

// Append appends p.
func (b *Buf) Append(p ...byte) {
	b.Reserve(len(p))
	b.data = append(b.data, p...)
}

// AppendString appends the bytes of v.
func (b *Buf) AppendString(v string) {
	b.Reserve(len(v))
	b.data = append(b.data, v...)
}

// AppendZeros appends n zero bytes and returns them.
func (b *Buf) AppendZeros(n int) []byte {
	b.Reserve(n)
	at := len(b.data)
	b.data = b.data[:at+n]
	z := b.data[at:]
	clear(z) // (a mapping is zero already; a heap slice's spare room may not be)
	return z
}

// Reserve makes room for n more bytes.
func (b *Buf) Reserve(n int) {
	need := len(b.data) + n
	if need <= cap(b.data) {
		return
	}
	size := max(need, 2*cap(b.data))
	if size <= b.a.heapMax || !mapSupported || b.a.err != nil {
		b.toHeap(size) // (after a failure, no more files: the writer is failing)
		return
	}
	if err := b.grow(max(size, minMapped)); err != nil {
		b.a.fail(fmt.Errorf("spill buffer in %s: %w", b.a.dir, err))
		b.toHeap(size)
	}
}

// toHeap moves the buffer to a heap slice of capacity size.
func (b *Buf) toHeap(size int) {
	d := make([]byte, len(b.data), size)
	copy(d, b.data)
	if b.m != nil {
		b.m.close()
		b.m = nil
	}
	b.data = d
}

// grow moves the buffer to (or grows it inside) a mapped file of size bytes.
func (b *Buf) grow(size int) error {
	n := len(b.data)
	if b.m == nil {
		m, err := newMapping(b.a.dir, fmt.Sprintf(".mapbuf-%d", b.a.n))
		if err != nil {
			return err
		}
		b.a.n++
		data, err := m.resize(size)
		if err != nil {
			m.close()
			return err
		}
		copy(data, b.data)
		b.m, b.data = m, data[:n]
		return nil
	}
	data, err := b.m.resize(size)
	if err != nil {
		return err // the old mapping is still in place
	}
	b.data = data[:n]
	return nil
}

func (b *Buf) release() error {
	b.data = nil
	if b.m == nil {
		return nil
	}
	err := b.m.close()
	b.m = nil
	return err
}
