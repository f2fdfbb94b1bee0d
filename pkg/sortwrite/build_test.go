package sortwrite

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
)

func day(s string) int32 {
	d, err := period.Parse(s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestBuildSortsAndIndexes(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "PET")
	// Two partitions, rows shuffled, columns in different orders, an
	// attribute column, a varying column, a column missing in one file,
	// ids that are prefixes of each other, periods in several formats.
	testlake.WriteParquet(t, in, "year=2019/part-0.parquet", 2,
		testlake.Col{Name: "value", Vals: testlake.Floats(3, 1, 2, 9)},
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A.B", "A", "A", "AB")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2019-03", "2019", "2019Q3", "2019-W02")},
		testlake.Col{Name: "units", Vals: testlake.Strs("$/bbl", "$/gal", "$/gal", "t")},
		testlake.Col{Name: "note", Vals: testlake.Strs("x", "p", "q", "z")},
	)
	testlake.WriteParquet(t, in, "year=2020/part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "A.B")},
		testlake.Col{Name: "period", Vals: testlake.Strs("20200101", "2020-02-15")},
		testlake.Col{Name: "value", Vals: []any{nil, 4.0}},
		testlake.Col{Name: "units", Vals: testlake.Strs("$/gal", "$/bbl")},
	)
	sum, err := build(t, in, out, func(o *Options) { o.BatchRows = 3 })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows != 6 || sum.Series != 3 || sum.SnapshotID != 1 || sum.ParentID != 0 {
		t.Fatalf("summary = %+v", sum)
	}
	if !reflect.DeepEqual(sum.Attributes, []string{"units"}) || !reflect.DeepEqual(sum.DataColumns, []string{"series_code", "period", "value", "note"}) {
		t.Fatalf("attributes %v, data columns %v", sum.Attributes, sum.DataColumns)
	}
	m, rows, xrec := readBack(t, out)
	want := map[string][]seriesRow{
		"A":   {{day("2019-01-01"), 1.0}, {day("2019-07-01"), 2.0}, {day("2020-01-01"), nil}},
		"A.B": {{day("2019-03-01"), 3.0}, {day("2020-02-15"), 4.0}},
		"AB":  {{day("2019-01-07"), 9.0}},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows = %v\nwant %v", rows, want)
	}
	x, err := index.New(xrec)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		id                   string
		off, n               int64
		batch, boff          int
		first, last, latestP int32
		latestOK             bool
	}
	wantIdx := []entry{
		{"A", 0, 3, 0, 0, day("2019-01-01"), day("2020-01-01"), day("2019-07-01"), true},
		{"A.B", 3, 2, 1, 0, day("2019-03-01"), day("2020-02-15"), day("2020-02-15"), true},
		{"AB", 5, 1, 1, 2, day("2019-01-07"), day("2019-01-07"), day("2019-01-07"), true},
	}
	if x.Len() != len(wantIdx) {
		t.Fatalf("index has %d rows", x.Len())
	}
	for i, w := range wantIdx {
		e := x.Entry(i)
		lp, ok := x.Latest(i)
		got := entry{e.SeriesID, e.RowOffset, e.RowCount, e.Batch, e.BatchOffset, e.FirstPeriod, e.LastPeriod, lp, ok}
		if got != w {
			t.Errorf("index row %d = %+v, want %+v", i, got, w)
		}
	}
	if got := x.LatestValues().GetOneForMarshal(0); got != 2.0 {
		t.Errorf("latest value of A = %v, want 2 (the null 2020 row is skipped)", got)
	}
	if m.Stats.FirstPeriod != "2019-01-01" || m.Stats.LastPeriod != "2020-02-15" {
		t.Errorf("stats = %+v", m.Stats)
	}
	if len(m.Lineage.Inputs) != 2 || m.Lineage.Inputs[0].Path != "year=2019/part-0.parquet" || m.Lineage.Inputs[0].Rows != 4 {
		t.Errorf("lineage = %+v", m.Lineage)
	}
	if d, _ := m.FileByRole(manifest.RoleData); d.Batches != 2 {
		t.Errorf("data batches = %d, want 2 (series cut at batch-rows 3)", d.Batches)
	}
}

func TestBuildTwiceMakesChild(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "DS")
	testlake.WriteParquet(t, in, "a.parquet", 0, testlake.Col{Name: "series_id", Vals: testlake.Strs("S")}, testlake.Col{Name: "period", Vals: testlake.Strs("2020")}, testlake.Col{Name: "value", Vals: testlake.Floats(1)})
	if _, err := build(t, in, out, nil); err != nil {
		t.Fatal(err)
	}
	// A crashed writer's leftovers: a staging dir and an orphan snapshot.
	os.MkdirAll(filepath.Join(out, ".tmp", "build-123"), 0o755)
	os.MkdirAll(filepath.Join(out, "snapshots", "000007"), 0o755)
	sum, err := build(t, in, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.SnapshotID != 2 || sum.ParentID != 1 {
		t.Fatalf("second build = snapshot %d parent %d, want 2 and 1", sum.SnapshotID, sum.ParentID)
	}
	for _, p := range []string{".tmp/build-123", "snapshots/000007"} {
		if _, err := os.Stat(filepath.Join(out, p)); !os.IsNotExist(err) {
			t.Errorf("%s survived the next build", p)
		}
	}
	ds, _ := dataset.Open(out)
	ids, _ := ds.IDs()
	if !reflect.DeepEqual(ids, []uint64{1, 2}) {
		t.Errorf("vintages = %v", ids)
	}
	if id, _ := ds.CurrentID(); id != 2 {
		t.Errorf("CURRENT = %d", id)
	}
}

func TestOnDuplicateLast(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "DS")
	testlake.WriteParquet(t, in, "year=2019/part-0.parquet", 0, testlake.Col{Name: "series_id", Vals: testlake.Strs("S", "S")}, testlake.Col{Name: "period", Vals: testlake.Strs("2020-01", "2020-02")}, testlake.Col{Name: "value", Vals: testlake.Floats(1, 2)})
	testlake.WriteParquet(t, in, "year=2020/part-0.parquet", 0, testlake.Col{Name: "series_id", Vals: testlake.Strs("S")}, testlake.Col{Name: "period", Vals: testlake.Strs("2020-01-01")}, testlake.Col{Name: "value", Vals: testlake.Floats(10)})
	testlake.WriteParquet(t, in, "year=2020/part-1.parquet", 0, testlake.Col{Name: "series_id", Vals: testlake.Strs("S")}, testlake.Col{Name: "period", Vals: testlake.Strs("202001")}, testlake.Col{Name: "value", Vals: testlake.Floats(100)})
	sum, err := build(t, in, out, func(o *Options) { o.OnDuplicate = OnDuplicateLast })
	if err != nil {
		t.Fatal(err)
	}
	if sum.DuplicatesDropped != 2 {
		t.Errorf("dropped %d, want 2", sum.DuplicatesDropped)
	}
	_, rows, _ := readBack(t, out)
	want := []seriesRow{{day("2020-01-01"), 100.0}, {day("2020-02-01"), 2.0}}
	if !reflect.DeepEqual(rows["S"], want) {
		t.Errorf("rows = %v, want %v (the later file wins)", rows["S"], want)
	}
}

// TestBadInput checks that every input error names where it is.
func TestBadInput(t *testing.T) {
	idv := func(ids ...string) testlake.Col { return testlake.Col{Name: "series_id", Vals: testlake.Strs(ids...)} }
	cases := []struct {
		name  string
		files func(t *testing.T, dir string)
		opt   func(*Options)
		want  []string // substrings of the error
		open  string   // the phase that failed: left open, so not drawn as done ("" when none began)
	}{
		{"type conflict", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), testlake.Col{Name: "period", Vals: testlake.Strs("2020")}, testlake.Col{Name: "value", Vals: testlake.Floats(1)})
			testlake.WriteParquet(t, d, "b.parquet", 0, idv("S"), testlake.Col{Name: "period", Vals: testlake.Strs("2021")}, testlake.Col{Name: "value", Vals: []any{int64(1)}})
		}, nil, []string{`column "value"`, "a.parquet", "b.parquet", "float64", "int64"}, "scan"},
		{"null series id", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 2, testlake.Col{Name: "series_id", Vals: []any{"S", "S", "S", nil}}, testlake.Col{Name: "period", Vals: testlake.Strs("2020", "2021", "2022", "2023")}, testlake.Col{Name: "value", Vals: testlake.Floats(1, 2, 3, 4)})
		}, nil, []string{"a.parquet row group 1 row 1", "series id is null"}, "read"},
		{"bad period", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "year=2020/p.parquet", 2, idv("S", "S", "S"), testlake.Col{Name: "period", Vals: testlake.Strs("2020-01", "2020-02", "2020-13")}, testlake.Col{Name: "value", Vals: testlake.Floats(1, 2, 3)})
		}, nil, []string{"year=2020/p.parquet row group 1 row 0", `"2020-13"`, `column "period"`}, "read"},
		{"null period", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "p.parquet", 0, idv("S", "S"), testlake.Col{Name: "period", Vals: []any{"2020", nil}}, testlake.Col{Name: "value", Vals: testlake.Floats(1, 2)})
		}, nil, []string{"p.parquet row group 0 row 1", "null"}, "read"},
		{"duplicate", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "year=2019/a.parquet", 0, idv("X", "S"), testlake.Col{Name: "period", Vals: testlake.Strs("2020", "2020-01")}, testlake.Col{Name: "value", Vals: testlake.Floats(1, 2)})
			testlake.WriteParquet(t, d, "year=2020/b.parquet", 0, idv("S"), testlake.Col{Name: "period", Vals: testlake.Strs("2020-01-01")}, testlake.Col{Name: "value", Vals: testlake.Floats(3)})
		}, nil, []string{`duplicate key (series_id "S", period 2020-01-01)`, "year=2019/a.parquet row group 0 row 1", "year=2020/b.parquet row group 0 row 0", "--on-duplicate=last"}, "sort"},
		{"missing series column", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, testlake.Col{Name: "sid", Vals: testlake.Strs("S")}, testlake.Col{Name: "period", Vals: testlake.Strs("2020")}, testlake.Col{Name: "value", Vals: testlake.Floats(1)})
		}, nil, []string{`no series column "series_id"`, "sid", "--series-column"}, "scan"},
		{"series column missing in one file", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), testlake.Col{Name: "period", Vals: testlake.Strs("2020")}, testlake.Col{Name: "value", Vals: testlake.Floats(1)})
			testlake.WriteParquet(t, d, "b.parquet", 0, testlake.Col{Name: "period", Vals: testlake.Strs("2021")}, testlake.Col{Name: "value", Vals: testlake.Floats(1)})
		}, nil, []string{"b.parquet", `no series column "series_id"`}, "read"},
		{"string value column", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), testlake.Col{Name: "period", Vals: testlake.Strs("2020")}, testlake.Col{Name: "value", Vals: testlake.Strs("1.5")})
		}, nil, []string{`value column "value" has type utf8`, "a.parquet"}, "scan"},
		{"not parquet", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "junk.parquet"), []byte("hello"), 0o644)
		}, nil, []string{"junk.parquet", "not a readable Parquet file"}, "scan"},
		{"chunk outside the file", func(t *testing.T, d string) {
			var ids, ps, vs []any
			for i := 0; i < 20000; i++ {
				ids, ps, vs = append(ids, "S"), append(ps, arrow.Date32(i)), append(vs, math.Sin(float64(i)))
			}
			testlake.WriteParquet(t, d, "cut.parquet", 0, testlake.Col{Name: "series_id", Vals: ids}, testlake.Col{Name: "period", Vals: ps}, testlake.Col{Name: "value", Vals: vs})
			testlake.CutPages(t, filepath.Join(d, "cut.parquet"), 32<<10)
		}, nil, []string{"cut.parquet", "is outside the file"}, "scan"},
		{"no inputs", func(t *testing.T, d string) {}, nil, []string{"holds no .parquet files"}, ""},
		{"bad on-duplicate", func(t *testing.T, d string) {
			testlake.WriteParquet(t, d, "a.parquet", 0, idv("S"), testlake.Col{Name: "period", Vals: testlake.Strs("2020")}, testlake.Col{Name: "value", Vals: testlake.Floats(1)})
		}, func(o *Options) { o.OnDuplicate = "first" }, []string{`on-duplicate "first"`}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, out := t.TempDir(), filepath.Join(t.TempDir(), "DS")
			tc.files(t, in)
			log := &phaseLog{}
			_, err := build(t, in, out, func(o *Options) {
				o.Progress = log
				if tc.opt != nil {
					tc.opt(o)
				}
			})
			if err == nil {
				t.Fatal("build succeeded")
			}
			var wantOpen []string
			if tc.open != "" {
				wantOpen = []string{tc.open}
			}
			if got := log.open(); !reflect.DeepEqual(got, wantOpen) {
				t.Errorf("phases not done: %v, want %v", got, wantOpen)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// Nothing was published.
			if _, err := os.Stat(filepath.Join(out, "CURRENT")); !os.IsNotExist(err) {
				t.Errorf("a failed build left CURRENT behind")
			}
			if left, _ := os.ReadDir(filepath.Join(out, dataset.TmpDir)); len(left) != 0 {
				t.Errorf("a failed build left %v in the staging area", left)
			}
		})
	}
}

func TestBigSeriesGetsOwnBatch(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "DS")
	var ids, ps []any
	var vs []any
	for i := 0; i < 50; i++ {
		ids = append(ids, "BIG")
		ps = append(ps, arrow.Date32(i))
		vs = append(vs, float64(i))
	}
	for _, s := range []string{"A", "C"} {
		ids, ps, vs = append(ids, s), append(ps, arrow.Date32(0)), append(vs, 1.0)
	}
	testlake.WriteParquet(t, in, "a.parquet", 7, testlake.Col{Name: "series_id", Vals: ids}, testlake.Col{Name: "period", Vals: ps}, testlake.Col{Name: "value", Vals: vs})
	if _, err := build(t, in, out, func(o *Options) { o.BatchRows = 10 }); err != nil {
		t.Fatal(err)
	}
	m, rows, xrec := readBack(t, out)
	x, _ := index.New(xrec)
	if d, _ := m.FileByRole(manifest.RoleData); d.Batches != 3 {
		t.Errorf("batches = %d, want 3 (A | BIG | C)", d.Batches)
	}
	if e := x.Entry(1); e.SeriesID != "BIG" || e.Batch != 1 || e.BatchOffset != 0 || e.RowCount != 50 {
		t.Errorf("BIG = %+v", e)
	}
	if len(rows["BIG"]) != 50 {
		t.Errorf("BIG has %d rows", len(rows["BIG"]))
	}
}
