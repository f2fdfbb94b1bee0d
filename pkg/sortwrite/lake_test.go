package sortwrite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
)

// tableRows reads a published snapshot back as the table it was built
// from: one map per row, every column (data columns and per-series
// attributes) under its input name, periods as YYYY-MM-DD, sorted by
// (series, period).
func tableRows(t testing.TB, dsDir string) []map[string]any {
	t.Helper()
	ds, err := dataset.Open(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Current()
	if err != nil {
		t.Fatal(err)
	}
	df, _ := m.FileByRole(manifest.RoleData)
	xf, _ := m.FileByRole(manifest.RoleIndex)
	xm, err := arrowfile.Load(ds.Path(xf.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer xm.Close()
	xrec, err := xm.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	defer xrec.Release()
	x, err := index.New(xrec)
	if err != nil {
		t.Fatal(err)
	}
	afields, acols := x.Attributes()
	dm, err := arrowfile.Map(ds.Path(df.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	var out []map[string]any
	for b := 0; b < dm.Reader.NumRecords(); b++ {
		rec, err := dm.Batch(b)
		if err != nil {
			t.Fatal(err)
		}
		codes := rec.Column(0).(*array.Uint32).Uint32Values()
		periods := rec.Column(1).(*array.Date32).Date32Values()
		for i := range codes {
			r := map[string]any{
				m.Build.SeriesColumn: x.SeriesID(int(codes[i])),
				m.Build.PeriodColumn: period.Format(int32(periods[i])),
			}
			for c := 2; c < int(rec.NumCols()); c++ {
				name := rec.Schema().Field(c).Name
				if c == 2 {
					name = m.Build.ValueColumn
				}
				r[name] = jsonValue(rec.Column(c), i)
			}
			for a, f := range afields {
				if f.Name != m.Build.SeriesColumn {
					r[f.Name] = jsonValue(acols[a], int(codes[i]))
				}
			}
			out = append(out, r)
		}
		rec.Release()
	}
	sortTableRows(out, m.Build.SeriesColumn, m.Build.PeriodColumn)
	return out
}

func jsonValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	if d, ok := a.(*array.Dictionary); ok {
		return jsonValue(d.Dictionary(), d.GetValueIndex(i))
	}
	b, _ := json.Marshal(a.GetOneForMarshal(i))
	var v any
	json.Unmarshal(b, &v)
	return v
}

func sortTableRows(rows []map[string]any, series, per string) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a[series] != b[series] {
			return fmt.Sprint(a[series]) < fmt.Sprint(b[series])
		}
		return fmt.Sprint(a[per]) < fmt.Sprint(b[per])
	})
}

func ver(v int64) *int64 { return &v }

// The Delta fixture Spark wrote (testdata/delta/make_spark_dv.py):
// deletion vectors on disk, column mapping by name with a renamed column,
// V2 checkpoints with Parquet sidecars, partition values from the log.
// Every version builds to exactly the rows Spark read at that version.
func TestDeltaSparkFixtureEveryVersion(t *testing.T) {
	fixture := filepath.Join("..", "..", "testdata", "delta", "spark_dv")
	b, err := os.ReadFile(fixture + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		Columns []string         `json:"columns"`
		Rows    []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v <= 8; v++ {
		t.Run(fmt.Sprint("version ", v), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "DV")
			sum, err := build(t, fixture, out, func(o *Options) { o.Lake.TableVersion = ver(v) })
			exp := want[fmt.Sprint(v)]
			if len(exp.Rows) == 0 {
				if err == nil || !strings.Contains(err.Error(), "no data files") {
					t.Fatalf("empty version: err %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := tableRows(t, out)
			sortTableRows(exp.Rows, "series_id", "period")
			for _, r := range exp.Rows {
				for _, c := range exp.Columns {
					if _, ok := r[c]; !ok {
						r[c] = nil
					}
				}
			}
			// A column that is null in every row of the version is not in
			// the snapshot (no file of the version has it).
			for _, r := range got {
				for _, c := range exp.Columns {
					if _, ok := r[c]; !ok {
						r[c] = nil
					}
				}
			}
			if !reflect.DeepEqual(got, exp.Rows) {
				t.Fatalf("version %d: %d rows, want %d\n got %v\nwant %v", v, len(got), len(exp.Rows), got, exp.Rows)
			}
			l := sum.Lineage
			if l.Kind != source.KindDelta || l.LakeSnapshotID != fmt.Sprint(v) || l.TableVersion == nil || *l.TableVersion != v || l.Location == "" {
				t.Fatalf("lineage %+v", l)
			}
		})
	}
}

func TestDeltaUnknownReaderFeature(t *testing.T) {
	dir := copyTree(t, filepath.Join("..", "..", "testdata", "delta", "spark_dv"))
	p := filepath.Join(dir, "_delta_log", "00000000000000000009.json")
	os.WriteFile(p, []byte(`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors","columnMapping","v2Checkpoint","futureMagic"],"writerFeatures":["deletionVectors"]}}`+"\n"), 0o644)
	out := filepath.Join(t.TempDir(), "X")
	_, err := build(t, dir, out, nil)
	if err == nil || !strings.Contains(err.Error(), "futureMagic") {
		t.Fatalf("err %v, want one naming futureMagic", err)
	}
	if _, err := os.Stat(filepath.Join(out, "CURRENT")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("something was published: %v", err)
	}
	// The version before the upgrade still reads.
	if _, err := build(t, dir, out, func(o *Options) { o.Lake.TableVersion = ver(8) }); err != nil {
		t.Fatal(err)
	}
}

func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, rel), b, 0o644); err != nil {
			return err
		}
		return os.Chtimes(filepath.Join(dst, rel), info.ModTime(), info.ModTime())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
