package snapshot

import (
	"reflect"
	"testing"
)

// TestPlanPrefetch: indexes first, then data files, each whole within what
// the budget leaves, a file too large skipped for smaller later ones.
func TestPlanPrefetch(t *testing.T) {
	const MiB = 1 << 20
	idx := func(n int, b int64) Prefetch { return Prefetch{N: n, Part: PartIndex, Bytes: b} }
	dat := func(n int, b int64) Prefetch { return Prefetch{N: n, Part: PartData, Bytes: b} }
	for _, tc := range []struct {
		name   string
		sizes  [][2]int64
		budget int64
		want   []Prefetch
	}{
		{"no snapshots", nil, 100 * MiB, nil},
		{"budget 0", [][2]int64{{1 * MiB, 10 * MiB}}, 0, nil},
		{"negative budget", [][2]int64{{1 * MiB, 10 * MiB}}, -1, nil},
		{"everything fits", [][2]int64{{1 * MiB, 10 * MiB}, {2 * MiB, 20 * MiB}}, 33 * MiB,
			[]Prefetch{idx(0, 1*MiB), idx(1, 2*MiB), dat(0, 10*MiB), dat(1, 20*MiB)}},
		{"exactly the indexes", [][2]int64{{1 * MiB, 10 * MiB}, {2 * MiB, 20 * MiB}}, 3 * MiB,
			[]Prefetch{idx(0, 1*MiB), idx(1, 2*MiB)}},
		{"a data file too large is skipped, a later one fits", [][2]int64{{1 * MiB, 30 * MiB}, {1 * MiB, 5 * MiB}}, 10 * MiB,
			[]Prefetch{idx(0, 1*MiB), idx(1, 1*MiB), dat(1, 5*MiB)}},
		{"an index too large for the budget: the data file alone", [][2]int64{{8 * MiB, 4 * MiB}}, 6 * MiB,
			[]Prefetch{dat(0, 4*MiB)}},
		{"one byte short of the data file", [][2]int64{{1 * MiB, 10 * MiB}}, 11*MiB - 1,
			[]Prefetch{idx(0, 1*MiB)}},
		{"empty files are not read", [][2]int64{{0, 0}, {1 * MiB, 0}}, 100 * MiB,
			[]Prefetch{idx(1, 1*MiB)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlanPrefetch(tc.sizes, tc.budget); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PlanPrefetch(%v, %d) = %v, want %v", tc.sizes, tc.budget, got, tc.want)
			}
		})
	}
}
