package export

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// tieredSnapshots builds testsnap's tiered lake all hot ("HOT") and in
// every tier layout (batches of 100 rows) under a temp dir: the root and
// the datasets' names.
func tieredSnapshots(t *testing.T) (root string, names []string) {
	root = t.TempDir()
	lake := filepath.Join(root, "lake")
	testsnap.TieredLake(t, lake)
	names = []string{"HOT"}
	for _, c := range testsnap.BuildTiers(t, lake, root, 100) {
		names = append(names, c.Name)
	}
	return root, names
}

// TestPortableGroupsAndTiers: for every tier layout (pieces from the hot
// batches, the cold file or both), small batches (a row group spans
// several of them), value nulls, a varying string column and attributes,
// and row group bounds that split series, the copy read back with pqarrow
// holds exactly the rows the Reader serves (CheckPortable), in the same
// bytes whatever the parallelism and allocator, and the allocator ends
// empty.
func TestPortableGroupsAndTiers(t *testing.T) {
	root, names := tieredSnapshots(t)
	for _, name := range names {
		s, err := snapshot.Open(filepath.Join(root, name), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := query.FromSnapshot(name, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, shape := range []struct{ target, max int64 }{{1, 1 << 20}, {50, 70}, {200, 1 << 20}, {1000, 30}} {
			var first []byte // the bytes written with Parallel 1
			for _, par := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/target%d-max%d-par%d", name, shape.target, shape.max, par), func(t *testing.T) {
					mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
					var buf bytes.Buffer
					res, err := WritePortable(context.Background(), r, &buf, PortableOptions{RowGroupRows: shape.target, Parallel: par, Allocator: mem, maxRowGroupRows: shape.max})
					if err != nil {
						t.Fatal(err)
					}
					mem.AssertSize(t, 0)
					rows, err := CheckPortable(context.Background(), r, bytes.NewReader(buf.Bytes()), nil)
					if err != nil {
						t.Fatal(err)
					}
					if rows != res.Rows || rows != r.Info().Rows {
						t.Fatalf("checked %d rows, wrote %d, the snapshot has %d", rows, res.Rows, r.Info().Rows)
					}
					// The bytes depend neither on the parallelism nor on
					// the allocator (the default recycles buffers).
					var again bytes.Buffer
					if _, err := WritePortable(context.Background(), r, &again, PortableOptions{RowGroupRows: shape.target, Parallel: par, maxRowGroupRows: shape.max}); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(again.Bytes(), buf.Bytes()) {
						t.Fatalf("the default allocator wrote %d bytes unlike the checked allocator's %d", again.Len(), buf.Len())
					}
					if first == nil {
						first = buf.Bytes()
					} else if !bytes.Equal(first, buf.Bytes()) {
						t.Fatalf("Parallel %d wrote %d bytes unlike Parallel 1's %d", par, buf.Len(), len(first))
					}
				})
			}
		}
		s.Close()
	}
}

// TestDictionaryOf: a group's attribute column as a dictionary array: each
// series' value repeated over its rows, the dictionary its distinct
// non-null values in order of first use, a null value's rows null.
func TestDictionaryOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string // "" is null
		counts []int
		want   []string // per row, "" null
		dict   int
	}{
		{"distinct", []string{"a", "b", "c"}, []int{2, 1, 3}, []string{"a", "a", "b", "c", "c", "c"}, 3},
		{"repeats", []string{"x", "y", "x", "y"}, []int{1, 2, 1, 1}, []string{"x", "y", "y", "x", "y"}, 2},
		{"nulls", []string{"", "k", ""}, []int{2, 1, 3}, []string{"", "", "k", "", "", ""}, 1},
		{"all null", []string{"", ""}, []int{1, 1}, []string{"", ""}, 0},
		{"empty series", []string{"a", "b"}, []int{0, 2}, []string{"b", "b"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			b := array.NewStringBuilder(mem)
			for _, v := range tc.values {
				if v == "" {
					b.AppendNull()
				} else {
					b.Append(v)
				}
			}
			per := b.NewArray()
			b.Release()
			defer per.Release()
			rows := 0
			for _, c := range tc.counts {
				rows += c
			}
			got, err := dictionaryOf(mem, per, tc.counts, rows)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			d := got.(*array.Dictionary)
			if d.Dictionary().Len() != tc.dict {
				t.Errorf("dictionary %v, want %d values", d.Dictionary(), tc.dict)
			}
			if d.Len() != len(tc.want) {
				t.Fatalf("%d rows, want %d", d.Len(), len(tc.want))
			}
			for i, w := range tc.want {
				if w == "" {
					if !d.IsNull(i) {
						t.Errorf("row %d: %q, want null", i, d.ValueStr(i))
					}
					continue
				}
				if d.IsNull(i) || d.Dictionary().(*array.String).Value(d.GetValueIndex(i)) != w {
					t.Errorf("row %d: %s, want %q", i, d.ValueStr(i), w)
				}
			}
		})
	}
	if _, err := dictionaryOf(memory.DefaultAllocator, array.NewNull(2), []int{1}, 1); err == nil {
		t.Error("2 values for 1 series: no error")
	}
}

// TestJoinedGroupsAreOneWritersFile: with every column through arrow-go,
// the file joined from row groups encoded as files of their own
// (joinparquet.go) is byte for byte the file arrow-go's writer makes when
// it writes the same groups one after another itself: the same chunks,
// the same page index and the same footer, its offsets shifted exactly
// (parquet-go's Thrift structures carry every field arrow-go writes). With
// series_id and the attributes written as runs (runchunk.go), the file
// holds the same rows, and each of their chunks the same values,
// statistics, encodings and page index as arrow-go's.
func TestJoinedGroupsAreOneWritersFile(t *testing.T) {
	root, names := tieredSnapshots(t)
	nullsLake(t, filepath.Join(root, "lake-nulls"))
	testsnap.Build(t, filepath.Join(root, "lake-nulls"), filepath.Join(root, "NULLS"), nil)
	names = append(names, "NULLS")
	ctx := context.Background()
	for _, name := range names {
		s, err := snapshot.Open(filepath.Join(root, name), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r, err := query.FromSnapshot(name, s)
		if err != nil {
			t.Fatal(err)
		}
		if name == "NULLS" && len(r.Shape().Attributes()) != 3 {
			t.Fatalf("the nulls lake has %d attributes, want 3", len(r.Shape().Attributes()))
		}
		for _, shape := range []struct{ target, max int64 }{{1, 1 << 20}, {50, 70}, {1 << 30, 1 << 30}} {
			t.Run(fmt.Sprintf("%s/target%d-max%d", name, shape.target, shape.max), func(t *testing.T) {
				var joined, runs bytes.Buffer
				opt := PortableOptions{RowGroupRows: shape.target, maxRowGroupRows: shape.max, noRuns: true}
				if _, err := WritePortable(ctx, r, &joined, opt); err != nil {
					t.Fatal(err)
				}
				one := oneWritersFile(t, r, shape.target, shape.max)
				if !bytes.Equal(joined.Bytes(), one) {
					at := 0
					for at < min(joined.Len(), len(one)) && joined.Bytes()[at] == one[at] {
						at++
					}
					t.Fatalf("joined file of %d bytes differs at byte %d from one writer's file of %d bytes", joined.Len(), at, len(one))
				}
				opt.noRuns = false
				if _, err := WritePortable(ctx, r, &runs, opt); err != nil {
					t.Fatal(err)
				}
				sameChunks(t, one, runs.Bytes())
				if rows, err := CheckPortable(ctx, r, bytes.NewReader(runs.Bytes()), nil); err != nil || rows != r.Info().Rows {
					t.Fatalf("the file with runs: %d rows checked (of %d): %v", rows, r.Info().Rows, err)
				}
			})
		}
	}
}

// nullsLake writes a lake of 20 series whose attributes have nulls: units
// null for every third series, category for series 5 alone (so a group of
// that series has a column of nulls only), and note one value longer than
// the statistics' size limit (series 7) among short ones.
func nullsLake(t *testing.T, dir string) {
	var ids, periods, values, units, cats, notes []any
	for i := 0; i < 20; i++ {
		for m := 0; m < 3+i%4; m++ {
			ids = append(ids, fmt.Sprintf("N%02d", i))
			periods = append(periods, fmt.Sprintf("2020-%02d", m+1))
			values = append(values, float64(i*10+m))
			var u, c any = fmt.Sprintf("u%d", i%2), fmt.Sprintf("c%d", i%3)
			if i%3 == 0 {
				u = nil
			}
			if i == 5 {
				c = nil
			}
			note := fmt.Sprintf("note %d", i%4)
			if i == 7 {
				note = strings.Repeat("x", 5000)
			}
			units, cats, notes = append(units, u), append(cats, c), append(notes, note)
		}
	}
	testlake.WriteParquet(t, dir, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids},
		testlake.Col{Name: "period", Vals: periods},
		testlake.Col{Name: "value", Vals: values, Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "units", Vals: units, Typ: arrow.BinaryTypes.String},
		testlake.Col{Name: "category", Vals: cats, Typ: arrow.BinaryTypes.String},
		testlake.Col{Name: "note", Vals: notes},
	)
}

// oneWritersFile is the portable copy of r written by one arrow-go writer,
// every column through it, a row group at a time.
func oneWritersFile(t *testing.T, r query.Reader, target, max int64) []byte {
	t.Helper()
	ctx := context.Background()
	req := &query.Request{Range: query.AllPeriods, Attributes: true, Select: query.Selector{Kind: query.ByPrefix}}
	plan, err := query.NewPlan(r, req, query.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.DefaultAllocator
	pf, err := newPortableFile(plan.Schema(), len(r.Shape().Attributes()), io.Discard, mem, false)
	if err != nil {
		t.Fatal(err)
	}
	var one bytes.Buffer
	fw, err := file.NewParquetWriterWithError(&one, pf.pieceRoot, file.WithWriterProps(pf.props), file.WithWriteMetadata(pf.meta))
	if err != nil {
		t.Fatal(err)
	}
	groups, err := planGroups(r, plan.Series(), target, max)
	if err != nil {
		t.Fatal(err)
	}
	asm := &assembler{r: r, sh: r.Shape(), schema: plan.Schema(), mem: mem, runs: pf.runs}
	for _, g := range groups {
		grp, err := asm.assemble(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		rec := array.NewRecordBatch(pf.piece, grp.cols, grp.rows)
		rgw, err := fw.AppendBufferedRowGroupChecked()
		if err == nil {
			err = pf.writeColumns(ctx, rgw, rec, 1)
		}
		if err == nil {
			err = rgw.Close()
		}
		rec.Release()
		grp.release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.FlushWithFooter(); err != nil {
		t.Fatal(err)
	}
	return one.Bytes()
}

// sameChunks fails unless files a and b have the same row groups, each
// column chunk with the same type, codec, value count, statistics,
// encodings, page kinds and column index, and its pages starting at the
// same rows.
func sameChunks(t *testing.T, a, b []byte) {
	t.Helper()
	fa, err := footerOf(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := footerOf(b)
	if err != nil {
		t.Fatal(err)
	}
	if fa.NumRows != fb.NumRows || len(fa.RowGroups) != len(fb.RowGroups) || !reflect.DeepEqual(fa.Schema, fb.Schema) || !reflect.DeepEqual(fa.KeyValueMetadata, fb.KeyValueMetadata) {
		t.Fatalf("files differ: %d and %d rows, %d and %d row groups (or their schema or metadata)", fa.NumRows, fb.NumRows, len(fa.RowGroups), len(fb.RowGroups))
	}
	// index decodes a page index structure; false when there is none.
	index := func(file []byte, off int64, n int32, v any) bool {
		t.Helper()
		if n == 0 {
			return false
		}
		if err := thrift.Unmarshal(&compact, file[off:off+int64(n)], v); err != nil {
			t.Fatal(err)
		}
		return true
	}
	for g := range fa.RowGroups {
		ga, gb := fa.RowGroups[g], fb.RowGroups[g]
		if ga.NumRows != gb.NumRows || !reflect.DeepEqual(ga.SortingColumns, gb.SortingColumns) || ga.Ordinal != gb.Ordinal {
			t.Fatalf("row group %d: %d and %d rows, sorting %v and %v", g, ga.NumRows, gb.NumRows, ga.SortingColumns, gb.SortingColumns)
		}
		for c := range ga.Columns {
			ma, mb := ga.Columns[c].MetaData, gb.Columns[c].MetaData
			enc := func(m format.ColumnMetaData) []format.Encoding {
				e := slices.Clone(m.Encoding)
				slices.Sort(e)
				return e
			}
			if ma.Type != mb.Type || ma.Codec != mb.Codec || ma.NumValues != mb.NumValues || !reflect.DeepEqual(ma.PathInSchema, mb.PathInSchema) ||
				!reflect.DeepEqual(ma.Statistics, mb.Statistics) || !reflect.DeepEqual(enc(ma), enc(mb)) || !reflect.DeepEqual(ma.EncodingStats, mb.EncodingStats) ||
				(ma.DictionaryPageOffset == 0) != (mb.DictionaryPageOffset == 0) {
				t.Fatalf("row group %d column %v differs:\n%+v\n%+v", g, ma.PathInSchema, ma, mb)
			}
			var ca, cb format.ColumnIndex
			hasA := index(a, ga.Columns[c].ColumnIndexOffset, ga.Columns[c].ColumnIndexLength, &ca)
			hasB := index(b, gb.Columns[c].ColumnIndexOffset, gb.Columns[c].ColumnIndexLength, &cb)
			if hasA != hasB || !reflect.DeepEqual(ca, cb) {
				t.Fatalf("row group %d column %v: column index (%v, %v)\n%+v\n%+v", g, ma.PathInSchema, hasA, hasB, ca, cb)
			}
			var oa, ob format.OffsetIndex
			if !index(a, ga.Columns[c].OffsetIndexOffset, ga.Columns[c].OffsetIndexLength, &oa) ||
				!index(b, gb.Columns[c].OffsetIndexOffset, gb.Columns[c].OffsetIndexLength, &ob) || len(oa.PageLocations) != len(ob.PageLocations) {
				t.Fatalf("row group %d column %v: %d and %d pages", g, ma.PathInSchema, len(oa.PageLocations), len(ob.PageLocations))
			}
			for k := range oa.PageLocations {
				if oa.PageLocations[k].FirstRowIndex != ob.PageLocations[k].FirstRowIndex {
					t.Fatalf("row group %d column %v page %d: first rows %d and %d", g, ma.PathInSchema, k, oa.PageLocations[k].FirstRowIndex, ob.PageLocations[k].FirstRowIndex)
				}
				if pl := ob.PageLocations[k]; pl.Offset < mb.DataPageOffset || pl.Offset+int64(pl.CompressedPageSize) > mb.DataPageOffset+mb.TotalCompressedSize+mb.DataPageOffset-chunkStart(&mb) {
					t.Fatalf("row group %d column %v page %d at %d+%d, outside the chunk", g, ma.PathInSchema, k, pl.Offset, pl.CompressedPageSize)
				}
			}
		}
	}
}
