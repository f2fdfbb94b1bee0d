package sortwrite

import (
	"bufio"
	"container/heap"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// minReadBuffer is the smallest read buffer the merge gives a run.
const minReadBuffer = 64 << 10

// fanIn is the most runs the merge reads at once: as many as have a
// read buffer of minReadBuffer within a tenth of the work memory, at
// least 16. More runs (a long input under a small budget: runs of a row
// group each) are first merged fanIn at a time into longer ones (narrow).
// A variable so tests can make the merge take several passes.
var fanIn = func(e *external) int { return int(max(e.work()/10/minReadBuffer, 16)) }

// narrow merges the spilled runs fanIn at a time into longer runs, in
// passes, until the final merge reads at most fanIn: each pass reads and
// writes the spill once more, and the final merge's read buffers stay
// within the budget however many runs the input took. A longer run holds
// its runs' records in the merge's order (rank, period, input row) and
// layout, duplicates kept: the final merge decides them as before. The
// runs merged are removed. Runs in a split's pieces (no spill directory)
// are left as they are.
func (e *external) narrow(ctx context.Context, rank []uint32, ml recLayout) error {
	for pass := 1; e.dir != "" && len(e.runs) > fanIn(e); pass++ {
		k := fanIn(e)
		var next []runSource
		for lo := 0; lo < len(e.runs); lo += k {
			group := e.runs[lo:min(lo+k, len(e.runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			path := filepath.Join(e.dir, fmt.Sprintf("pass-%d-%06d.spill", pass, len(next)))
			src, err := e.mergeRuns(ctx, group, rank, ml, path)
			if err != nil {
				return err
			}
			for _, r := range group {
				os.Remove(r.path)
			}
			next = append(next, src)
		}
		e.runs = next
	}
	return nil
}

// mergeRuns merges runs into one spill file at path, in the merge's
// layout ml.
func (e *external) mergeRuns(ctx context.Context, runs []runSource, rank []uint32, ml recLayout, path string) (_ runSource, err error) {
	buf := int(max(e.work()/10/int64(len(runs)+1), minReadBuffer))
	h := make(runHeap, 0, len(runs))
	defer func() {
		for _, r := range h {
			r.f.Close()
		}
	}()
	for _, src := range runs {
		r, err := openRun(e.t, src, ml, e.firsts, min(buf, spillBuffer))
		if err != nil {
			return runSource{}, err
		}
		ok, err := r.next(rank)
		if err != nil || !ok {
			r.f.Close()
			if err != nil {
				return runSource{}, err
			}
			continue
		}
		h = append(h, r)
	}
	heap.Init(&h)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return runSource{}, fmt.Errorf("spill: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("spill %s: %w", path, cerr)
		}
	}()
	w := bufio.NewWriterSize(f, min(buf, spillBuffer))
	var n int64
	for len(h) > 0 {
		r := h[0]
		if _, err := w.Write(r.rec); err != nil {
			return runSource{}, fmt.Errorf("spill %s: %w", path, err)
		}
		if n++; n&(1<<16-1) == 0 {
			if err := ctx.Err(); err != nil {
				return runSource{}, err
			}
		}
		ok, err := r.next(rank)
		if err != nil {
			return runSource{}, err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			r.f.Close()
			heap.Pop(&h)
		}
	}
	if err := w.Flush(); err != nil {
		return runSource{}, fmt.Errorf("spill %s: %w", path, err)
	}
	return runSource{path: path, name: path, records: n, omit: slices.Clone(e.isAttr)}, nil
}
