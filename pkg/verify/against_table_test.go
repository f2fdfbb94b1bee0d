package verify

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// TestAgainstCompaction: a compaction's snapshot holds the live writes it
// folded in, so it differs from the lake; the report says so and calls it
// intact but differing, not corrupt.
func TestAgainstCompaction(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	smallLake(t, lake, nil)
	ds := filepath.Join(root, "DS")
	testsnap.Build(t, lake, ds, nil)
	editManifest(t, ds, func(m *manifest.Manifest) {
		m.Lineage = manifest.Lineage{Kind: dataset.LineageCompaction, Source: "snapshot 1 + wal through 7", Inputs: []manifest.Input{}}
		m.WALPosition = 7
	})
	// The lake without the rows of series C: what the live writes added.
	other := filepath.Join(t.TempDir(), "lake")
	smallLake(t, other, func(i, p, v []any) ([]any, []any, []any) { return i[:5], p[:5], v[:5] })
	rep, err := Verify(ds, Options{Against: other})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != StatusDiffers {
		t.Errorf("status %q, want %q:%s", rep.Status, StatusDiffers, findings(rep))
	}
	if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "snapshot 1 is a compaction (snapshot 1 + wal through 7): it differs from the input by the live writes it folded in") {
		t.Errorf("notes %q do not say the snapshot is a compaction", notes)
	}
}
