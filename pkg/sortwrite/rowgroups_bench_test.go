package sortwrite

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/internal/testlake"
)

// BenchmarkBuildRowGroups builds one file of n one-row row groups. Before
// the footer was parsed once per file, each row group re-parsed the whole
// footer, so the cost grew with the square of the row groups.
//
//	go test -run '^$' -bench BuildRowGroups -benchtime 1x ./pkg/sortwrite
func BenchmarkBuildRowGroups(b *testing.B) {
	for _, n := range []int{200, 1600} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			lake := b.TempDir()
			ids, pers, vals := make([]any, n), make([]any, n), make([]any, n)
			for i := range n {
				ids[i] = fmt.Sprintf("S%04d", i%37)
				pers[i] = fmt.Sprintf("%d", 1900+i/37)
				vals[i] = float64(i)
			}
			testlake.WriteParquet(b, lake, "part-0.parquet", 1,
				testlake.Col{Name: "series_id", Vals: ids},
				testlake.Col{Name: "period", Vals: pers},
				testlake.Col{Name: "value", Vals: vals})
			for b.Loop() {
				if _, err := build(b, lake, filepath.Join(b.TempDir(), "DS"), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
