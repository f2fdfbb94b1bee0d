package sortwrite

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
)

var update = flag.Bool("update", false, "rewrite the format fixtures of the current version under testdata/v5 (TestGoldenV5)")

// fixtureRoot holds the fixtures of the current format version (5: the
// index holds no dictionaries, stores low-cardinality string attributes
// as code columns and has a lookup table over the ids, FORMAT.md §4),
// built from a tiny lake (version 4's: version 2's and 3's, plus the
// attribute source, written as codes while units stays plain utf8):
// FIXTURE without
// tiers, TIERED with --hot-since 2020-01-01 (one series all hot, two split
// between the tiers; its index has the tier columns, its manifest a cold
// file) and VORTEX with --format vortex (every row cold, data.arrow a
// schema only). The readers' tests open them and the snapshots of earlier
// versions under testdata/v1 to v4 (which no writer rewrites any more)
// to prove every reader still reads every version (STYLE.md §1); this
// test proves the writer still writes exactly version 5. A deliberate
// format change bumps the version and adds testdata/v6 instead of
// rewriting v5:
//
//	go test ./pkg/sortwrite -run TestGoldenV5 -update
const fixtureRoot = "../../testdata/v5"

var fixtures = []struct {
	dir      string
	hotSince string
	format   string
}{
	{"FIXTURE", "", ""},
	{"TIERED", "2020-01-01", ""},
	{"VORTEX", "", coldfile.FormatVortex},
}

func writeFixtureLake(t *testing.T, dir string) {
	testlake.WriteParquet(t, dir, "year=2019/part-0.parquet", 2,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("PET.B.M", "PET.A.A", "PET.B.M", "NG.Ü.Q")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2019-02", "2019", "2019-01", "2019-Q4")},
		testlake.Col{Name: "value", Vals: []any{2.5, 10.0, nil, -1.25}},
		testlake.Col{Name: "units", Vals: testlake.Strs("$/bbl", "$/bbl", "$/bbl", "$/MMBtu")},
		testlake.Col{Name: "note", Vals: []any{"rev", nil, nil, "x"}},
		testlake.Col{Name: "source", Vals: testlake.Strs("EIA", "EIA", "EIA", "EIA")},
	)
	testlake.WriteParquet(t, dir, "year=2020/part-0.parquet", 0,
		testlake.Col{Name: "period", Vals: []any{arrow.Date32(18262), arrow.Date32(18293)}},
		testlake.Col{Name: "series_id", Vals: testlake.Strs("PET.A.A", "PET.B.M")},
		testlake.Col{Name: "value", Vals: []any{11.0, 3.0}},
		testlake.Col{Name: "units", Vals: testlake.Strs("$/bbl", "$/bbl")},
		testlake.Col{Name: "note", Vals: []any{nil, "rev"}},
		testlake.Col{Name: "source", Vals: testlake.Strs("EIA", "EIA")},
	)
}

func fixtureOptions(lake, out string) Options {
	return Options{
		Input: lake, Out: out, Parallel: 1, BatchRows: 3, Tool: "servingsnap fixture",
		Now: func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) },
	}
}

func TestGoldenV5(t *testing.T) {
	lake := filepath.Join(fixtureRoot, "lake")
	if *update {
		os.RemoveAll(fixtureRoot)
		writeFixtureLake(t, lake)
	}
	for _, fx := range fixtures {
		t.Run(fx.dir, func(t *testing.T) {
			p, err := coldfile.PolicyOf(fx.hotSince, 0, fx.format)
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(fixtureRoot, fx.dir)
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
			files := []string{"CURRENT", dataset.ManifestPath(1), "snapshots/000001/data.arrow", "snapshots/000001/index.arrow"}
			if p.Tiered() {
				files = append(files, "snapshots/000001/"+coldfile.FileName)
			}
			for _, rel := range files {
				a, err := os.ReadFile(filepath.Join(want, rel))
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(filepath.Join(opt.Out, rel))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Errorf("%s differs from the version-5 fixture %s: the writer's output changed. If the format changed on purpose, bump its version and add a testdata/v6 fixture; if not, fix the writer", rel, fx.dir)
				}
			}
		})
	}
}
