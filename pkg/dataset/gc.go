package dataset

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// Rollback flips CURRENT to vintage to (which must exist and load) and
// records the flip in HISTORY. Requires nothing else of the dataset: the
// snapshot files are immutable, so an older vintage is as servable as the
// day it was published. With c.Expect set (the CURRENT its caller saw),
// CURRENT must still name it. The live writes' checkpoint does not move
// back: writes a newer compaction folded are not served over the vintage.
func (w *Writer) Rollback(to uint64, c Change) (from uint64, err error) {
	from, err = w.d.CurrentID()
	if err != nil && !errors.Is(err, ErrNoCurrent) {
		return 0, err
	}
	if err := w.d.CheckVintage(to); err != nil {
		return from, fmt.Errorf("rollback: %w", err)
	}
	if err := w.expectLocked(c); err != nil {
		return from, err
	}
	m, err := w.d.Load(to)
	if err != nil {
		return from, fmt.Errorf("rollback: %w", err)
	}
	c.Action = ActionRollback
	return w.commitLocked(m, c, "")
}

// GCResult says what gc did (or, in a dry run, would do).
type GCResult struct {
	Removed    []uint64 `json:"removed"`
	Kept       []uint64 `json:"kept"`
	InUse      []uint64 `json:"in_use"` // would be removed, but a reader holds a lease
	FreedBytes int64    `json:"freed_bytes"`
	DryRun     bool     `json:"dry_run"`
}

// GC keeps CURRENT and the keep newest (by id) other vintages, and removes
// every other vintage unless a reader holds its lease: keep 1 leaves CURRENT
// plus one vintage to roll back to, whether or not CURRENT is the newest. A snapshot is removed
// manifest first (so no new reader can find it), then its files, then its
// lease, all while holding its lease exclusively.
func (w *Writer) GC(keep int, dryRun bool) (*GCResult, error) {
	if keep < 0 {
		return nil, fmt.Errorf("gc: keep must be ≥ 0, got %d", keep)
	}
	ids, err := w.d.IDs()
	if err != nil {
		return nil, err
	}
	cur, err := w.d.CurrentID()
	if err != nil && !errors.Is(err, ErrNoCurrent) {
		return nil, err
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] > ids[j] })
	res := &GCResult{Removed: []uint64{}, Kept: []uint64{}, InUse: []uint64{}, DryRun: dryRun}
	others := 0 // vintages kept besides CURRENT
	for _, id := range ids {
		if id == cur {
			res.Kept = append(res.Kept, id)
			continue
		}
		if others < keep {
			others++
			res.Kept = append(res.Kept, id)
			continue
		}
		size := w.snapshotBytes(id)
		lease, err := fileutil.TryLock(w.d.Path(LeasePath(id)))
		if errors.Is(err, fileutil.ErrLocked) {
			res.InUse = append(res.InUse, id)
			continue
		}
		if errors.Is(err, os.ErrNotExist) {
			// No leases directory yet: nobody can hold a lease.
			if err = os.MkdirAll(w.d.Path(LeasesDir), 0o755); err == nil {
				lease, err = fileutil.TryLock(w.d.Path(LeasePath(id)))
			}
		}
		if err != nil {
			return res, err
		}
		if !dryRun {
			err = w.removeLocked(id)
		}
		lease.Release()
		if err != nil {
			return res, err
		}
		res.Removed = append(res.Removed, id)
		res.FreedBytes += size
	}
	return res, nil
}

// removeLocked deletes one vintage. Requires the write lock and the
// snapshot's lease held exclusively.
func (w *Writer) removeLocked(id uint64) error {
	if err := os.Remove(w.d.Path(ManifestPath(id))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := fileutil.SyncDir(w.d.Path(ManifestsDir)); err != nil {
		return err
	}
	if err := os.RemoveAll(w.d.Path(SnapshotPath(id))); err != nil {
		return err
	}
	if err := fileutil.SyncDir(w.d.Path(SnapshotsDir)); err != nil {
		return err
	}
	if err := os.Remove(w.d.Path(LeasePath(id))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (w *Writer) snapshotBytes(id uint64) int64 {
	var n int64
	ents, _ := os.ReadDir(w.d.Path(SnapshotPath(id)))
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}
