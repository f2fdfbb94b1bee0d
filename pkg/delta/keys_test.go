package delta

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestSortEntries: sortEntries orders a write's series as compareEntries
// does, for base series only, new series only and the two interleaved.
func TestSortEntries(t *testing.T) {
	base := func(id string, code int32) *keyEntry { return &keyEntry{id: id, code: code} }
	fresh := func(id string) *keyEntry { return &keyEntry{id: id, code: -1} }
	for _, tc := range []struct {
		name string
		es   []*keyEntry
	}{
		{"none", nil},
		{"base only", []*keyEntry{base("c", 2), base("a", 0), base("d", 3), base("b", 1)}},
		{"new only", []*keyEntry{fresh("z"), fresh("b"), fresh("m")}},
		{"interleaved", []*keyEntry{fresh("bb"), base("c", 2), fresh("0"), base("a", 0), fresh("zz"), base("b", 1), fresh("cc")}},
		{"new before and after", []*keyEntry{base("m", 5), fresh("a"), fresh("z")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sortEntries(tc.es)
			want := make([]int32, len(tc.es))
			for i := range want {
				want[i] = int32(i)
			}
			slices.SortFunc(want, func(a, b int32) int { return compareEntries(tc.es[a], tc.es[b]) })
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("order %v, want %v", got, want)
			}
		})
	}
}

// TestInBounds: the bound checks before the searches answer as the
// searches do.
func TestInBounds(t *testing.T) {
	s := []int32{3, 5, 9}
	for p := int32(0); p < 12; p++ {
		_, want := slices.BinarySearch(s, p)
		if inInts(s, p) != want || inDates([]arrow.Date32{3, 5, 9}, arrow.Date32(p)) != want {
			t.Fatalf("%d: want %v", p, want)
		}
	}
	if inInts(nil, 1) || inDates(nil, 1) {
		t.Fatal("empty holds nothing")
	}
	// dates as far apart as date32 allows (a lake's date32 values are not
	// range-checked): the interpolation must not overflow
	wide := []arrow.Date32{math.MinInt32, -5, 0, 1, 2, 3, 4, 5, 6, 7, math.MaxInt32}
	for _, p := range []arrow.Date32{math.MinInt32, math.MinInt32 + 1, -5, -4, 3, 8, math.MaxInt32 - 1, math.MaxInt32} {
		if _, want := slices.BinarySearch(wide, p); inDates(wide, p) != want {
			t.Fatalf("%d in %v: want %v", p, wide, want)
		}
	}
}

// TestInDatesMatchesSearch: the interpolated look-up answers as a binary
// search for regular series (daily, monthly, annual), irregular ones,
// bursts and gaps, at every period in and around them.
func TestInDatesMatchesSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.IntN(400)
		s := make([]arrow.Date32, 0, n)
		p := arrow.Date32(rng.IntN(20000) - 10000)
		step := []int{1, 7, 30, 365}[rng.IntN(4)]
		for i := 0; i < n; i++ {
			s = append(s, p)
			switch rng.IntN(6) {
			case 0: // irregular
				p += arrow.Date32(1 + rng.IntN(3*step))
			case 1:
				if rng.IntN(20) == 0 { // a gap
					p += arrow.Date32(step * (10 + rng.IntN(100)))
					continue
				}
				fallthrough
			default: // regular, months of 28 to 31 days
				p += arrow.Date32(step + rng.IntN(step/10+1) - step/20)
			}
			if p <= s[len(s)-1] {
				p = s[len(s)-1] + 1
			}
		}
		for q := s[0] - 2; q <= s[n-1]+2; q++ {
			_, want := slices.BinarySearch(s, q)
			if got := inDates(s, q); got != want {
				t.Fatalf("trial %d (%d periods, step %d): inDates(%d) = %v, want %v", trial, n, step, q, got, want)
			}
		}
	}
}
