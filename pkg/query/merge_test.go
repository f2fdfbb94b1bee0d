package query

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// periodSource is a source over a record of the given periods (a period
// column only: the merge reads nothing else), rows [lo, hi).
func periodSource(t *testing.T, ps []int32, lo, hi int) source {
	t.Helper()
	b := array.NewDate32Builder(memory.DefaultAllocator)
	defer b.Release()
	for _, p := range ps {
		b.Append(arrow.Date32(p))
	}
	col := b.NewArray()
	defer col.Release()
	sc := arrow.NewSchema([]arrow.Field{{Name: "period", Type: arrow.FixedWidthTypes.Date32}}, nil)
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(len(ps)))
	t.Cleanup(rec.Release)
	return source{rec: rec, ps: rec.Column(0).(*array.Date32).Date32Values(), lo: lo, hi: hi}
}

// mergeText is what pieces hold, as "source:row@period" per row with a
// "|" between pieces, naming each piece's record by its source's index.
func mergeText(srcs []source, pieces []Piece) string {
	var b strings.Builder
	for k, pc := range pieces {
		if k > 0 {
			b.WriteString("|")
		}
		i := slices.IndexFunc(srcs, func(s source) bool { return s.rec == pc.Rec })
		for r := pc.Lo; r < pc.Hi; r++ {
			fmt.Fprintf(&b, " %d:%d@%d", i, r, srcs[i].ps[r])
		}
	}
	return b.String()
}

// naiveMerge is the merge's definition, row by row: every period any
// source holds, ascending, from the first source holding it, one piece
// per row.
func naiveMerge(srcs []source) []Piece {
	var periods []arrow.Date32
	for _, s := range srcs {
		periods = append(periods, s.ps[s.lo:s.hi]...)
	}
	slices.Sort(periods)
	periods = slices.Compact(periods)
	var out []Piece
	for _, p := range periods {
		for _, s := range srcs {
			if r := slices.Index(s.ps[s.lo:s.hi], p); r >= 0 {
				out = append(out, Piece{Rec: s.rec, Lo: int64(s.lo + r), Hi: int64(s.lo + r + 1)})
				break
			}
		}
	}
	return out
}

// rowsOf is pieces cut into rows, so two merges compare row for row
// whatever their pieces' boundaries.
func rowsOf(ps []Piece) []Piece {
	var out []Piece
	for _, p := range ps {
		for r := p.Lo; r < p.Hi; r++ {
			out = append(out, Piece{Rec: p.Rec, Lo: r, Hi: r + 1})
		}
	}
	return out
}

func TestMergeSources(t *testing.T) {
	type src struct {
		ps     []int32
		lo, hi int
	}
	for _, tc := range []struct {
		name string
		srcs []src // newest first
		want string
	}{
		{"base alone", []src{{[]int32{1, 2, 3}, 0, 3}},
			" 0:0@1 0:1@2 0:2@3"},
		{"a revision shadows the base's row", []src{{[]int32{2}, 0, 1}, {[]int32{1, 2, 3}, 0, 3}},
			" 1:0@1| 0:0@2| 1:2@3"},
		{"appends after the base", []src{{[]int32{4, 5}, 0, 2}, {[]int32{1, 2, 3}, 0, 3}},
			" 1:0@1 1:1@2 1:2@3| 0:0@4 0:1@5"},
		{"a run of base rows between two delta rows is one piece", []src{{[]int32{0, 9}, 0, 2}, {[]int32{1, 2, 3, 4}, 0, 4}},
			" 0:0@0| 1:0@1 1:1@2 1:2@3 1:3@4| 0:1@9"},
		{"the newest of three generations wins", []src{{[]int32{2}, 0, 1}, {[]int32{2, 3}, 0, 2}, {[]int32{1, 2, 3}, 0, 3}},
			" 2:0@1| 0:0@2| 1:1@3"},
		{"a source's rows outside its range are not read", []src{{[]int32{1, 2, 3}, 1, 2}, {[]int32{1, 2, 3}, 0, 3}},
			" 1:0@1| 0:1@2| 1:2@3"},
		{"an empty source", []src{{[]int32{}, 0, 0}, {[]int32{5}, 0, 1}},
			" 1:0@5"},
		{"no rows", []src{{[]int32{7}, 1, 1}},
			""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srcs []source
			for _, s := range tc.srcs {
				srcs = append(srcs, periodSource(t, s.ps, s.lo, s.hi))
			}
			if got := mergeText(srcs, mergeSources(srcs, nil)); got != tc.want {
				t.Errorf("merged\n %q\nwant\n %q", got, tc.want)
			}
		})
	}
}

// TestMergeSourcesRandom compares the merge with its row-by-row
// definition over random generations: sparse and dense deltas, runs that
// overlap the base or lie past it, ranges that cut every source.
func TestMergeSourcesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 3000; trial++ {
		n := 1 + rng.IntN(4)
		var srcs []source
		for i := 0; i < n; i++ {
			var ps []int32
			density := 1 + rng.IntN(20)
			for p := int32(rng.IntN(5)); p < 60; p++ {
				if rng.IntN(density) == 0 {
					ps = append(ps, p)
				}
			}
			lo := 0
			hi := len(ps)
			if len(ps) > 0 && rng.IntN(4) == 0 {
				lo = rng.IntN(len(ps))
				hi = lo + rng.IntN(len(ps)-lo+1)
			}
			srcs = append(srcs, periodSource(t, ps, lo, hi))
		}
		got := mergeSources(srcs, nil)
		want := naiveMerge(srcs)
		if g, w := mergeText(srcs, rowsOf(got)), mergeText(srcs, want); g != w {
			t.Fatalf("trial %d: merged\n %s\nwant\n %s", trial, g, w)
		}
		// pieces are maximal: no two neighbours could have been one
		for k := 1; k < len(got); k++ {
			if got[k].Rec == got[k-1].Rec && got[k].Lo == got[k-1].Hi {
				t.Fatalf("trial %d: pieces %d and %d are contiguous in one record: %s", trial, k-1, k, mergeText(srcs, got))
			}
		}
	}
}
