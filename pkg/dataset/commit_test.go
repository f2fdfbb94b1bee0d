package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/wal"
)

func newDataset(t *testing.T) (*Dir, *Writer) {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "DS"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return d, w
}

// publishOne publishes an empty snapshot as action, its manifest changed
// by mod (nil: as staged), with the change's guard expect.
func publishOne(t *testing.T, w *Writer, d *Dir, action string, expect uint64, mod func(*manifest.Manifest)) (uint64, error) {
	t.Helper()
	staged, m := stageOne(t, w, d)
	if mod != nil {
		mod(m)
	}
	err := w.Publish(staged, m, Change{Action: action, Tool: "test", Expect: expect})
	if err != nil {
		os.RemoveAll(staged)
	}
	return m.SnapshotID, err
}

func compaction(pos uint64) func(*manifest.Manifest) {
	return func(m *manifest.Manifest) { m.Lineage.Kind, m.WALPosition = LineageCompaction, pos }
}

func lastFlip(t *testing.T, d *Dir) Flip {
	t.Helper()
	fl, err := d.Flips()
	if err != nil || len(fl) == 0 {
		t.Fatalf("HISTORY: %v %v", fl, err)
	}
	return fl[len(fl)-1]
}

// TestPublishCompareAndSwap: a change derived from a snapshot publishes
// only while CURRENT names it; otherwise nothing is installed and the
// error names what CURRENT is and what moved it. A rollback and a publish
// of a staged vintage are guarded the same way.
func TestPublishCompareAndSwap(t *testing.T) {
	d, w := newDataset(t)
	one, err := publishOne(t, w, d, ActionBuild, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	two, err := publishOne(t, w, d, ActionBuild, 0, nil) // the nightly build lands
	if err != nil {
		t.Fatal(err)
	}
	// a compaction that froze snapshot one publishes after it
	next, _ := w.NextID()
	_, err = publishOne(t, w, d, ActionCompaction, one, compaction(100))
	var me *MovedError
	if !errors.Is(err, ErrMoved) || !errors.As(err, &me) || me.Expected != one || me.Current != two || me.By == nil || me.By.Action != ActionBuild {
		t.Fatalf("compaction over a moved CURRENT: %v (%+v)", err, me)
	}
	if !strings.Contains(err.Error(), "by a build") {
		t.Errorf("the error does not say what moved CURRENT: %v", err)
	}
	if cur, _ := d.CurrentID(); cur != two {
		t.Fatalf("CURRENT %d after a refused compaction, want %d", cur, two)
	}
	if _, err := os.Stat(d.Path(ManifestPath(next))); !os.IsNotExist(err) {
		t.Fatalf("a refused compaction installed manifest %d: %v", next, err)
	}
	if c, ok, _ := wal.ReadCheckpoint(d.Path(WALDir)); ok {
		t.Fatalf("a refused compaction moved the checkpoint: %+v", c)
	}
	// over the right base it publishes, and HISTORY says it was a compaction
	three, err := publishOne(t, w, d, ActionCompaction, two, compaction(100))
	if err != nil {
		t.Fatal(err)
	}
	if f := lastFlip(t, d); f.Action != ActionCompaction || f.From != two || f.To != three || f.WALPosition != 100 {
		t.Fatalf("HISTORY after the compaction: %+v", f)
	}
	// a rollback guarded by what its operator saw
	if _, err := w.Rollback(one, Change{Tool: "test", Expect: two}); !errors.Is(err, ErrMoved) {
		t.Fatalf("rollback guarded by a stale CURRENT: %v", err)
	}
	if _, err := w.Rollback(one, Change{Tool: "test", Expect: three}); err != nil {
		t.Fatal(err)
	}
	// a publish of a staged vintage, guarded too
	four := installOne(t, w, d)
	if _, err := w.PublishInstalled(four, Change{Tool: "test", Expect: three}); !errors.Is(err, ErrMoved) {
		t.Fatalf("publish guarded by a stale CURRENT: %v", err)
	}
	if _, err := w.PublishInstalled(four, Change{Tool: "test", Expect: one}); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	fl, _ := d.Flips()
	for _, f := range fl {
		kinds = append(kinds, f.Action)
	}
	if got, want := strings.Join(kinds, " "), "build build compaction rollback publish"; got != want {
		t.Errorf("HISTORY kinds %q, want %q", got, want)
	}
}

// TestCheckpointRule: a compaction moves the checkpoint to what it folded;
// a rollback behind it leaves it there (the folded writes belong to the
// compaction's vintage); a build records the checkpoint as its boundary; a
// discard moves it without moving CURRENT; it never moves back.
func TestCheckpointRule(t *testing.T) {
	d, w := newDataset(t)
	one, _ := publishOne(t, w, d, ActionBuild, 0, nil)
	if _, ok, _ := wal.ReadCheckpoint(d.Path(WALDir)); ok {
		t.Fatal("a dataset that never took a write got a checkpoint")
	}
	two, err := publishOne(t, w, d, ActionCompaction, one, compaction(wal.Position{Segment: 1, Offset: 500}.Uint64()))
	if err != nil {
		t.Fatal(err)
	}
	check := func(want uint64, kind string) {
		t.Helper()
		c, ok, err := wal.ReadCheckpoint(d.Path(WALDir))
		if err != nil || !ok || c.Folded != want || (kind != "" && c.Kind != kind) {
			t.Fatalf("checkpoint %+v %v %v, want %d (%s)", c, ok, err, want, kind)
		}
		if e, err := d.WALCheckpoint(); err != nil || e.Folded != want {
			t.Fatalf("effective checkpoint %+v %v, want %d", e, err, want)
		}
	}
	p500 := wal.Position{Segment: 1, Offset: 500}.Uint64()
	check(p500, wal.CheckpointCompaction)
	if _, err := w.Rollback(one, Change{Tool: "test"}); err != nil {
		t.Fatal(err)
	}
	check(p500, "")
	if _, err := w.Rollback(two, Change{Tool: "test"}); err != nil {
		t.Fatal(err)
	}
	check(p500, "")
	// a build records the checkpoint as the boundary of the writes that
	// shadow it
	cp, _ := w.Checkpoint()
	three, err := publishOne(t, w, d, ActionBuild, 0, func(m *manifest.Manifest) { m.WALPosition = cp.Folded })
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := d.Load(three); m.WALPosition != p500 {
		t.Fatalf("build's wal_position %d, want %d", m.WALPosition, p500)
	}
	// a superseding build moves it
	p900 := wal.Position{Segment: 1, Offset: 900}.Uint64()
	four, _ := publishOne(t, w, d, ActionBuild, 0, func(m *manifest.Manifest) { m.WALPosition = p900 })
	check(p900, wal.CheckpointSupersede)
	if f := lastFlip(t, d); f.To != four || f.WALPosition != p900 {
		t.Fatalf("HISTORY of a superseding build: %+v", f)
	}
	// a discard moves it and not CURRENT
	p2000 := wal.Position{Segment: 2, Offset: 100}.Uint64()
	if err := w.Discard(p2000, Change{Tool: "test", Rows: 7}); err != nil {
		t.Fatal(err)
	}
	check(p2000, wal.CheckpointDiscard)
	if f := lastFlip(t, d); f.Action != ActionDiscard || f.From != four || f.To != four || f.Rows != 7 {
		t.Fatalf("HISTORY of a discard: %+v", f)
	}
	// a rollback to the superseding build does not move it back
	if _, err := w.Rollback(four, Change{Tool: "test"}); err != nil {
		t.Fatal(err)
	}
	check(p2000, "")
}

// TestCheckpointRecovered: a crash between the flip of CURRENT and the
// checkpoint's write (and HISTORY's line) is rolled forward: readers take
// the position CURRENT's manifest records at once, the next writer writes
// the file and the missing HISTORY line.
func TestCheckpointRecovered(t *testing.T) {
	d, w := newDataset(t)
	one, _ := publishOne(t, w, d, ActionBuild, 0, nil)
	two, _ := publishOne(t, w, d, ActionCompaction, one, compaction(10))
	// the crash: snapshot three installed and CURRENT flipped, nothing after
	staged, m := stageOne(t, w, d)
	compaction(20)(m)
	if err := w.Install(staged, m); err != nil {
		t.Fatal(err)
	}
	if err := w.SetCurrent(m.SnapshotID); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if c, err := d.WALCheckpoint(); err != nil || c.Folded != 20 || c.Kind != wal.CheckpointRecovered {
		t.Fatalf("effective checkpoint after the crash: %+v %v", c, err)
	}
	w2, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	c, ok, err := wal.ReadCheckpoint(d.Path(WALDir))
	if err != nil || !ok || c.Folded != 20 {
		t.Fatalf("checkpoint file after the next lock: %+v %v %v", c, ok, err)
	}
	if f := lastFlip(t, d); f.From != two || f.To != m.SnapshotID || !f.Recovered || f.Action != ActionCompaction {
		t.Fatalf("recovered HISTORY line: %+v", f)
	}
}

// TestCheckpointUpgrade: a log from before checkpoints existed gets one
// from the vintages present (the furthest any folded in), whatever CURRENT
// names, so a rollback behind a compaction does not bring its writes back.
func TestCheckpointUpgrade(t *testing.T) {
	d, w := newDataset(t)
	one, _ := publishOne(t, w, d, ActionBuild, 0, nil)
	publishOne(t, w, d, ActionCompaction, one, compaction(10))
	if _, err := w.Rollback(one, Change{Tool: "test"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := os.Remove(d.Path(WALDir + "/" + wal.CheckpointFile)); err != nil {
		t.Fatal(err)
	}
	if c, err := d.WALCheckpoint(); err != nil || c.Folded != 10 || c.Kind != wal.CheckpointUpgraded {
		t.Fatalf("checkpoint of an old log: %+v %v", c, err)
	}
	w2, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if c, ok, _ := wal.ReadCheckpoint(d.Path(WALDir)); !ok || c.Folded != 10 || c.Kind != wal.CheckpointUpgraded {
		t.Fatalf("persisted checkpoint: %+v %v", c, ok)
	}
}

// TestLiveEnd: the log's end read without its lock, and whether a server
// holds it.
func TestLiveEnd(t *testing.T) {
	d, _ := newDataset(t)
	if end, err := d.LiveEnd(); err != nil || end != 0 || d.WALHeld() {
		t.Fatalf("no log: %d %v %v", end, err, d.WALHeld())
	}
	l, err := wal.Open(d.Path(WALDir), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pos, err := l.Append(t.Context(), []byte("one"), []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if end, err := d.LiveEnd(); err != nil || end != pos.Uint64() {
		t.Fatalf("log end %d %v, want %d", end, err, pos.Uint64())
	}
	if !d.WALHeld() {
		t.Error("an open log is not seen as held")
	}
	l.Close()
	if d.WALHeld() {
		t.Error("a closed log is seen as held")
	}
	// a partly written record at the end is not counted
	f, err := os.OpenFile(filepath.Join(d.Path(WALDir), "00000001.wal"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{9, 0, 0, 0, 1})
	f.Close()
	if end, err := d.LiveEnd(); err != nil || end != pos.Uint64() {
		t.Fatalf("log end with a torn tail %d %v, want %d", end, err, pos.Uint64())
	}
	_ = fileutil.SyncDir
}

// TestPublishChecked: the check runs on the installed vintage before the
// flip; a failing check leaves CURRENT and HISTORY as they were and the
// vintage installed, unpublished; a passing one publishes as Publish does.
func TestPublishChecked(t *testing.T) {
	d, w := newDataset(t)
	one, err := publishOne(t, w, d, ActionBuild, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	staged, m := stageOne(t, w, d)
	var checked uint64
	bad := errors.New("does not verify")
	err = w.PublishChecked(staged, m, Change{Action: ActionCompaction, Tool: "test", Expect: one}, func(id uint64) error {
		checked = id
		if _, err := d.Load(id); err != nil {
			t.Errorf("the check ran before the vintage was installed: %v", err)
		}
		return bad
	})
	if !errors.Is(err, bad) || checked != m.SnapshotID {
		t.Fatalf("a failing check: %v (checked %d)", err, checked)
	}
	if cur, _ := d.CurrentID(); cur != one {
		t.Fatalf("CURRENT %d after a failed check, want %d", cur, one)
	}
	if f := lastFlip(t, d); f.To != one {
		t.Fatalf("HISTORY moved after a failed check: %+v", f)
	}
	staged, m = stageOne(t, w, d)
	if err := w.PublishChecked(staged, m, Change{Action: ActionCompaction, Tool: "test", Expect: one}, func(uint64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if cur, _ := d.CurrentID(); cur != m.SnapshotID || lastFlip(t, d).Action != ActionCompaction {
		t.Fatalf("CURRENT %d after a passing check, want %d", cur, m.SnapshotID)
	}
}
