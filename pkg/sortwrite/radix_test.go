package sortwrite

import (
	"math/rand/v2"
	"testing"
)

// TestSortPathsAgree checks the packed radix path against the comparison
// fallback on random keys with many ties (duplicates must keep input order).
func TestSortPathsAgree(t *testing.T) {
	for _, tc := range []struct{ rows, series, span int }{
		{0, 1, 1}, {1, 1, 1}, {1000, 7, 3}, {50000, 1000, 40000}, {20000, 20000, 1 << 20},
		{300000, 3, 5}, {300000, 100000, 9000}, {200000, 1 << 20, 1 << 12},
		{300000, 2000, 200}, // packed into buckets, with many duplicates
	} {
		rng := rand.New(rand.NewPCG(uint64(tc.rows), 1))
		rank := rng.Perm(tc.series)
		ranks := make([]uint32, tc.series)
		for i, r := range rank {
			ranks[i] = uint32(r)
		}
		codes := make([]uint32, tc.rows)
		periods := make([]int32, tc.rows)
		for i := range codes {
			codes[i] = uint32(rng.IntN(tc.series))
			periods[i] = int32(rng.IntN(tc.span)) - 20000
		}
		slow := sortCompare(ranks, codes, periods)
		for _, workers := range []int{1, 2, 3, -2} {
			var scratch []uint64 // the buckets' scratch carved from the caller's
			if workers < 0 {
				workers, scratch = -workers, make([]uint64, tc.rows)
			}
			fast := sortRowsOn(ranks, codes, periods, nil, scratch, workers)
			if tc.rows > 0 && fast.keys == nil {
				t.Fatalf("%+v: expected the packed path", tc)
			}
			for j := 0; j < tc.rows; j++ {
				if fast.row(j) != slow.row(j) || fast.period(j) != slow.period(j) || fast.rank(j) != slow.rank(j) {
					t.Fatalf("%+v, %d workers: position %d: fast (row %d rank %d period %d) != slow (row %d rank %d period %d)", tc, workers, j,
						fast.row(j), fast.rank(j), fast.period(j), slow.row(j), slow.rank(j), slow.period(j))
				}
			}
		}
	}
}

func BenchmarkRadixSort(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	ranks := make([]uint32, 100000)
	for i := range ranks {
		ranks[i] = uint32(i)
	}
	codes := make([]uint32, n)
	periods := make([]int32, n)
	for i := range codes {
		codes[i] = uint32(rng.IntN(len(ranks)))
		periods[i] = int32(rng.IntN(9000))
	}
	b.ReportAllocs()
	b.SetBytes(n)
	for b.Loop() {
		sortRows(ranks, codes, periods)
	}
}

// TestSortRowsIntoSorted: rows already in key order are recognised and
// not sorted (the scratch buffer is left untouched); one row out of order
// is sorted like any other input.
func TestSortRowsIntoSorted(t *testing.T) {
	rank := []uint32{0, 1, 2}
	codes := []uint32{0, 0, 1, 1, 2}
	periods := []int32{-5, 3, 3, 9, 1}
	for _, c := range []struct {
		name    string
		periods []int32
		sorted  bool
	}{{"sorted", periods, true}, {"unsorted", []int32{3, -5, 3, 9, 1}, false}} {
		scratch := []uint64{7, 7, 7, 7, 7}
		o := sortRowsInto(rank, codes, c.periods, nil, scratch)
		untouched := scratch[0] == 7 && scratch[4] == 7
		if untouched != c.sorted {
			t.Errorf("%s: scratch untouched = %v", c.name, untouched)
		}
		for j := 1; j < o.len(); j++ {
			if o.key(j-1) > o.key(j) {
				t.Errorf("%s: position %d out of order", c.name, j)
			}
		}
	}
}
