package sortwrite

import (
	"fmt"

	"github.com/energyscope/servingsnap/pkg/period"
)

// The pass after the sort walks all rows once: it drops duplicates and
// other shards' series, and cuts the rows into series. On 15M rows it was
// a tenth of a second on one core while the other idled, so it runs on
// several workers, each over a range of positions that starts where a
// series starts (a duplicate or a series never spans two ranges); each
// compacts its range in place and the ranges are then moved together.
// The result is the serial pass's, for any number of workers: the same
// order, series, counts and, for a duplicate under "error", the same
// first duplicate.

// spansPart is one worker's share of the pass.
type spansPart struct {
	start, end  int // the range's first position, and where its kept rows end
	series      []span
	dropped     int64
	otherShards int64
	err         error
}

// cutSeries drops duplicates (o is sorted by key, duplicates in input
// order) and rows of series keep leaves out (nil: keep all), compacts o
// and returns the series in output order. ids[byID[rank]] is a rank's id.
func (t *table) cutSeries(o *order, opt Options, ids []string, byID []uint32, keep []bool, workers int) (series []span, dropped, otherShards int64, err error) {
	n := o.len()
	workers = max(1, min(workers, n>>16))
	cuts := make([]int, workers+1)
	cuts[workers] = n
	for w := 1; w < workers; w++ {
		c := max(n*w/workers, cuts[w-1])
		for c < n && c > 0 && o.rank(c-1) == o.rank(c) {
			c++
		}
		cuts[w] = c
	}
	parts := make([]spansPart, workers)
	parallel(workers, func(w int) {
		parts[w] = t.cutRange(o, opt, ids, byID, keep, cuts[w], cuts[w+1])
	})
	out := 0
	for i := range parts {
		p := &parts[i]
		if p.err != nil {
			return nil, 0, 0, p.err
		}
		if shift := p.start - out; shift != 0 {
			for j := p.start; j < p.end; j++ {
				o.move(j-shift, j)
			}
			for k := range p.series {
				p.series[k].start -= shift
				p.series[k].end -= shift
			}
		}
		out += p.end - p.start
		series = append(series, p.series...)
		dropped += p.dropped
		otherShards += p.otherShards
	}
	o.truncate(out)
	return series, dropped, otherShards, nil
}

// cutRange is cutSeries over positions [a, b), compacted to start at a.
func (t *table) cutRange(o *order, opt Options, ids []string, byID []uint32, keep []bool, a, b int) spansPart {
	if o.keys != nil && keep == nil && a < b {
		if p, ok := cutKeys(o, opt, ids, byID, a, b); ok {
			return p
		}
	}
	p := spansPart{start: a}
	w := a
	for j := a; j < b; j++ {
		if keep != nil && !keep[o.rank(j)] {
			p.otherShards++
			continue // another shard's series
		}
		if w > a && o.key(w-1) == o.key(j) {
			if opt.OnDuplicate == OnDuplicateError {
				prev, row := o.row(w-1), o.row(j)
				p.err = fmt.Errorf("duplicate key (%s %q, %s %s): %s and %s; pass --on-duplicate=last to keep the later row",
					opt.SeriesColumn, ids[t.series.codes[row]], opt.PeriodColumn, period.Format(o.period(j)),
					t.location(int64(prev)), t.location(int64(row)))
				return p
			}
			o.move(w-1, j)
			p.dropped++
			continue
		}
		if w == a || o.rank(w-1) != o.rank(j) {
			if k := len(p.series); k > 0 {
				p.series[k-1].end = w
			}
			p.series = append(p.series, span{id: ids[byID[o.rank(j)]], start: w})
		}
		o.move(w, j)
		w++
	}
	if k := len(p.series); k > 0 {
		p.series[k-1].end = w
	}
	p.end = w
	return p
}

// cutKeys is cutRange over packed keys when every series is kept: one
// loop over the keys with the last kept key in a register, rather than
// the order's accessors (each a branch on the order's kind and a reload
// of the key before). It gives up (false) at the first duplicate under
// "error", for cutRange to report.
func cutKeys(o *order, opt Options, ids []string, byID []uint32, a, b int) (spansPart, bool) {
	p := spansPart{start: a}
	keys := o.keys[:b]
	kshift, rshift := o.ibits, o.ibits+o.pbits
	last := opt.OnDuplicate == OnDuplicateLast
	prev := keys[a]
	p.series = append(p.series, span{id: ids[byID[prev>>rshift]], start: a})
	w := a + 1
	for _, k := range keys[a+1:] {
		if k>>kshift == prev>>kshift { // a duplicate: the later row stays
			if !last {
				return spansPart{}, false
			}
			keys[w-1] = k
			prev = k
			p.dropped++
			continue
		}
		if k>>rshift != prev>>rshift {
			p.series[len(p.series)-1].end = w
			p.series = append(p.series, span{id: ids[byID[k>>rshift]], start: w})
		}
		keys[w] = k
		prev = k
		w++
	}
	p.series[len(p.series)-1].end = w
	p.end = w
	return p, true
}

// latestAndBounds sets each series' latest row (its last row with a
// non-null value, noRow if none) and returns the first and last period
// over all series, on up to workers goroutines.
func (t *table) latestAndBounds(o *order, series []span, workers int) (minP, maxP int32) {
	workers = max(1, min(workers, len(series)>>12))
	mins, maxs := make([]int32, workers), make([]int32, workers)
	parallel(workers, func(w int) {
		a, b := len(series)*w/workers, len(series)*(w+1)/workers
		for i := a; i < b; i++ {
			s := &series[i]
			s.latest = noRow
			for j := s.end - 1; j >= s.start; j-- {
				if r := o.row(j); !t.value.isNull(int(r)) {
					s.latest = r
					break
				}
			}
			first, last := o.period(s.start), o.period(s.end-1)
			if i == a || first < mins[w] {
				mins[w] = first
			}
			if i == a || last > maxs[w] {
				maxs[w] = last
			}
		}
	})
	seen := false
	for w := range workers {
		if len(series)*(w+1)/workers == len(series)*w/workers {
			continue // an empty share
		}
		if !seen || mins[w] < minP {
			minP = mins[w]
		}
		if !seen || maxs[w] > maxP {
			maxP = maxs[w]
		}
		seen = true
	}
	return minP, maxP
}
