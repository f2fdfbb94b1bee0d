package snapshot

import (
	"context"
	"fmt"
)

// Reading ahead at start. A server that has just started maps its
// snapshots and answers at once; until their pages are in the page cache
// each query's first touch of a page is a read from disk (a major fault),
// and with the kernel's default readahead one such fault reads a window
// of up to read_ahead_kb around the page (8 MiB on some cloud disks): the
// first few dozen queries of a cold start each wait for one. Reading the
// files ahead, in the background and a bounded chunk at a time, turns
// those waits into nothing without delaying the first answer: what is
// read is also mapped into the process (arrowfile.Mapped.ReadAhead), so
// not even a minor fault is left. Only the page cache holds what is read:
// the process's anonymous memory does not grow, and a file the kernel
// evicts again is simply read on demand.

// Part is a file of a snapshot that can be read ahead.
type Part int

const (
	// PartIndex is the index sidecar: every lookup and every `latest`
	// answer reads it.
	PartIndex Part = iota
	// PartData is the hot data file.
	PartData
)

func (p Part) String() string {
	if p == PartIndex {
		return "index"
	}
	return "data"
}

// ReadAheadChunk is how much ReadAhead asks of the kernel at once (and
// at most twice that is queued at the device ahead of a query's fault).
const ReadAheadChunk = 4 << 20

// Bytes is the size of a part's file.
func (s *Snapshot) Bytes(p Part) int64 {
	if p == PartIndex {
		return int64(len(s.mappedIndex()))
	}
	return int64(len(s.mappedData()))
}

// ReadAhead reads one of the snapshot's files into the page cache
// (arrowfile.Mapped.ReadAhead): it returns when the whole file has been
// read, ctx is done, or a read failed. The caller holds a reference
// (Acquire) for the duration.
func (s *Snapshot) ReadAhead(ctx context.Context, p Part) error {
	m := s.data
	if p == PartIndex {
		m = s.index
	}
	if err := m.ReadAhead(ctx, ReadAheadChunk); err != nil {
		return fmt.Errorf("snapshot %d: %s: %w", s.ID(), p, err)
	}
	return nil
}

// Prefetch is one file chosen to be read ahead: part P of the Nth
// snapshot given to PlanPrefetch.
type Prefetch struct {
	N     int
	Part  Part
	Bytes int64
}

// PlanPrefetch chooses which files of the snapshots whose part sizes are
// given (sizes[i][PartIndex], sizes[i][PartData]) to read ahead within
// budget bytes: every index first, in order, as every query reads its
// index, then the data files in order; each file whole or not at all,
// skipped (and the next one tried) when it does not fit what is left. A
// budget of 0 or less chooses nothing.
func PlanPrefetch(sizes [][2]int64, budget int64) []Prefetch {
	var out []Prefetch
	for _, p := range []Part{PartIndex, PartData} {
		for i, sz := range sizes {
			if n := sz[p]; n > 0 && n <= budget {
				out = append(out, Prefetch{N: i, Part: p, Bytes: n})
				budget -= n
			}
		}
	}
	return out
}
