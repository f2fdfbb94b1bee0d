package query_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/query"
)

// TestWalkRows: a Walk's rows are the Composite's, for every series and
// range, whether the series are asked for in id order (as a compaction
// does), in reverse (every step restarts the cursors) or only every third
// one (the cursors step over the runs' series in between).
func TestWalkRows(t *testing.T) {
	root, cases := tierFixture(t)
	ranges := tierRanges(t)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			base := openTier(t, filepath.Join(root, tc.Name), coldfile.NewCache(1<<20))
			for ci, c := range []*query.Composite{query.NewComposite(base, applyWrites(t, base)), query.NewComposite(base, appendWrites(t, base))} {
				sel, err := c.Select(query.Selector{Kind: query.ByPrefix})
				if err != nil {
					t.Fatal(err)
				}
				var inOrder []int
				for k := 0; k < sel.Len(); k++ {
					inOrder = append(inOrder, sel.Code(k))
				}
				reversed := slices.Clone(inOrder)
				slices.Reverse(reversed)
				var sparse []int
				for k := 0; k < len(inOrder); k += 3 {
					sparse = append(sparse, inOrder[k])
				}
				for _, order := range []struct {
					name  string
					codes []int
				}{{"in id order", inOrder}, {"reversed", reversed}, {"every third", sparse}} {
					for rname, rg := range ranges {
						w := c.Walk()
						for _, code := range order.codes {
							want, err := c.Rows(code, rg, nil)
							if err != nil {
								t.Fatal(err)
							}
							got, err := w.Rows(code, rg, nil)
							if err != nil {
								t.Fatal(err)
							}
							if g, w := piecesText(got), piecesText(want); g != w {
								t.Errorf("composite %d, %s, %s, %s: walk rows %s, want %s", ci, order.name, rname, c.SeriesID(code), g, w)
							}
						}
					}
				}
			}
		})
	}
}

func piecesText(ps []query.Piece) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("[%p %d:%d]", p.Rec, p.Lo, p.Hi)
	}
	return s
}
