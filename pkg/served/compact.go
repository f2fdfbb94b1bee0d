package served

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/compact"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// CompactResult is the answer of a compaction of one dataset.
type CompactResult struct {
	Dataset     string  `json:"dataset"`
	Result      string  `json:"result"` // compacted, nothing, moved
	SnapshotID  uint64  `json:"snapshot_id"`
	ParentID    uint64  `json:"parent_id,omitempty"`
	Rows        int64   `json:"rows"`
	DeltaRows   int64   `json:"delta_rows"`
	WALPosition uint64  `json:"wal_position"`
	Seconds     float64 `json:"seconds"`
	// Rebased is the snapshot the delta was first frozen over when CURRENT
	// moved under the compaction (a build, publish or rollback landed):
	// the delta was carried over to the new CURRENT and folded into that
	// instead (0: it was not). Result "moved": CURRENT moved again, and
	// the delta stays live, unfolded.
	Rebased uint64 `json:"rebased_from,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Compaction results.
const (
	CompactCompacted = "compacted"
	CompactNothing   = "nothing"
	CompactMoved     = "moved"
)

// compactState is what a dataset remembers of its compactions.
type compactState struct {
	count     int64
	seconds   float64
	last      time.Time
	lastError string
	since     time.Time // first write not yet folded in (zero: none)
}

// Compact folds the delta into the next snapshot: freeze the runs, write
// base + frozen runs as snapshot N+1 (recording the WAL position they hold),
// serve it with the runs written since merged over it, then delete the WAL
// segments wholly folded in. A crash at any step loses nothing: before
// CURRENT flips the old snapshot and the whole log are replayed, after it
// the new snapshot and the records after its position.
//
// The publish is a compare-and-swap on the snapshot the delta was frozen
// over (docs/OPERATIONS.md "One truth for a dataset"): when a build,
// publish or rollback moved CURRENT meanwhile, nothing is published; the
// frozen runs go back to the live delta, the new CURRENT is served with
// the delta over it (as any reload does), and the compaction runs once
// more over it. Should CURRENT move again, it gives up with result "moved"
// and the delta stays live.
func (d *Dataset) Compact(ctx context.Context) (CompactResult, error) {
	res := CompactResult{Dataset: d.name, Result: CompactNothing}
	if d.faultStatus().failing {
		return res, ErrCompactFailing
	}
	w := d.liveWriter()
	// What the compaction allocated (its batches, the index it wrote) is
	// garbage once it returns: hand it back to the OS now (after the lock
	// is released) rather than hold it until the scavenger gets to it.
	defer debug.FreeOSMemory()
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	var first uint64
	for attempt := 0; ; attempt++ {
		r, err := d.compactLocked(ctx, w)
		if !errors.Is(err, dsdir.ErrMoved) {
			if err == nil && first != 0 {
				r.Rebased = first
			}
			return r, err
		}
		if first == 0 {
			first = r.SnapshotID
		}
		d.log.Warn("compaction: CURRENT moved under it; the delta is carried over to the new CURRENT", "dataset", d.name, "error", err.Error())
		if rerr := d.reloadLocked(true); rerr.Result == ReloadFailed {
			r.Result, r.Error = CompactMoved, err.Error()
			return r, fmt.Errorf("compact %s: %w; and the new CURRENT could not be served: %s", d.name, err, rerr.Error)
		}
		if attempt == 1 {
			r.Result, r.Error = CompactMoved, err.Error()
			d.log.Warn("compaction gave up: CURRENT moved twice; the delta stays live", "dataset", d.name)
			return r, nil
		}
	}
}

// compactLocked is one compaction attempt. On dataset.ErrMoved nothing was
// published and the frozen runs are live again. Requires swapMu held.
func (d *Dataset) compactLocked(ctx context.Context, w *live.Writer) (CompactResult, error) {
	res := CompactResult{Dataset: d.name, Result: CompactNothing}
	v, err := d.Acquire()
	if err != nil {
		return res, err
	}
	res.SnapshotID = v.ID()
	if w == nil && d.follower() != nil {
		v.Release()
		return res, d.notWriterError()
	}
	if w == nil || w.State().Rows() == 0 {
		v.Release()
		return res, nil
	}
	var frozen *livedelta.State
	w.Do(func(st *livedelta.State) (*livedelta.State, error) {
		frozen = st.Freeze()
		return frozen, nil
	})
	pos := frozen.FrozenPosition()
	res.DeltaRows = frozen.Rows()
	base, closeBase, err := d.compactionBase(v)
	if err != nil {
		v.Release()
		d.thaw(w)
		return res, fmt.Errorf("compact %s: %w", d.name, err)
	}
	r := query.NewComposite(base, frozen)
	out, err := compact.Publish(ctx, d.ds, r, v.Manifest(), pos, compact.Options{Tool: "servingsnap " + d.opt.Version, Yield: w.GiveWay})
	closeBase()
	v.Release()
	if err != nil {
		d.thaw(w)
		if errors.Is(err, dsdir.ErrMoved) {
			return res, err
		}
		err = fmt.Errorf("compact %s: %w", d.name, err)
		d.stMu.Lock()
		d.cs.lastError = err.Error()
		d.stMu.Unlock()
		return res, err
	}
	// compact.Publish proved the snapshot before its flip (the fast
	// verify: every file's checksum and an open with VerifyData): a third
	// read of every byte here would prove nothing more.
	s, err := snapshot.OpenID(d.dir, out.SnapshotID, snapshot.Options{ColdCache: d.opt.ColdCache})
	if err != nil {
		return res, fmt.Errorf("compact %s: open snapshot %d: %w", d.name, out.SnapshotID, err)
	}
	nv, err := newView(d.name, s)
	if err != nil {
		s.Close()
		return res, err
	}
	nv.drained = d.drainedHook
	// The writes since the freeze are counted over the new base off the
	// writer's lock (PrepareRebase) and caught up under it with the last
	// ones: made whole under it, the swap held every write ~90 ms with
	// 160k rows of 100k series in the delta (BenchmarkRebase).
	pre, done, release := w.PrepareRebase(func(st *livedelta.State) *livedelta.State { return st.DropFrozen(nv.base) })
	defer release() // (also released below, once the swap is done)
	err = w.Do(func(st *livedelta.State) (*livedelta.State, error) {
		st2, ok := st.CatchUp(pre, done)
		if !ok {
			st2 = st.DropFrozen(nv.base)
		}
		nv.setState(st2)
		if _, err := d.install(nv); err != nil {
			return nil, err
		}
		d.folded.Store(pos)
		// counted as the new snapshot is served, so that a status that
		// shows it shows its compaction too
		d.stMu.Lock()
		d.st.currentID = out.SnapshotID
		d.cs.count++
		d.cs.seconds += out.Duration.Seconds()
		d.cs.last, d.cs.lastError = time.Now(), ""
		if len(st2.Runs()) == 0 {
			d.cs.since = time.Time{}
		} else {
			d.cs.since = time.Now() // the writes that arrived meanwhile
		}
		d.stMu.Unlock()
		return st2, nil
	})
	release()
	if err != nil {
		s.Close()
		return res, err
	}
	if _, err := w.Log().TruncateBefore(wal.PositionFromUint64(pos)); err != nil {
		d.log.Warn("wal: segments folded in were not removed", "dataset", d.name, "error", err.Error())
	}
	res.Result, res.SnapshotID, res.ParentID, res.Rows, res.WALPosition = CompactCompacted, out.SnapshotID, out.ParentID, out.Rows, pos
	res.Seconds = out.Duration.Seconds()
	d.log.Info("compacted", "dataset", d.name, "snapshot_id", out.SnapshotID, "parent_id", out.ParentID,
		"delta_rows", res.DeltaRows, "rows", out.Rows, "wal_position", pos, "s", res.Seconds)
	return res, nil
}

// thaw gives a compaction's frozen runs back to the live delta when it
// published nothing.
func (d *Dataset) thaw(w *live.Writer) {
	w.Do(func(st *livedelta.State) (*livedelta.State, error) {
		t := st.Thaw()
		liveTarget{d}.Publish(t)
		return t, nil
	})
}

// DiscardResult is the answer of a discard of one dataset's live writes.
type DiscardResult struct {
	Dataset     string `json:"dataset"`
	Result      string `json:"result"` // discarded, nothing
	SnapshotID  uint64 `json:"snapshot_id"`
	Rows        int64  `json:"rows"`         // live rows set aside
	WALPosition uint64 `json:"wal_position"` // the checkpoint now: every write through it is set aside
}

// Discard sets the dataset's live writes aside without a stop: under the
// dataset's lock and the writer's, the log's checkpoint moves to the last
// write applied, HISTORY records a discard with how many rows, and the
// snapshot alone is served until the next write. The writes stay in the
// log's segments until they are truncated (nothing is deleted by the
// discard itself); a restart does not bring them back.
func (d *Dataset) Discard(ctx context.Context, tool, reason string) (DiscardResult, error) {
	res := DiscardResult{Dataset: d.name, Result: CompactNothing}
	w := d.liveWriter()
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	v, err := d.Acquire()
	if err != nil {
		return res, err
	}
	defer v.Release()
	res.SnapshotID = v.ID()
	if w == nil && d.follower() != nil {
		return res, d.notWriterError()
	}
	if w == nil {
		return res, nil
	}
	lock, err := d.ds.LockForWriteWith(ctx, dsdir.LockOptions{})
	if err != nil {
		return res, fmt.Errorf("discard %s: %w", d.name, err)
	}
	defer lock.Close()
	err = w.Do(func(st *livedelta.State) (*livedelta.State, error) {
		pos := w.AppliedLocked()
		rows := st.Rows()
		if err := lock.Discard(pos, dsdir.Change{Tool: tool, Reason: reason, Rows: rows}); err != nil {
			return nil, err
		}
		empty := livedelta.Empty(st.Schema())
		nv, ok := v.withState(empty)
		if !ok {
			return nil, fmt.Errorf("dataset %s: %w", d.name, ErrClosed)
		}
		if _, err := d.install(nv); err != nil {
			nv.Release()
			return nil, err
		}
		d.folded.Store(pos)
		res.Result, res.Rows, res.WALPosition = "discarded", rows, pos
		d.stMu.Lock()
		d.cs.since = time.Time{}
		d.stMu.Unlock()
		return empty, nil
	})
	if err != nil {
		return res, fmt.Errorf("discard %s: %w", d.name, err)
	}
	if _, err := w.Log().TruncateBefore(wal.PositionFromUint64(res.WALPosition)); err != nil {
		d.log.Warn("wal: segments discarded were not removed", "dataset", d.name, "error", err.Error())
	}
	d.log.Info("live writes discarded", "dataset", d.name, "rows", res.Rows, "checkpoint", wal.PositionFromUint64(res.WALPosition).String())
	return res, nil
}

// compactionBase is the reader a compaction of view v reads its base
// through: v's own, or for a tiered snapshot the same snapshot opened
// again with a private cold cache (compact.ColdCacheBytes), so that
// reading every series' old rows once does not evict from the server's
// shared cache (--cold-cache) the history queries keep reading. Opening
// maps the files again and reads the index in place: no per-row work.
// The caller holds v, so the files stay; close releases the second open.
func (d *Dataset) compactionBase(v *View) (*query.SnapshotReader, func(), error) {
	if !v.snap.Tiered() {
		return v.base, func() {}, nil
	}
	s, err := snapshot.OpenID(d.dir, v.ID(), snapshot.Options{ColdCache: coldfile.NewCache(compact.ColdCacheBytes)})
	if err != nil {
		return nil, nil, err
	}
	r, err := query.FromSnapshot(d.name, s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return r, s.Close, nil
}

// CompactPolicy says when the server compacts a dataset by itself: when
// its delta holds at least Rows rows or Bytes bytes, or its oldest write not
// yet folded in is older than Age. Zero disables a threshold.
type CompactPolicy struct {
	Rows  int64
	Bytes int64
	Age   time.Duration
}

// Enabled reports whether any threshold is set.
func (p CompactPolicy) Enabled() bool { return p.Rows > 0 || p.Bytes > 0 || p.Age > 0 }

// Due reports why d should be compacted now under p ("" if not).
func (d *Dataset) Due(p CompactPolicy) string {
	w := d.liveWriter()
	if w == nil {
		return ""
	}
	st := w.State()
	if st.Rows() == 0 {
		return ""
	}
	d.stMu.Lock()
	since := d.cs.since
	d.stMu.Unlock()
	switch {
	case p.Rows > 0 && st.Rows() >= p.Rows:
		return fmt.Sprintf("%d delta rows ≥ %d", st.Rows(), p.Rows)
	case p.Bytes > 0 && st.Bytes() >= p.Bytes:
		return fmt.Sprintf("%d delta bytes ≥ %d", st.Bytes(), p.Bytes)
	case p.Age > 0 && !since.IsZero() && time.Since(since) >= p.Age:
		return fmt.Sprintf("oldest write %s old ≥ %s", time.Since(since).Round(time.Second), p.Age)
	}
	return ""
}
