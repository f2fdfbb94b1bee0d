package livedelta

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// TestInDatesNearAnyGuess: whatever the guess (an index's bounds that
// disagree with the periods direct it anywhere), inDatesNear answers what
// a binary search does.
func TestInDatesNearAnyGuess(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(60)
		s := make([]arrow.Date32, n)
		p := arrow.Date32(rng.IntN(1000))
		for i := range s {
			p += arrow.Date32(1 + rng.IntN(40))
			s[i] = p
		}
		for q := s[0] - 2; q <= s[n-1]+2; q++ {
			_, want := slices.BinarySearch(s, q)
			for g := -1; g < n; g++ {
				if got := inDatesNear(s, q, g); got != want {
					t.Fatalf("trial %d: inDatesNear(%v, %d, guess %d) = %v, want %v", trial, s, q, g, got, want)
				}
			}
		}
	}
}

// variedBase is a Base whose series each have periods of their own, as a
// BoundedBase whose bounds are exact or (widen > 0) wider than the
// periods: Bounds only direct markInBase's guesses.
type variedBase struct {
	ids     []string
	periods [][]arrow.Date32
	widen   arrow.Date32
}

func (b *variedBase) Lookup(id string) (int, bool) {
	i, ok := slices.BinarySearch(b.ids, id)
	return i, ok
}

func (b *variedBase) Periods(c int) []arrow.Date32 { return b.periods[c] }

type boundedVariedBase struct{ *variedBase }

func (b boundedVariedBase) Bounds(c int) (first, last arrow.Date32) {
	s := b.periods[c]
	return s[0] - b.widen, s[len(s)-1] + b.widen
}

// TestMarkInBase: Prepare's passes over a write (markInBase) mark the
// rows the base holds exactly as asking inDates row by row does, over a
// plain Base and a BoundedBase with exact or wider bounds, for writes of
// one row a series and of many.
func TestMarkInBase(t *testing.T) {
	ctx := context.Background()
	s := testSchema(t)
	rng := rand.New(rand.NewPCG(8, 8))
	vb := &variedBase{}
	for i := 0; i < 300; i++ {
		vb.ids = append(vb.ids, fmt.Sprintf("s%05d", 2*i))
		var ps []arrow.Date32
		p := arrow.Date32(rng.IntN(500))
		for j := 1 + rng.IntN(200); j > 0; j-- {
			p += arrow.Date32(28 + rng.IntN(4)) // months
			if rng.IntN(15) == 0 {
				p += arrow.Date32(rng.IntN(400)) // a gap
			}
			ps = append(ps, p)
		}
		vb.periods = append(vb.periods, ps)
	}
	bases := map[string]Base{
		"plain":   vb,
		"bounded": boundedVariedBase{vb},
		"wider":   boundedVariedBase{&variedBase{ids: vb.ids, periods: vb.periods, widen: 900}},
	}
	for name, base := range bases {
		for _, perSeries := range []int{1, 40} {
			var rows []row
			for i := 0; i < 2000; i++ {
				c := rng.IntN(2 * len(vb.ids)) // odd: a series the base lacks
				if i%perSeries != 0 && len(rows) > 0 {
					c = 0
					fmt.Sscanf(rows[len(rows)-1].id, "s%05d", &c)
				}
				var p int
				if c%2 == 0 && rng.IntN(3) > 0 {
					ps := vb.periods[c/2]
					p = int(ps[rng.IntN(len(ps))]) + rng.IntN(3) - 1
				} else {
					p = rng.IntN(8000)
				}
				rows = append(rows, row{id: fmt.Sprintf("s%05d", c), period: int32(p), value: float64(i)})
			}
			rec := write(s, rows, nil)
			pr, err := Prepare(ctx, memory.DefaultAllocator, s, rec, base, baseCodes(base, rec))
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
			held := 0
			ps := pr.run.Periods()
			for i, c := range pr.codes {
				lo, hi := pr.run.Rows(i)
				for j := lo; j < hi; j++ {
					want := c >= 0 && inDates(vb.periods[c], ps[j])
					if pr.inBase[j] != want {
						t.Fatalf("%s, %d rows a series: run row %d (series %d, period %d): in base %v, want %v", name, perSeries, j, c, ps[j], pr.inBase[j], want)
					}
					if want {
						held++
					}
				}
			}
			if held == 0 {
				t.Fatalf("%s: no row of the write is in the base: the test proves nothing", name)
			}
			pr.Release()
		}
	}
}
