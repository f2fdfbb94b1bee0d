package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestColdDamage: a tiered snapshot's cold file damaged in place (same
// size) is refused by a verifying open, naming it; opened without
// verification (a restart), the cold reads that hit the damage are errors
// marked corrupt whose file is cold.vortex, never a panic; reads that
// need no cold rows still succeed.
func TestColdDamage(t *testing.T) {
	cases := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"bytes flipped", func(b []byte) []byte {
			for i := len(b) / 8; i < len(b)*5/8; i++ {
				b[i] ^= 0xa5
			}
			return b
		}},
		{"zeroed", func(b []byte) []byte {
			for i := len(b) / 10; i < len(b)/2; i++ {
				b[i] = 0
			}
			return b
		}},
	}
	pol, err := coldfile.PolicyOf("2023-01-01", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lake := filepath.Join(dir, "lake")
			testsnap.TieredLake(t, lake)
			ds := filepath.Join(dir, "T")
			testsnap.Build(t, lake, ds, func(o *sortwrite.Options) { o.Tiers = pol })
			s, err := Open(ds, Options{})
			if err != nil {
				t.Fatal(err)
			}
			cf, _ := s.Manifest.FileByRole(manifest.RoleCold)
			s.Close()
			path := s.Dataset.Path(cf.Path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o644)
			if err := os.WriteFile(path, tc.damage(b), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(ds, Options{VerifyData: true}); !corrupt.Is(err) || !strings.Contains(err.Error(), coldfile.FileName) {
				t.Fatalf("verifying open: %v, want corrupt naming %s", err, coldfile.FileName)
			}
			s, err = Open(ds, Options{ColdCache: coldfile.NewCache(1 << 20)})
			if err != nil {
				// the footer itself was hit: refused at open, naming the file
				if !corrupt.Is(err) || !strings.Contains(err.Error(), coldfile.FileName) {
					t.Fatalf("open: %v", err)
				}
				return
			}
			defer s.Close()
			x := s.Index()
			bad := 0
			for i := 0; i < x.Len(); i++ {
				e := x.Entry(i)
				if _, _, _, err := s.ColdRange(e, e.FirstPeriod, e.Cold.FirstPeriod-1); err != nil {
					t.Fatalf("series %s: a range before its cold rows read them: %v", e.SeriesID, err)
				}
				_, _, _, err := s.ColdRange(e, e.FirstPeriod, e.LastPeriod)
				if err == nil {
					continue
				}
				bad++
				if p, ok := corrupt.File(err); !corrupt.Is(err) || !ok || p != cf.Path || !strings.Contains(err.Error(), coldfile.FileName) {
					t.Fatalf("series %s: %v (file %q), want corrupt in %s", e.SeriesID, err, p, cf.Path)
				}
			}
			t.Logf("%d of %d series: damage found", bad, x.Len())
			if bad == 0 {
				t.Error("no cold read found the damage")
			}
		})
	}
}
