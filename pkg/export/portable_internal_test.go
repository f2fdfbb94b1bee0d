package export

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// TestPortableGroupsAndTiers: for every tier layout (pieces from the hot
// batches, the cold file or both), small batches (a row group spans
// several of them), value nulls, a varying string column and attributes,
// and row group bounds that split series, the copy read back with pqarrow
// holds exactly the rows the Reader serves (CheckPortable), in the same
// bytes whatever the parallelism and allocator, and the allocator ends
// empty.
func TestPortableGroupsAndTiers(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	testsnap.TieredLake(t, lake)
	cases := testsnap.BuildTiers(t, lake, root, 100)
	names := []string{"HOT"}
	for _, c := range cases {
		names = append(names, c.Name)
	}
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

// TestJoinedGroupsAreOneWritersFile: the file joined from row groups
// encoded as files of their own (joinparquet.go) is byte for byte the file
// arrow-go's writer makes when it writes the same groups one after another
// itself: the same chunks, the same page index and the same footer, its
// offsets shifted exactly (parquet-go's Thrift structures carry every
// field arrow-go writes).
func TestJoinedGroupsAreOneWritersFile(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	testsnap.TieredLake(t, lake)
	testsnap.BuildTiers(t, lake, root, 100)
	s, err := snapshot.Open(filepath.Join(root, "HOT"), snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := query.FromSnapshot("HOT", s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, shape := range []struct{ target, max int64 }{{1, 1 << 20}, {50, 70}, {1 << 30, 1 << 30}} {
		t.Run(fmt.Sprintf("target%d-max%d", shape.target, shape.max), func(t *testing.T) {
			var joined bytes.Buffer
			res, err := WritePortable(ctx, r, &joined, PortableOptions{RowGroupRows: shape.target, maxRowGroupRows: shape.max})
			if err != nil {
				t.Fatal(err)
			}
			// The same groups through one arrow-go writer.
			req := &query.Request{Range: query.AllPeriods, Attributes: true, Select: query.Selector{Kind: query.ByPrefix}}
			plan, err := query.NewPlan(r, req, query.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			mem := memory.DefaultAllocator
			pf, err := newPortableFile(plainSchema(plan.Schema()), io.Discard, mem)
			if err != nil {
				t.Fatal(err)
			}
			var one bytes.Buffer
			fw, err := file.NewParquetWriterWithError(&one, pf.root, file.WithWriterProps(pf.props), file.WithWriteMetadata(pf.meta))
			if err != nil {
				t.Fatal(err)
			}
			groups, err := planGroups(r, plan.Series(), shape.target, shape.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(groups) != res.RowGroups {
				t.Fatalf("%d groups planned, %d written", len(groups), res.RowGroups)
			}
			asm := &assembler{r: r, sh: r.Shape(), schema: plan.Schema(), mem: mem}
			for _, g := range groups {
				rec, err := asm.assemble(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				rgw, err := fw.AppendBufferedRowGroupChecked()
				if err == nil {
					err = pf.writeColumns(ctx, rgw, rec, 1)
				}
				if err == nil {
					err = rgw.Close()
				}
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := fw.FlushWithFooter(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(joined.Bytes(), one.Bytes()) {
				at := 0
				for at < min(joined.Len(), one.Len()) && joined.Bytes()[at] == one.Bytes()[at] {
					at++
				}
				t.Fatalf("joined file of %d bytes differs at byte %d from one writer's file of %d bytes", joined.Len(), at, one.Len())
			}
		})
	}
}
