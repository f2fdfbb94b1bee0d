package sortwrite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// TestExtraFiles: an extra step sees the staged data and index (paths
// relative to the staging directory) and the manifest about to be
// published; its file is published and listed, prefixed like the others.
// A failing step publishes nothing and leaves no staging directory.
func TestExtraFiles(t *testing.T) {
	in := t.TempDir()
	testlake.WriteParquet(t, in, "a.parquet", 0,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "A", "B")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2020", "2021", "2020")},
		testlake.Col{Name: "value", Vals: testlake.Floats(1, 2, 3)})
	ok := func(_ context.Context, staged string, m *manifest.Manifest) (manifest.File, error) {
		if len(m.Files) != 2 || m.Stats.Rows != 3 || m.SnapshotID == 0 {
			t.Errorf("step sees files %+v, stats %+v", m.Files, m.Stats)
		}
		for _, f := range m.Files {
			if _, err := os.Stat(filepath.Join(staged, f.Path)); err != nil {
				t.Errorf("staged %s: %v", f.Path, err)
			}
		}
		p := filepath.Join(staged, "extra.parquet")
		if err := os.WriteFile(p, []byte("PAR1PAR1"), 0o644); err != nil {
			return manifest.File{}, err
		}
		sum, n, err := fileutil.ChecksumFile(p)
		return manifest.File{Path: "extra.parquet", Role: manifest.RolePortable, Format: manifest.FormatParquet, Size: n, Rows: 3, Batches: 1, Checksum: sum}, err
	}
	out := filepath.Join(t.TempDir(), "X")
	sum, err := build(t, in, out, func(o *Options) { o.Extra = append(o.Extra, ok) })
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := readBack(t, out)
	f, has := m.FileByRole(manifest.RolePortable)
	if !has || f.Path != dataset.SnapshotPath(sum.SnapshotID)+"/extra.parquet" || len(sum.Files) != 3 {
		t.Fatalf("manifest files %+v, summary %+v", m.Files, sum.Files)
	}
	if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(f.Path))); err != nil {
		t.Fatal(err)
	}

	boom := errors.New("boom")
	fail := func(context.Context, string, *manifest.Manifest) (manifest.File, error) { return manifest.File{}, boom }
	if _, err := build(t, in, out, func(o *Options) { o.Extra = append(o.Extra, fail) }); !errors.Is(err, boom) {
		t.Fatalf("failing step: %v", err)
	}
	ds, _ := dataset.Open(out)
	if cur, _ := ds.CurrentID(); cur != sum.SnapshotID {
		t.Errorf("CURRENT is %d after a failed build, want %d", cur, sum.SnapshotID)
	}
	if ents, _ := os.ReadDir(ds.Path(dataset.TmpDir)); len(ents) != 0 {
		t.Errorf("staging left behind: %v", ents)
	}
}
