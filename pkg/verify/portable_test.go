package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestPortable: a snapshot built with the portable copy lists it and
// verifies deep; a flipped byte is a checksum finding (fast); a copy of
// other rows whose manifest entry was rewritten to match passes the fast
// checks and is caught by deep, which reads its rows back.
func TestPortable(t *testing.T) {
	root := t.TempDir()
	portable := func(o *sortwrite.Options) {
		o.BatchRows = 500
		o.Extra = append(o.Extra, export.PortableStep(export.PortableOptions{}))
	}
	_, ds := testsnap.Sample(t, filepath.Join(root, "a"), "P", 50, 3, portable)
	_, other := testsnap.Sample(t, filepath.Join(root, "b"), "P", 50, 4, portable)
	m := loadManifest(t, ds, 0)
	pf, ok := m.FileByRole(manifest.RolePortable)
	if !ok || pf.Rows != m.Stats.Rows || pf.Format != manifest.FormatParquet || pf.Path != dataset.SnapshotPath(m.SnapshotID)+"/portable.parquet" {
		t.Fatalf("portable entry %+v (ok %v), stats %+v", pf, ok, m.Stats)
	}

	for _, tc := range []struct {
		name      string
		damage    func(t *testing.T, ds string)
		fast      string // the check fast verification reports, "" for none
		deep      string
		deepMatch string
	}{
		{name: "pristine", damage: func(*testing.T, string) {}},
		{name: "flipped byte", damage: func(t *testing.T, ds string) {
			p := filepath.Join(ds, filepath.FromSlash(pf.Path))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, fast: CheckChecksum, deep: CheckChecksum},
		{name: "other rows, manifest rewritten", damage: func(t *testing.T, ds string) {
			om := loadManifest(t, other, 0)
			of, _ := om.FileByRole(manifest.RolePortable)
			b, err := os.ReadFile(filepath.Join(other, filepath.FromSlash(of.Path)))
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(ds, filepath.FromSlash(pf.Path))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			sum, n, err := fileutil.ChecksumFile(p)
			if err != nil {
				t.Fatal(err)
			}
			editManifest(t, ds, func(m *manifest.Manifest) {
				for i := range m.Files {
					if m.Files[i].Role == manifest.RolePortable {
						m.Files[i].Size, m.Files[i].Checksum, m.Files[i].Batches = n, sum, of.Batches
					}
				}
			})
		}, deep: CheckPortable, deepMatch: "series"},
		{name: "not parquet", damage: func(t *testing.T, ds string) {
			p := filepath.Join(ds, filepath.FromSlash(pf.Path))
			b, _ := os.ReadFile(p)
			copy(b, "ARRO")
			os.WriteFile(p, b, 0o644)
			sum, n, _ := fileutil.ChecksumFile(p)
			editManifest(t, ds, func(m *manifest.Manifest) {
				for i := range m.Files {
					if m.Files[i].Role == manifest.RolePortable {
						m.Files[i].Size, m.Files[i].Checksum = n, sum
					}
				}
			})
		}, fast: CheckPortable, deep: CheckPortable, deepMatch: "magic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "P")
			copyTree(t, ds, dst)
			tc.damage(t, dst)
			for _, deep := range []bool{false, true} {
				want := tc.fast
				if deep {
					want = tc.deep
				}
				r, err := Verify(dst, Options{Deep: deep})
				if err != nil {
					t.Fatal(err)
				}
				if want == "" {
					if !r.OK {
						t.Errorf("deep=%v: findings %s", deep, findings(r))
					}
					continue
				}
				found := false
				for _, f := range r.Findings {
					if f.Check == want && f.File == pf.Path && (!deep || tc.deepMatch == "" || strings.Contains(f.Message, tc.deepMatch)) {
						found = true
					}
				}
				if !found {
					t.Errorf("deep=%v: want a %s finding on %s, got %s", deep, want, pf.Path, findings(r))
				}
			}
		})
	}
}
