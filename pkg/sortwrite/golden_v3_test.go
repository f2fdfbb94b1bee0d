package sortwrite

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
)

// fixtureRootV3 holds the fixtures of format version 3 (tiered snapshots:
// manifest version 3 with a cold file, index version 3 with the cold_*
// columns, FORMAT.md §2, §4, §9), built from the same tiny lake as
// version 2's: FIXTURE with --hot-since 2020-01-01 (one series all hot,
// two split between the tiers) and VORTEX with --format vortex (every row
// cold, data.arrow a schema only). pkg/snapshot's TestReadsFixturesV3
// opens them; this test proves the writer still writes exactly them.
// Regenerate (only for a deliberate format change, which then bumps the
// version and adds testdata/v4):
//
//	go test ./pkg/sortwrite -run TestGoldenV3 -update
const fixtureRootV3 = "../../testdata/v3"

var v3Fixtures = []struct {
	dir      string
	hotSince string
	format   string
}{
	{"FIXTURE", "2020-01-01", ""},
	{"VORTEX", "", coldfile.FormatVortex},
}

func TestGoldenV3(t *testing.T) {
	lake := filepath.Join(fixtureRootV3, "lake")
	if *update {
		os.RemoveAll(fixtureRootV3)
		writeFixtureLake(t, lake)
	}
	for _, fx := range v3Fixtures {
		t.Run(fx.dir, func(t *testing.T) {
			p, err := coldfile.PolicyOf(fx.hotSince, 0, fx.format)
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(fixtureRootV3, fx.dir)
			opt := fixtureOptions(lake, want)
			opt.Tiers = p
			if *update {
				if _, err := Build(t.Context(), opt); err != nil {
					t.Fatal(err)
				}
				os.Remove(filepath.Join(want, "LOCK"))
				os.RemoveAll(filepath.Join(want, ".tmp"))
				os.Remove(filepath.Join(want, "HISTORY"))
				return
			}
			opt.Out = filepath.Join(t.TempDir(), fx.dir)
			if _, err := Build(t.Context(), opt); err != nil {
				t.Fatal(err)
			}
			for _, rel := range []string{"CURRENT", dataset.ManifestPath(1), "snapshots/000001/data.arrow", "snapshots/000001/index.arrow", "snapshots/000001/" + coldfile.FileName} {
				a, err := os.ReadFile(filepath.Join(want, rel))
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(opt.Out, rel))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Errorf("%s differs from the version-3 fixture %s: the writer's output changed. If the format changed on purpose, bump its version and add a testdata/v4 fixture; if not, fix the writer", rel, fx.dir)
				}
			}
		})
	}
}
