package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/pkg/manifest"
)

// installOne stages and installs an empty snapshot (no files) as the next
// id, without flipping CURRENT.
func installOne(t *testing.T, w *Writer, d *Dir) uint64 {
	t.Helper()
	staged, m := stageOne(t, w, d)
	if err := w.Install(staged, m); err != nil {
		t.Fatal(err)
	}
	return m.SnapshotID
}

// stageOne stages an empty snapshot (no rows) as the next id and returns
// its staging directory and manifest.
func stageOne(t *testing.T, w *Writer, d *Dir) (string, *manifest.Manifest) {
	t.Helper()
	id, err := w.NextID()
	if err != nil {
		t.Fatal(err)
	}
	staged, err := w.Stage()
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Format: manifest.Format, FormatVersion: manifest.Version, SnapshotID: id, Dataset: d.Name,
		Created: "2026-01-01T00:00:00Z", Tool: "test"}
	for _, f := range []manifest.File{
		{Path: "data.arrow", Role: manifest.RoleData, Tier: manifest.TierHot, Format: manifest.FormatArrowIPCFile},
		{Path: "index.arrow", Role: manifest.RoleIndex, Format: manifest.FormatArrowIPCFile},
	} {
		if err := os.WriteFile(filepath.Join(staged, f.Path), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		f.Path = SnapshotPath(id) + "/" + f.Path
		f.Checksum = "xxh64:ef46db3751d8e999" // of no bytes
		m.Files = append(m.Files, f)
	}
	return staged, m
}

// TestInstallAndPublish: Install leaves CURRENT alone; PublishInstalled
// flips it forward, logs a publish, leaves an already current vintage
// alone, and refuses to go back (ErrNotNewer) or to a missing vintage.
func TestInstallAndPublish(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "DS"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	one := installOne(t, w, d)
	if _, err := d.CurrentID(); !errors.Is(err, ErrNoCurrent) {
		t.Fatalf("CURRENT after Install: %v", err)
	}
	if from, err := w.PublishInstalled(one, Change{Tool: "test"}); err != nil || from != 0 {
		t.Fatalf("publish 1: from %d, %v", from, err)
	}
	two := installOne(t, w, d)
	if cur, _ := d.CurrentID(); cur != one {
		t.Fatalf("CURRENT = %d after installing %d", cur, two)
	}
	if _, err := os.Stat(d.Path(SnapshotPath(two))); err != nil {
		t.Fatalf("installed snapshot: %v", err)
	}
	if from, err := w.PublishInstalled(two, Change{Tool: "test"}); err != nil || from != one {
		t.Fatalf("publish 2: from %d, %v", from, err)
	}
	if from, err := w.PublishInstalled(two, Change{Tool: "test"}); err != nil || from != two {
		t.Fatalf("publish 2 again: from %d, %v", from, err)
	}
	if _, err := w.PublishInstalled(one, Change{Tool: "test"}); !errors.Is(err, ErrNotNewer) {
		t.Fatalf("publish of an older vintage: %v", err)
	}
	if _, err := w.PublishInstalled(9, Change{Tool: "test"}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("publish of a missing vintage: %v", err)
	}
	flips, err := d.Flips()
	if err != nil || len(flips) != 2 || flips[1].Action != ActionPublish || flips[1].From != one || flips[1].To != two {
		t.Fatalf("HISTORY: %v %+v", err, flips)
	}
	if cur, _ := d.CurrentID(); cur != two {
		t.Fatalf("CURRENT = %d, want %d", cur, two)
	}
}
