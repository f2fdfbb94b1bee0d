package dataset_test

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/pkg/dataset"
)

// TestPublishedFilesReadOnly: every file of a published snapshot is 0444,
// so a restore or a cp over it is refused for anyone but root (invariant 2;
// docs/OPERATIONS.md "Faults").
func TestPublishedFilesReadOnly(t *testing.T) {
	ds := vintages(t, 2)
	n := 0
	err := filepath.WalkDir(filepath.Join(ds, dataset.SnapshotsDir), func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		n++
		if got := fi.Mode().Perm(); got != dataset.PublishedFileMode {
			t.Errorf("%s: mode %v, want %v", p, got, dataset.PublishedFileMode)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no snapshot files found")
	}
}
