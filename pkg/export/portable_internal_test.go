package export

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

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
