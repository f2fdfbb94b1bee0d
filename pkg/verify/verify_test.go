package verify

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

func TestPristine(t *testing.T) {
	f := getFixture(t)
	for _, opt := range []Options{{}, {Deep: true}, {Deep: true, Against: f.lake}} {
		rep, err := Verify(f.ds, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || !rep.Opens || rep.Truncated {
			t.Fatalf("%+v: not intact:%s", opt, findings(rep))
		}
		if rep.SnapshotID != 1 || rep.Dataset != "SYN" || rep.Manifest != "manifests/000001.json" {
			t.Errorf("identity: %d %q %q", rep.SnapshotID, rep.Dataset, rep.Manifest)
		}
		if rep.Rows != f.m.Stats.Rows || rep.Series != f.m.Stats.Series || rep.Batches < 3 {
			t.Errorf("counts: %d rows %d series %d batches", rep.Rows, rep.Series, rep.Batches)
		}
		var size int64
		for _, fl := range f.m.Files {
			size += fl.Size
		}
		if rep.BytesChecksummed != size {
			t.Errorf("checksummed %d bytes, files hold %d", rep.BytesChecksummed, size)
		}
		b, _ := json.Marshal(rep)
		if !strings.Contains(string(b), `"findings":[]`) || !strings.Contains(string(b), `"notes":[]`) {
			t.Errorf("an intact report should list empty findings and notes: %s", b)
		}
		t.Logf("%s: %d checks in %.3fs", rep.Level, rep.Checks, rep.Seconds)
	}
}

func TestCannotVerify(t *testing.T) {
	f := getFixture(t)
	root := t.TempDir()
	file := filepath.Join(root, "FILE")
	os.WriteFile(file, nil, 0o644)
	empty := filepath.Join(root, "EMPTY")
	os.Mkdir(empty, 0o755)
	for _, tc := range []struct {
		dir string
		opt Options
	}{
		{filepath.Join(root, "MISSING"), Options{}},
		{file, Options{}},
		{empty, Options{}},
		{filepath.Join(root, "bad name"), Options{}},
		{f.ds, Options{SnapshotID: 7}},
		{f.ds, Options{Against: filepath.Join(root, "nolake")}},
		{f.ds, Options{Against: file}},
	} {
		rep, err := Verify(tc.dir, tc.opt)
		if !errors.Is(err, ErrCannotVerify) || rep != nil {
			t.Errorf("%s %+v: err %v, want ErrCannotVerify", tc.dir, tc.opt, err)
		}
	}
}

func TestCurrentProblems(t *testing.T) {
	f := getFixture(t)
	ds := f.freshCopy(t)
	os.Remove(filepath.Join(ds, dataset.CurrentFile))
	rep, err := Verify(ds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Check != CheckCurrent || rep.Findings[0].File != "CURRENT" || rep.SnapshotID != 0 {
		t.Fatalf("missing CURRENT:%s", findings(rep))
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "--snapshot 1") {
		t.Errorf("want a note pointing at the newest manifest, got %q", rep.Notes)
	}
	// Asking for the vintage still verifies it.
	rep, err = Verify(ds, Options{SnapshotID: 1, Deep: true})
	if err != nil || !rep.OK {
		t.Fatalf("--snapshot 1 with CURRENT missing: %v%s", err, findings(rep))
	}
}

func TestVintages(t *testing.T) {
	f := getFixture(t)
	for _, id := range []uint64{1, 2} {
		rep, err := Verify(f.donor, Options{SnapshotID: id, Deep: true})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || rep.SnapshotID != id {
			t.Errorf("vintage %d:%s", id, findings(rep))
		}
	}
}

func TestMaxFindings(t *testing.T) {
	f := getFixture(t)
	ds := f.freshCopy(t)
	editIndex(t, ds, f, index.ColRowOffset, func(a arrow.Array) arrow.Array {
		v := append([]int64(nil), a.(*array.Int64).Int64Values()...)
		for i := range v {
			v[i] += 1000
		}
		return int64s(v)
	})
	rep, err := Verify(ds, Options{Deep: true, MaxFindings: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 10 || !rep.Truncated || len(rep.Notes) == 0 {
		t.Fatalf("want 10 findings and a truncation note, got %d, truncated %v, notes %q", len(rep.Findings), rep.Truncated, rep.Notes)
	}
	rep, err = Verify(ds, Options{Deep: true, MaxFindings: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != int(f.m.Stats.Series) || rep.Truncated {
		t.Fatalf("unbounded: %d findings for %d series", len(rep.Findings), f.m.Stats.Series)
	}
}

func TestEmptyDataset(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	testlake.WriteParquet(t, lake, "a.parquet", 0,
		testlake.Col{Name: "series_id", Vals: []any{}, Typ: arrow.BinaryTypes.String},
		testlake.Col{Name: "period", Vals: []any{}, Typ: arrow.FixedWidthTypes.Date32},
		testlake.Col{Name: "value", Vals: []any{}, Typ: arrow.PrimitiveTypes.Float64})
	ds := filepath.Join(root, "EMPTY")
	testsnap.Build(t, lake, ds, func(o *sortwrite.Options) { o.AllowEmpty = true })
	rep, err := Verify(ds, Options{Deep: true, Against: lake})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Rows != 0 || rep.Series != 0 || rep.Batches != 0 {
		t.Fatalf("empty dataset: %+v%s", rep, findings(rep))
	}
}

func TestFindingString(t *testing.T) {
	for _, tc := range []struct {
		f    Finding
		want string
	}{
		{Finding{"sort", "snapshots/000001/data.arrow", "batch 0 row 3 (row 3)", "bad"}, "snapshots/000001/data.arrow: batch 0 row 3 (row 3): [sort] bad"},
		{Finding{"current", "CURRENT", "", "missing"}, "CURRENT: [current] missing"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

// TestV1Fixture: the committed version-1 snapshot verifies, deep and
// against its lake (every reader keeps reading every format version).
func TestV1Fixture(t *testing.T) {
	rep, err := Verify("../../testdata/v1/FIXTURE", Options{Deep: true, Against: "../../testdata/v1/lake"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.InputRows != rep.Rows+rep.InputDuplicates {
		t.Fatalf("v1 fixture:%s\nnotes %q", findings(rep), rep.Notes)
	}
}
