package verify

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
)

// BenchmarkAgainstRowGroups re-reads a lake file of n one-row row groups:
// the cost must grow with the rows, not with the square of the row groups.
//
//	go test -run '^$' -bench AgainstRowGroups -benchtime 1x ./pkg/verify
func BenchmarkAgainstRowGroups(b *testing.B) {
	for _, n := range []int{200, 1600} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			root := b.TempDir()
			lake := filepath.Join(root, "lake")
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
			ds := filepath.Join(root, "DS")
			testsnap.Build(b, lake, ds, nil)
			for b.Loop() {
				rep, err := Verify(ds, Options{Against: lake})
				if err != nil || !rep.OK {
					b.Fatalf("%v %v", err, rep)
				}
			}
		})
	}
}

// BenchmarkAgainstLake is snapverify --deep --against over a lake of
// series × rows rows (one file, row groups of 1M rows, plain-encoded
// strings): the verify gate of a nightly build.
//
//	go test -run '^$' -bench AgainstLake -benchtime 3x -count 3 ./pkg/verify
func BenchmarkAgainstLake(b *testing.B) {
	root := b.TempDir()
	lake := filepath.Join(root, "lake")
	testlake.WriteUniform(b, lake, 10000, 200)
	ds := filepath.Join(root, "DS")
	testsnap.Build(b, lake, ds, nil)
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Verify(ds, Options{Deep: true, Against: lake})
		if err != nil || !rep.OK {
			b.Fatalf("%v %v", err, rep)
		}
	}
}
