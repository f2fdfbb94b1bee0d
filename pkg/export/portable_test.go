package export_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// TestPortableLayout: the portable copy holds the rows export writes, in
// row groups that start at series boundaries (so their series_id ranges
// are disjoint and ascending), with sorting_columns, statistics, the page
// index and zstd on every column chunk, and dictionary encoding on all but
// period and value.
func TestPortableLayout(t *testing.T) {
	root := t.TempDir()
	_, ds := testsnap.Sample(t, root, "P", 40, 7, nil)
	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := query.FromSnapshot("P", s)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []int64{1, 100, 1000, 1 << 30} {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		var buf bytes.Buffer
		res, err := export.WritePortable(context.Background(), r, &buf, export.PortableOptions{RowGroupRows: target, Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		mem.AssertSize(t, 0)
		pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		md := pf.MetaData()
		if md.NumRows != res.Rows || res.Series != 40 || md.NumRowGroups() != res.RowGroups {
			t.Fatalf("target %d: file has %d rows in %d groups, result %+v", target, md.NumRows, md.NumRowGroups(), res)
		}
		// Every series in exactly one row group (none is longer than the
		// maximum), groups at least target rows but the last.
		seen := map[string]int{}
		var prevMax []byte
		for g := 0; g < md.NumRowGroups(); g++ {
			rg := md.RowGroup(g)
			if sc := rg.SortingColumns(); len(sc) != 2 || sc[0].ColumnIdx != 0 || sc[1].ColumnIdx != 1 || sc[0].Descending || sc[1].Descending {
				t.Fatalf("row group %d sorting columns %+v, want series_id, period ascending", g, sc)
			}
			if g < md.NumRowGroups()-1 && rg.NumRows() < min(target, res.Rows) {
				t.Errorf("target %d: row group %d has %d rows", target, g, rg.NumRows())
			}
			for c := 0; c < rg.NumColumns(); c++ {
				cc, err := rg.ColumnChunk(c)
				if err != nil {
					t.Fatal(err)
				}
				if cc.Compression() != compress.Codecs.Zstd {
					t.Errorf("row group %d column %d: codec %v, want zstd", g, c, cc.Compression())
				}
				if ok, _ := cc.StatsSet(); !ok {
					t.Errorf("row group %d column %d: no statistics", g, c)
				}
				if cc.GetColumnIndexLocation() == nil || cc.GetOffsetIndexLocation() == nil {
					t.Errorf("row group %d column %d: no page index", g, c)
				}
				// series_id and the attributes are dictionary-encoded;
				// period and value are plain.
				name := md.Schema.Column(c).Name()
				wantDict := name != "period" && name != "value"
				if got := slices.Contains(cc.Encodings(), parquet.Encodings.RLEDict); got != wantDict {
					t.Errorf("row group %d column %s: encodings %v, dictionary %v, want %v", g, name, cc.Encodings(), got, wantDict)
				}
			}
			cc, _ := rg.ColumnChunk(0)
			st, err := cc.Statistics()
			if err != nil {
				t.Fatal(err)
			}
			bs := st.(*metadata.ByteArrayStatistics)
			if prevMax != nil && bytes.Compare(bs.Min(), prevMax) <= 0 {
				t.Fatalf("target %d: row group %d starts at %q, not after the previous group's last series %q", target, g, bs.Min(), prevMax)
			}
			prevMax = slices.Clone(bs.Max())
			seen[string(bs.Min())]++
		}
		if target >= 1<<30 && md.NumRowGroups() != 1 {
			t.Errorf("an unreachable target made %d row groups", md.NumRowGroups())
		}
		if target == 1 && md.NumRowGroups() != 40 {
			t.Errorf("target 1: %d row groups, want one per series (40)", md.NumRowGroups())
		}
	}
}

// TestPortableRowsEqualExport: the portable copy's rows are export's.
func TestPortableRowsEqualExport(t *testing.T) {
	root := t.TempDir()
	_, ds := testsnap.Sample(t, root, "P", 25, 3, nil)
	out := filepath.Join(t.TempDir(), "all.parquet")
	if _, err := export.Export(context.Background(), export.Options{Dataset: ds, Out: out}); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := query.FromSnapshot("P", s)
	if err != nil {
		t.Fatal(err)
	}
	portable := filepath.Join(t.TempDir(), "portable.parquet")
	var buf bytes.Buffer
	if _, err := export.WritePortable(context.Background(), r, &buf, export.PortableOptions{RowGroupRows: 50}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, portable, buf.Bytes())
	a, b := readTable(t, out), readTable(t, portable)
	defer a.Release()
	defer b.Release()
	if !a.Schema().Equal(b.Schema()) || a.NumRows() != b.NumRows() {
		t.Fatalf("schemas %s / %s, rows %d / %d", a.Schema(), b.Schema(), a.NumRows(), b.NumRows())
	}
	for _, f := range a.Schema().Fields() {
		if !slices.Equal(column(t, a, f.Name), column(t, b, f.Name)) {
			t.Fatalf("column %s differs", f.Name)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
