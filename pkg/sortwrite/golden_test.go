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
	"github.com/energyscope/servingsnap/pkg/dataset"
)

var update = flag.Bool("update", false, "rewrite the format fixtures under testdata/v2 (TestGoldenV2) or testdata/v3 (TestGoldenV3)")

// fixtureRoot holds the fixtures of the current format version (2: the
// index holds no dictionaries, FORMAT.md §4): a tiny lake and the snapshot
// built from it. The reader's tests open it and the version-1 snapshot
// under testdata/v1 (which no writer rewrites any more) to prove every
// reader still reads every version (STYLE.md §1); this test proves the
// writer still writes exactly version 2. A deliberate format change bumps
// the version and adds testdata/v3 instead of rewriting v2.
const fixtureRoot = "../../testdata/v2"

func writeFixtureLake(t *testing.T, dir string) {
	testlake.WriteParquet(t, dir, "year=2019/part-0.parquet", 2,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("PET.B.M", "PET.A.A", "PET.B.M", "NG.Ü.Q")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2019-02", "2019", "2019-01", "2019-Q4")},
		testlake.Col{Name: "value", Vals: []any{2.5, 10.0, nil, -1.25}},
		testlake.Col{Name: "units", Vals: testlake.Strs("$/bbl", "$/bbl", "$/bbl", "$/MMBtu")},
		testlake.Col{Name: "note", Vals: []any{"rev", nil, nil, "x"}},
	)
	testlake.WriteParquet(t, dir, "year=2020/part-0.parquet", 0,
		testlake.Col{Name: "period", Vals: []any{arrow.Date32(18262), arrow.Date32(18293)}},
		testlake.Col{Name: "series_id", Vals: testlake.Strs("PET.A.A", "PET.B.M")},
		testlake.Col{Name: "value", Vals: []any{11.0, 3.0}},
		testlake.Col{Name: "units", Vals: testlake.Strs("$/bbl", "$/bbl")},
		testlake.Col{Name: "note", Vals: []any{nil, "rev"}},
	)
}

func fixtureOptions(lake, out string) Options {
	return Options{
		Input: lake, Out: out, Parallel: 1, BatchRows: 3, Tool: "servingsnap fixture",
		Now: func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) },
	}
}

func TestGoldenV2(t *testing.T) {
	lake := filepath.Join(fixtureRoot, "lake")
	want := filepath.Join(fixtureRoot, "FIXTURE")
	if *update {
		os.RemoveAll(fixtureRoot)
		writeFixtureLake(t, lake)
		if _, err := Build(t.Context(), fixtureOptions(lake, want)); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(want, "LOCK"))
		os.RemoveAll(filepath.Join(want, ".tmp"))
		os.Remove(filepath.Join(want, "HISTORY"))
		return
	}
	got := filepath.Join(t.TempDir(), "FIXTURE")
	if _, err := Build(t.Context(), fixtureOptions(lake, got)); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"CURRENT", dataset.ManifestPath(1), "snapshots/000001/data.arrow", "snapshots/000001/index.arrow"} {
		a, err := os.ReadFile(filepath.Join(want, rel))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from the version-2 fixture: the writer's output changed. If the format changed on purpose, bump its version and add a testdata/v3 fixture; if not, fix the writer", rel)
		}
	}
}
