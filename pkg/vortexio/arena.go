package vortexio

import (
	"fmt"
	"io"
	"sync"
	"unsafe"
)

// arena is the scratch memory of one ReadRange: the segments it reads and
// the intermediate arrays of the range decoders (FastLanes blocks, deltas)
// come from it instead of Go's heap, and ReadRange copies the decoded rows
// out (vec.clone) before the arena goes back to the pool. A one-series read
// of the cold tier decodes ~40 KB of blocks for ~3 KB of rows; allocating
// those per read was about a third of its time (BenchmarkTierRead).
//
// Nothing decoded from an arena may outlive the read: ReadRange is the
// only user, and it clones every column before putArena.
type arena struct {
	buf []uint64
	off int // words used
}

// maxArenaWords bounds what an arena keeps between reads (4 MiB); a read
// needing more grows it for its own duration only.
const maxArenaWords = 1 << 19

var arenas = sync.Pool{New: func() any { return &arena{} }}

func getArena() *arena { return arenas.Get().(*arena) }

func putArena(a *arena) {
	if len(a.buf) > maxArenaWords {
		a.buf = nil
	}
	a.off = 0
	arenas.Put(a)
}

// bytes returns n zeroed bytes, 8-byte aligned.
func (a *arena) bytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	w := (n + 7) / 8
	if a.off+w > len(a.buf) {
		// The old block stays alive through what was cut from it; the new
		// one is what the next reads reuse.
		a.buf = make([]uint64, max(2*len(a.buf), w, 8192))
		a.off = 0
	}
	s := a.buf[a.off : a.off+w]
	a.off += w
	clear(s)
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), n)[:n:n]
}

// buf is the decoder's allocation for range-decoded arrays: the arena's
// when it has one, else Go's heap.
func (d *decoder) buf(n int) []byte {
	if d.ar != nil {
		return d.ar.bytes(n)
	}
	return alignedBytes(n)
}

// segmentIn reads data segment i into the arena (Go's heap without one).
func (f *File) segmentIn(i uint32, ar *arena) ([]byte, error) {
	if ar == nil {
		return f.segment(i)
	}
	s := f.segs[i]
	n := uint64(s.length)
	if n > uint64(f.opts.MaxSegmentBytes) {
		return nil, corruptf("segment of %d bytes exceeds the limit", n)
	}
	if s.offset > uint64(f.size) || n > uint64(f.size)-s.offset {
		return nil, corruptf("segment [%d,+%d) outside the file", s.offset, n)
	}
	buf := ar.bytes(int(n))
	if _, err := f.r.ReadAt(buf, int64(s.offset)); err != nil && !(err == io.EOF && n == 0) {
		return nil, fmt.Errorf("vortexio: read [%d,+%d): %w", s.offset, n, err)
	}
	return buf, nil
}

// clone copies a vec (and its children) to Go's heap, exactly sized.
func (v *vec) clone() *vec {
	out := &vec{dt: v.dt, n: v.n, nulls: v.nulls}
	if v.valid != nil {
		out.valid = append([]byte(nil), v.valid...)
	}
	if v.data != nil {
		out.data = alignedBytes(len(v.data))
		copy(out.data, v.data)
	}
	if v.offs != nil {
		out.offs = append([]int32(nil), v.offs...)
	}
	for _, k := range v.kids {
		out.kids = append(out.kids, k.clone())
	}
	return out
}
