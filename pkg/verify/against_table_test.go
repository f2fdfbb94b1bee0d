package verify

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testiceberg"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestAgainstTables: --against reads a Delta or an Iceberg table as the
// builder does (deletion vectors, delete files, column mapping, partition
// values): a snapshot of the table is intact against it, at the version
// it was built from even after the table moved on; against another
// version of the same rows' table, it differs (not corrupt).
func TestAgainstTables(t *testing.T) {
	delta := filepath.Join("..", "..", "testdata", "delta", "spark_dv")
	wh := t.TempDir()
	tables, err := testiceberg.Write(context.Background(), wh)
	if err != nil {
		t.Fatal(err)
	}
	ice := testiceberg.TableDir(wh, tables[0].Name)
	moved := filepath.Join(t.TempDir(), "spark_dv") // another table: compared at its latest
	copyTree(t, delta, moved)
	v := func(n int64) *int64 { return &n }

	cases := []struct {
		name    string
		input   string
		build   func(*sortwrite.Options)
		against string // "" : the input
		status  string
		note    string
	}{
		{"delta latest", delta, nil, "", StatusIntact, "at snapshot 8"},
		{"delta at the version built", delta, func(o *sortwrite.Options) { o.Lake.TableVersion = v(5) }, "", StatusIntact, "at snapshot 5"},
		{"delta version 5 against another table's latest", delta, func(o *sortwrite.Options) { o.Lake.TableVersion = v(5) }, moved, StatusDiffers, "at snapshot 8"},
		{"iceberg current", ice, nil, "", StatusIntact, "iceberg table"},
		{"iceberg at the snapshot built", ice, func(o *sortwrite.Options) { o.Lake.SnapshotID = tables[0].BeforeSnapshotID }, "", StatusIntact, "iceberg table"},
		{"iceberg before its deletes, against another table", ice, func(o *sortwrite.Options) { o.Lake.SnapshotID = tables[0].BeforeSnapshotID },
			testiceberg.TableDir(wh, tables[1].Name), StatusDiffers, "iceberg table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := filepath.Join(t.TempDir(), "DS")
			testsnap.Build(t, tc.input, ds, tc.build)
			against := tc.against
			if against == "" {
				against = tc.input
			}
			rep, err := Verify(ds, Options{Against: against})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != tc.status || rep.InputRows == 0 {
				t.Errorf("status %q, input rows %d; want %q:%s", rep.Status, rep.InputRows, tc.status, findings(rep))
			}
			if !strings.Contains(strings.Join(rep.Notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", rep.Notes, tc.note)
			}
		})
	}
}

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
