package livedelta

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortByCodeMatchesSort: for writes of every size class and code
// range (one pass, two, three; many rows per code and one), sortByCode
// orders keys exactly as a comparison sort does.
func TestSortByCodeMatchesSort(t *testing.T) {
	for _, tc := range []struct {
		rows    int
		maxCode uint32
	}{
		{0, 0}, {1, 5}, {255, 100}, {256, 0}, {300, 1}, {10_000, 2047},
		{10_000, 2048}, {10_000, 100_000}, {10_000, 1<<22 - 1}, {50_000, 1<<31 - 1}, {4096, 3},
	} {
		r := rand.New(rand.NewPCG(uint64(tc.rows), uint64(tc.maxCode)))
		keys := make([]uint64, tc.rows)
		for i := range keys {
			keys[i] = uint64(r.Uint32N(tc.maxCode+1))<<32 | uint64(i)
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		got := sortByCode(keys, make([]uint64, len(keys)), tc.maxCode)
		if !slices.Equal(got, want) {
			t.Errorf("%d rows, codes <= %d: sortByCode differs from slices.Sort", tc.rows, tc.maxCode)
		}
	}
}

func BenchmarkSortByCode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, 10_000)
	for i := range keys {
		keys[i] = uint64(r.Uint32N(100_000))<<32 | uint64(i)
	}
	work, tmp := make([]uint64, len(keys)), make([]uint64, len(keys))
	for _, bc := range []struct {
		name string
		sort func()
	}{
		{"radix", func() { sortByCode(work, tmp, 100_000) }},
		{"slices", func() { slices.Sort(work) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				copy(work, keys)
				bc.sort()
			}
		})
	}
}
