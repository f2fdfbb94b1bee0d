package sortwrite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestCutSeriesWorkers checks that the parallel pass after the sort gives
// the serial pass's result for any number of workers: the order, the
// series, the counts and, under "error", the same first duplicate.
func TestCutSeriesWorkers(t *testing.T) {
	const n, nSeries = 300000, 3000
	rng := rand.New(rand.NewPCG(3, 4))
	codes := make([]uint32, n)
	periods := make([]int32, n)
	for i := range codes {
		codes[i] = uint32(rng.IntN(nSeries))
		periods[i] = int32(rng.IntN(400)) // about 1 in 400 rows a duplicate
	}
	ids := make([]string, nSeries)
	byID := make([]uint32, nSeries)
	rank := make([]uint32, nSeries)
	for c := range ids {
		ids[c], byID[c], rank[c] = fmt.Sprintf("s%05d", c), uint32(c), uint32(c)
	}
	value := newStore(Column{Name: "value", Type: arrow.PrimitiveTypes.Float64}, n, nil)
	for r := range n {
		if rng.IntN(3) > 0 {
			value.valid[r] = 1
		}
	}
	tb := &table{series: &store{kind: kindString, codes: codes}, value: value}
	someShards := make([]bool, nSeries)
	for r := range someShards {
		someShards[r] = r%3 != 1
	}
	type result struct {
		rows       []uint32
		keys       []uint64
		series     []span
		dropped    int64
		other      int64
		minP, maxP int32
		err        string
	}
	run := func(opt Options, keep []bool, workers int) result {
		o := sortRows(rank, codes, periods)
		s, d, x, err := tb.cutSeries(o, opt, ids, byID, keep, workers)
		var r result
		if err != nil {
			r.err = err.Error()
			return r
		}
		r.series, r.dropped, r.other = s, d, x
		r.minP, r.maxP = tb.latestAndBounds(o, s, workers)
		for j := range o.len() {
			r.rows, r.keys = append(r.rows, o.row(j)), append(r.keys, o.key(j))
		}
		return r
	}
	all := make([]bool, nSeries) // every series kept, through the general loop rather than cutKeys
	for r := range all {
		all[r] = true
	}
	for _, tc := range []struct {
		name string
		opt  Options
		keep []bool
	}{
		{"last", Options{OnDuplicate: OnDuplicateLast}, nil},
		{"last, a shard", Options{OnDuplicate: OnDuplicateLast}, someShards},
		{"error", Options{OnDuplicate: OnDuplicateError, SeriesColumn: "series_id", PeriodColumn: "period"}, nil},
	} {
		want := run(tc.opt, tc.keep, 1)
		if tc.opt.OnDuplicate == OnDuplicateLast && (want.dropped == 0 || len(want.series) == 0) {
			t.Fatalf("%s: the input has no duplicates (%d) or series (%d): the test proves nothing", tc.name, want.dropped, len(want.series))
		}
		if tc.opt.OnDuplicate == OnDuplicateError && want.err == "" {
			t.Fatalf("%s: no duplicate error", tc.name)
		}
		for _, workers := range []int{2, 3, 4, -1, -3} {
			keep := tc.keep
			if workers < 0 && keep == nil {
				workers, keep = -workers, all
			} else if workers < 0 {
				continue
			}
			got := run(tc.opt, keep, workers)
			if got.err != want.err || got.dropped != want.dropped || got.other != want.other || got.minP != want.minP || got.maxP != want.maxP {
				t.Fatalf("%s, %d workers: err %q dropped %d other %d periods %d..%d; want %q %d %d %d..%d", tc.name, workers,
					got.err, got.dropped, got.other, got.minP, got.maxP, want.err, want.dropped, want.other, want.minP, want.maxP)
			}
			if !slices.Equal(got.series, want.series) || !slices.Equal(got.rows, want.rows) || !slices.Equal(got.keys, want.keys) {
				t.Fatalf("%s, %d workers: order or series differ from one worker's (%d series, want %d; %d rows, want %d)",
					tc.name, workers, len(got.series), len(want.series), len(got.rows), len(want.rows))
			}
		}
	}
}
