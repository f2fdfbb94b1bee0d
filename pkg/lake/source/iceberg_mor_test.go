package source_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/testiceberg"
	"github.com/energyscope/servingsnap/pkg/lake/source"
)

// TestIcebergMergeOnReadDeletes reads tables whose deletes are delete files
// (position and equality) and deletion vectors, written by iceberg-go, and
// checks every snapshot against the rows computed from what was written and
// deleted. The table's own summary must count delete files, so a writer that
// fell back to copy-on-write fails the test instead of passing it vacuously.
func TestIcebergMergeOnReadDeletes(t *testing.T) {
	ctx := context.Background()
	wh := t.TempDir()
	tables, err := testiceberg.Write(ctx, wh)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 2 {
		t.Fatalf("want 2 tables, got %d", len(tables))
	}
	for _, tb := range tables {
		t.Run(tb.Name, func(t *testing.T) {
			summary := currentSummary(t, tb.MetadataLocation)
			for _, kind := range tb.Deletes {
				key := map[string]string{"position": "total-position-deletes", "equality": "total-equality-deletes", "dv": "total-position-deletes"}[kind]
				if n := summary[key]; n == "" || n == "0" {
					t.Fatalf("%s deletes: the snapshot summary has %s=%q, so the table holds no delete files: %v", kind, key, n, summary)
				}
			}
			if n := summary["total-delete-files"]; n == "" || n == "0" {
				t.Fatalf("no delete files in the current snapshot: %v", summary)
			}

			for _, c := range []struct {
				name string
				opt  source.Options
				want []testiceberg.Row
			}{
				{"current by table directory", source.Options{Input: testiceberg.TableDir(wh, tb.Name)}, tb.Want},
				{"current by metadata file", source.Options{Input: strings.TrimPrefix(tb.MetadataLocation, "file://")}, tb.Want},
				{"before the deletes", source.Options{Input: testiceberg.TableDir(wh, tb.Name), SnapshotID: tb.BeforeSnapshotID}, tb.Before},
			} {
				t.Run(c.name, func(t *testing.T) {
					got := readAll(t, ctx, c.opt)
					if len(got) != len(c.want) {
						t.Fatalf("got %d rows, want %d", len(got), len(c.want))
					}
					for i := range got {
						if got[i] != c.want[i] {
							t.Fatalf("row %d: got %+v, want %+v", i, got[i], c.want[i])
						}
					}
				})
			}
		})
	}
}

func currentSummary(t *testing.T, metadataLocation string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(strings.TrimPrefix(metadataLocation, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Current   int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID      int64             `json:"snapshot-id"`
			Summary map[string]string `json:"summary"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	for _, s := range md.Snapshots {
		if s.ID == md.Current {
			return s.Summary
		}
	}
	t.Fatalf("%s: current snapshot %d not listed", metadataLocation, md.Current)
	return nil
}

func readAll(t *testing.T, ctx context.Context, opt source.Options) []testiceberg.Row {
	t.Helper()
	tbl, err := source.Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if tbl.Kind != source.KindIceberg || !tbl.ReadsRecords() {
		t.Fatalf("kind %s, reads records %v: want an Iceberg table", tbl.Kind, tbl.ReadsRecords())
	}
	var out []testiceberg.Row
	for _, f := range tbl.Files {
		recs, err := tbl.Records(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", f.Rel, err)
		}
		for _, rec := range recs {
			out = append(out, rowsOf(t, rec)...)
			rec.Release()
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Series != out[j].Series {
			return out[i].Series < out[j].Series
		}
		return out[i].Period < out[j].Period
	})
	return out
}

func rowsOf(t *testing.T, rec arrow.RecordBatch) []testiceberg.Row {
	t.Helper()
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("record has no column %s: %s", name, rec.Schema())
		}
		return rec.Column(idx[0])
	}
	ids, periods := col("series_id").(*array.String), col("period").(*array.Date32)
	values, regions := col("value").(*array.Float64), col("region").(*array.String)
	out := make([]testiceberg.Row, rec.NumRows())
	for i := range out {
		out[i] = testiceberg.Row{
			Series: ids.Value(i),
			Period: periods.Value(i).ToTime().Format(time.DateOnly),
			Value:  values.Value(i),
			Region: regions.Value(i),
		}
	}
	return out
}

// TestIcebergMissingDeleteFile: a delete file or deletion vector the
// snapshot names but that is gone is an error naming it, never a read
// that silently keeps the deleted rows.
func TestIcebergMissingDeleteFile(t *testing.T) {
	ctx := context.Background()
	wh := t.TempDir()
	tables, err := testiceberg.Write(ctx, wh)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		t.Run(tb.Name, func(t *testing.T) {
			files, err := os.ReadDir(filepath.Join(testiceberg.TableDir(wh, tb.Name), "data"))
			if err != nil {
				t.Fatal(err)
			}
			// Merge-on-read deletes add files and rewrite none, so the
			// files under data/ that the snapshot before the deletes does
			// not read are delete files.
			before := filesOf(t, ctx, source.Options{Input: testiceberg.TableDir(wh, tb.Name), SnapshotID: tb.BeforeSnapshotID})
			var victim string
			for _, f := range files {
				if !before[f.Name()] {
					victim = f.Name()
					break
				}
			}
			if victim == "" {
				t.Fatal("no delete file found among the data files")
			}
			if err := os.Remove(filepath.Join(testiceberg.TableDir(wh, tb.Name), "data", victim)); err != nil {
				t.Fatal(err)
			}
			_, err = readAllErr(ctx, source.Options{Input: testiceberg.TableDir(wh, tb.Name)})
			if err == nil || !strings.Contains(err.Error(), victim) {
				t.Fatalf("read with %s missing: %v; want an error naming it", victim, err)
			}
		})
	}
}

func filesOf(t *testing.T, ctx context.Context, opt source.Options) map[string]bool {
	t.Helper()
	tbl, err := source.Open(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	out := map[string]bool{}
	for _, f := range tbl.Files {
		out[filepath.Base(f.Name)] = true
	}
	return out
}

func readAllErr(ctx context.Context, opt source.Options) (int, error) {
	tbl, err := source.Open(ctx, opt)
	if err != nil {
		return 0, err
	}
	defer tbl.Close()
	n := 0
	for _, f := range tbl.Files {
		recs, err := tbl.Records(ctx, f)
		if err != nil {
			return n, err
		}
		for _, rec := range recs {
			n += int(rec.NumRows())
			rec.Release()
		}
	}
	return n, nil
}
