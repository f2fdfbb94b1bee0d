package dataset

// The commit protocol (docs/FORMAT.md §1, docs/OPERATIONS.md "One truth
// for a dataset"). What a dataset serves is a function of three files:
// CURRENT, the manifest it names, and the write-ahead log with its
// checkpoint (wal/CHECKPOINT): the snapshot CURRENT names, with every
// logged write after the checkpoint merged over it. Every change of
// CURRENT or of the checkpoint goes through a Writer, under the dataset's
// lock, and is a compare-and-swap: a change derived from a snapshot (a
// compaction from the base it froze, a rollback from the CURRENT its
// operator saw) names it, and fails with ErrMoved when CURRENT has moved
// meanwhile, instead of silently replacing what moved it.
//
// The rule for live writes, across every change:
//
//   - a compaction folds the writes through position P into the snapshot
//     it publishes: they belong to that vintage, and the checkpoint moves
//     to P;
//   - a lake build (by default) leaves the checkpoint where it is: the
//     writes after it keep shadowing the new snapshot until a compaction
//     folds them; with --supersede-writes it moves the checkpoint to the
//     log's end when the build started, retiring the writes before it;
//   - a rollback or a publish of a staged vintage moves only CURRENT: the
//     writes after the checkpoint shadow the vintage now served, and the
//     writes a newer compaction folded are not served (they belong to it);
//   - a discard moves only the checkpoint, to the log's end;
//   - gc deletes vintages and never touches the log or its checkpoint.
//
// The flip of CURRENT is the commit point. Every manifest records the
// checkpoint its publish set (wal_position), and the checkpoint file is
// written right after the flip; a crash between the two is rolled forward
// by taking the larger of the file's position and the one CURRENT's
// manifest records (Dir.WALCheckpoint), by readers at once and by the next
// writer durably. The checkpoint only ever moves forward.

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// ErrMoved is what a change derived from a snapshot fails with when
// CURRENT no longer names it: a build, publish, rollback or compaction
// landed in between. *MovedError matches it.
var ErrMoved = errors.New("CURRENT has moved")

// MovedError says what CURRENT names instead of the snapshot a change was
// derived from, and what moved it (the newest HISTORY line, when known).
type MovedError struct {
	Dataset  string
	Expected uint64 // what the change was derived from
	Current  uint64 // what CURRENT names
	By       *Flip  // the last change of CURRENT, nil if HISTORY does not say
}

func (e *MovedError) Error() string {
	by := ""
	if f := e.By; f != nil && f.To == e.Current {
		by = fmt.Sprintf(" by a %s at %s", f.Action, f.Time)
	}
	return fmt.Sprintf("dataset %s: %v: the change was derived from snapshot %d, CURRENT names %d (moved%s)", e.Dataset, ErrMoved, e.Expected, e.Current, by)
}

// Is makes errors.Is(err, ErrMoved) hold.
func (e *MovedError) Is(target error) bool { return target == ErrMoved }

// Change describes one change of CURRENT for HISTORY and its guard.
type Change struct {
	// Action is HISTORY's kind of the line (ActionBuild, ActionPublish,
	// ActionCompaction, ActionRollback, ActionDiscard).
	Action string
	Tool   string
	Reason string
	// Expect, when not 0, is the snapshot the change was derived from:
	// CURRENT must still name it, or the change fails with ErrMoved.
	Expect uint64
	// Rows is how many live rows a discard set aside (HISTORY only).
	Rows int64
}

// Expect checks c's guard against CURRENT now: ErrMoved if c.Expect is set
// and CURRENT names another snapshot. A writer about to do long work for
// a change checks first, so it does not do the work in vain; the change
// itself checks again.
func (w *Writer) Expect(c Change) error { return w.expectLocked(c) }

// expectLocked checks c's guard against CURRENT. Requires the lock.
func (w *Writer) expectLocked(c Change) error {
	if c.Expect == 0 {
		return nil
	}
	cur, err := w.d.CurrentID()
	if err != nil && !errors.Is(err, ErrNoCurrent) {
		return err
	}
	if cur == c.Expect {
		return nil
	}
	e := &MovedError{Dataset: w.d.Name, Expected: c.Expect, Current: cur}
	if flips, err := w.d.Flips(); err == nil && len(flips) > 0 {
		f := flips[len(flips)-1]
		e.By = &f
	}
	return e
}

// WALDirOf is the dataset's log directory.
func (d *Dir) walDir() string { return d.Path(WALDir) }

// WALCheckpoint is the position through which the dataset's logged writes
// belong to vintages or were retired: what a server replays after, and
// what its delta shadows CURRENT with. It is the larger of the checkpoint
// file's and the one CURRENT's manifest records (a crash between a flip
// and the file's write is rolled forward); for a log written before
// checkpoints existed it is derived once from the vintages present (the
// largest position a compaction among them folded in, CheckpointUpgraded).
func (d *Dir) WALCheckpoint() (wal.Checkpoint, error) {
	cur, err := d.Current()
	if errors.Is(err, ErrNoCurrent) {
		return d.CheckpointFor(nil)
	}
	if err != nil {
		return wal.Checkpoint{}, err
	}
	return d.CheckpointFor(cur)
}

// CheckpointFor is WALCheckpoint as it is while m (nil: none) is the
// manifest CURRENT names: what a server that has just opened m's snapshot
// replays after.
func (d *Dir) CheckpointFor(m *manifest.Manifest) (wal.Checkpoint, error) {
	c, ok, err := wal.ReadCheckpoint(d.walDir())
	if err != nil {
		return c, err
	}
	if !ok {
		c = wal.Checkpoint{Kind: wal.CheckpointUpgraded}
		ids, err := d.IDs()
		if err != nil {
			return c, err
		}
		for _, id := range ids {
			if m, err := d.Load(id); err == nil && m.Lineage.Kind == LineageCompaction && m.WALPosition > c.Folded {
				c.Folded, c.SnapshotID = m.WALPosition, id
			}
		}
	}
	if m != nil && m.WALPosition > c.Folded {
		c = wal.Checkpoint{Folded: m.WALPosition, Kind: wal.CheckpointRecovered, SnapshotID: m.SnapshotID}
	}
	return c, nil
}

// Checkpoint is Dir.WALCheckpoint for the writer holding the lock.
func (w *Writer) Checkpoint() (wal.Checkpoint, error) { return w.d.WALCheckpoint() }

// moveCheckpointLocked moves the log's checkpoint forward to pos (never
// back), recording what moved it. A dataset that never had a log and whose
// checkpoint stays 0 gets none. Requires the lock.
func (w *Writer) moveCheckpointLocked(pos uint64, kind string, snapshot uint64) error {
	c, ok, err := wal.ReadCheckpoint(w.d.walDir())
	if err != nil {
		return err
	}
	if ok && c.Folded >= pos {
		return nil
	}
	if pos == 0 {
		if _, err := os.Stat(w.d.walDir()); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	return wal.WriteCheckpoint(w.d.walDir(), wal.Checkpoint{Folded: pos, Kind: kind, SnapshotID: snapshot,
		Time: time.Now().UTC().Format(time.RFC3339Nano)})
}

// recoverLocked finishes what a writer that crashed between the flip of
// CURRENT and what follows it left undone: the checkpoint file is rolled
// forward to what Dir.WALCheckpoint says (or written once for a log that
// predates checkpoints), and a flip HISTORY lacks gets its line. Requires
// the lock.
func (w *Writer) recoverLocked() error {
	c, err := w.d.WALCheckpoint()
	if err != nil {
		return fmt.Errorf("dataset %s: %w", w.d.Name, err)
	}
	if c.Kind == wal.CheckpointRecovered || c.Kind == wal.CheckpointUpgraded {
		if err := w.moveCheckpointLocked(c.Folded, c.Kind, c.SnapshotID); err != nil {
			return err
		}
	}
	cur, err := w.d.Current()
	if err != nil {
		return nil // nothing published yet, or CURRENT unreadable: the next publish replaces it
	}
	flips, err := w.d.Flips()
	if err != nil {
		return err
	}
	var last Flip
	if len(flips) > 0 {
		last = flips[len(flips)-1]
	}
	if last.To == cur.SnapshotID {
		return nil
	}
	return w.appendFlipLocked(Flip{Action: actionOf(cur), From: last.To, To: cur.SnapshotID, Tool: cur.Tool,
		WALPosition: cur.WALPosition, Recovered: true})
}

// actionOf is the HISTORY kind of a manifest's first publish.
func actionOf(m *manifest.Manifest) string {
	if m.Lineage.Kind == LineageCompaction {
		return ActionCompaction
	}
	return ActionBuild
}

// LineageCompaction is the manifest lineage kind of a compaction's
// snapshot: its inputs are its parent and the log.
const LineageCompaction = "compaction"

// Discard sets the live writes aside without a stop: the checkpoint moves
// to pos (the log's end the caller has applied through), so no write at or
// before it is served or replayed again; CURRENT does not move. HISTORY
// records it with the rows set aside. The log's segments stay until their
// owner truncates them.
func (w *Writer) Discard(pos uint64, c Change) error {
	if err := w.expectLocked(c); err != nil {
		return err
	}
	cur, err := w.d.CurrentID()
	if err != nil {
		return fmt.Errorf("discard: %w", err)
	}
	if err := w.moveCheckpointLocked(pos, wal.CheckpointDiscard, 0); err != nil {
		return err
	}
	return w.appendFlipLocked(Flip{Action: ActionDiscard, From: cur, To: cur, Tool: c.Tool, Reason: c.Reason,
		WALPosition: pos, Rows: c.Rows})
}

// LiveEnd is the position after the last intact record of the dataset's
// log, read without its lock (a server may be appending): every write
// acknowledged before the call is at or before it. Zero when the dataset
// has no log.
func (d *Dir) LiveEnd() (uint64, error) {
	dir := d.walDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	p, err := wal.End(dir)
	if err != nil {
		return 0, fmt.Errorf("dataset %s: %w", d.Name, err)
	}
	return p.Uint64(), nil
}

// WALHeld reports whether a process (a server) holds the dataset's log
// open for appending.
func (d *Dir) WALHeld() bool {
	if _, err := os.Stat(d.walDir()); errors.Is(err, os.ErrNotExist) {
		return false
	}
	return wal.Held(d.walDir())
}
