package livedelta

import (
	"cmp"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// keyIndex remembers, for every series the delta holds, its code in the
// base (-1: none) and the periods the delta holds for it. With it a new
// write counts the rows it adds (those revising nothing) and finds the
// series the base lacks with one map probe per series and integer searches,
// instead of a string binary search per series in the base and in every
// run. It belongs to a chain of States (Apply extends it in place), so
// Apply must run on one goroutine at a time: the write path's lock.
type keyIndex struct {
	base Base
	// series holds every entry of a series the base lacks, and the base
	// series that writes without codes (entry: replays, Append) looked up
	// by id.
	series map[string]*keyEntry
	// byCode is the base series' entries by code (grown on demand): every
	// entry of a base series is here, so a write that arrives with its
	// codes (Prepare, the write path) finds its series by a slice index
	// and adds the ones new to the delta without a map insertion each
	// (which was most of the applier's work for the first write of each
	// series after a start or a compaction: BenchmarkAppendPrepared/first).
	byCode []*keyEntry
	// slab is where new entries are taken from, a block at a time.
	slab []keyEntry
}

// newEntry is a zeroed entry from the slab.
func (k *keyIndex) newEntry() *keyEntry {
	if len(k.slab) == 0 {
		k.slab = make([]keyEntry, 256)
	}
	e := &k.slab[0]
	k.slab = k.slab[1:]
	return e
}

type keyEntry struct {
	id      string
	code    int32          // in the base, -1 if none
	base    []arrow.Date32 // the base's periods of the series
	periods []int32        // the delta's, ascending
	// stamp and rank are newRun's scratch: the sequence number of the
	// write that last ranked the series, and its rank there.
	stamp uint64
	rank  int32
}

// compareEntries orders series by id: two series of the base by their
// codes (the base lists ids in order), any other pair by the ids' bytes.
func compareEntries(a, b *keyEntry) int {
	if a.code >= 0 && b.code >= 0 {
		return cmp.Compare(a.code, b.code)
	}
	return strings.Compare(a.id, b.id)
}

func newKeyIndex(base Base) *keyIndex {
	return &keyIndex{base: base, series: map[string]*keyEntry{}}
}

// entry is id's entry, looked up in the base the first time.
func (k *keyIndex) entry(id string) *keyEntry {
	if e, ok := k.series[id]; ok {
		return e
	}
	code := -1
	if k.base != nil {
		if c, ok := k.base.Lookup(id); ok {
			code = c
		}
	}
	var e *keyEntry
	if code >= 0 {
		e = k.coded(int32(code), id) // (known by code if a coded write had it)
	} else {
		e = k.newEntry()
		e.id, e.code = id, -1
	}
	k.series[id] = e
	return e
}

// coded is the entry of base series code, whose id is id.
func (k *keyIndex) coded(code int32, id string) *keyEntry {
	if int(code) < len(k.byCode) {
		if e := k.byCode[code]; e != nil {
			return e
		}
	}
	e := k.newEntry()
	e.id, e.code, e.base = id, code, k.base.Periods(int(code))
	k.setCode(e)
	return e
}

func (k *keyIndex) setCode(e *keyEntry) {
	if int(e.code) >= len(k.byCode) {
		k.byCode = slices.Grow(k.byCode, int(e.code)+1-len(k.byCode))
		k.byCode = k.byCode[:cap(k.byCode)]
	}
	k.byCode[e.code] = e
}

// add records run r's rows and returns how many revise nothing older
// (neither the base nor an earlier write), and the run-local series the
// base lacks.
func (k *keyIndex) add(r *Run) (added int64, fresh []int32) {
	return k.addEntries(r, nil, nil)
}

// addEntries is add with the run's series' entries at hand (entries[i]
// for run-local series i), or looked up when entries is nil. inBase, if
// not nil, says for each of the run's rows whether the base holds its
// period (Prepare found it off the write path's lock), so only the
// delta's own periods are searched here.
func (k *keyIndex) addEntries(r *Run, entries []*keyEntry, inBase []bool) (added int64, fresh []int32) {
	ps := r.Periods()
	// a new slice: r may be a copy of a run other States share
	r.codes, r.coder = make([]int32, r.NumSeries()), k
	for i := 0; i < r.NumSeries(); i++ {
		var e *keyEntry
		if entries != nil {
			e = entries[i]
		} else {
			e = k.entry(r.SeriesID(i))
		}
		r.codes[i] = e.code
		if e.code < 0 {
			fresh = append(fresh, int32(i))
		}
		lo, hi := r.Rows(i)
		// Search only the periods of earlier runs (sorted): the ones this
		// loop appends are unsorted until the end, and a run holds each
		// period once, so they need no search.
		older := len(e.periods)
		for j, p := range ps[lo:hi] {
			var based bool
			if inBase != nil {
				based = inBase[lo+j]
			} else {
				based = inDates(e.base, p)
			}
			if based || inInts(e.periods[:older], int32(p)) {
				continue
			}
			added++
			e.periods = append(e.periods, int32(p))
		}
		if len(e.periods) > older {
			slices.Sort(e.periods)
		}
	}
	return added, fresh
}

// inDates and inInts report whether the ascending s holds p. Outside
// s's bounds (an append after a series' last period, the usual write)
// they answer without a search.
//
// inDates reads a base series' periods, which lie in the mapped data file
// and are rarely in cache: a binary search over a 150-period series is a
// chain of cache misses. Periods are mostly evenly spaced (annual, monthly,
// daily), so it looks first where p would be if they were (interpolation)
// and at a few neighbours; only an irregular series falls back to the
// binary search.
func inDates(s []arrow.Date32, p arrow.Date32) bool {
	n := len(s)
	if n == 0 || p < s[0] || p > s[n-1] {
		return false
	}
	return inDatesNear(s, p, dateGuess(s[0], s[n-1], n, p))
}

// dateGuess is where p would lie among n periods from first to last if
// they were evenly spaced, clamped to [0, n); -1 when n is too short to be
// worth guessing. first and last may come from the index rather than the
// periods themselves (markInBase): a guess only directs the search, so an
// index that disagrees costs a search, never a wrong answer.
func dateGuess(first, last arrow.Date32, n int, p arrow.Date32) int {
	span := int64(last) - int64(first)
	if n <= 8 || span <= 0 {
		return -1
	}
	g := (int64(p) - int64(first)) * int64(n-1) / span // in int64: dates far apart overflow int32
	return int(min(max(g, 0), int64(n-1)))
}

// inDatesNear is inDates given the guess g (dateGuess): s[g], then a few
// neighbours, then a binary search of the rest.
func inDatesNear(s []arrow.Date32, p arrow.Date32, g int) bool {
	n := len(s)
	if g >= 0 && g < n {
		const near = 3 // neighbours looked at either side of the guess
		switch {
		case s[g] == p:
			return true
		case s[g] < p:
			for i := g + 1; i < n && i <= g+near; i++ {
				if s[i] >= p {
					return s[i] == p
				}
			}
			s = s[min(g+near+1, n):]
		default:
			for i := g - 1; i >= 0 && i >= g-near; i-- {
				if s[i] <= p {
					return s[i] == p
				}
			}
			s = s[:max(g-near, 0)]
		}
	}
	_, ok := slices.BinarySearch(s, p)
	return ok
}

// markInBase sets inBase[j] for each row j of r (a run of one write, its
// series numbered codes in the base, -1 for a series the base lacks)
// whose (series, period) the base holds.
//
// It works in passes over the rows, not row by row: find every row's
// series' periods and the interpolated guess of its place (dateGuess,
// from the bounds the index holds when the base is a BoundedBase, so the
// periods are not read for it), then load every guess, then resolve. The
// periods lie in the mapped data file, one series' out of cache for each
// row of a write of many series; row by row that was a chain of two or
// three misses each (the series' first and last period, then the guess),
// while the load pass has many independent misses in flight at once.
func markInBase(base Base, codes []int32, r *Run, inBase []bool, sc *prepareScratch) {
	ps := r.Periods()
	bb, _ := base.(BoundedBase)
	probes := sc.probes[:0]
	for i, c := range codes {
		if c < 0 {
			continue
		}
		lo, hi := r.Rows(i)
		var first, last arrow.Date32
		if bb != nil {
			// A series' rows are by period: none in base when they all
			// lie outside its bounds (appends, mostly), which spares
			// reading the series' periods at all.
			if first, last = bb.Bounds(int(c)); ps[lo] > last || ps[hi-1] < first {
				continue
			}
		}
		s := base.Periods(int(c))
		if len(s) == 0 {
			continue
		}
		if bb == nil {
			first, last = s[0], s[len(s)-1]
		}
		for j := lo; j < hi; j++ {
			if p := ps[j]; p >= first && p <= last {
				probes = append(probes, baseProbe{s: s, row: int32(j), g: int32(dateGuess(first, last, len(s), p))})
			}
		}
	}
	at := slices.Grow(sc.at[:0], len(probes))[:len(probes)]
	sc.at = at
	for k, pr := range probes {
		if pr.g >= 0 {
			at[k] = pr.s[pr.g]
		}
	}
	for k, pr := range probes {
		p := ps[pr.row]
		inBase[pr.row] = pr.g >= 0 && at[k] == p || inDatesNear(pr.s, p, int(pr.g))
	}
	clear(probes) // a recycled scratch must not keep the base's periods reachable
	sc.probes = probes[:0]
}

// baseProbe is one row markInBase looks for in its series' base periods s
// (guess g, dateGuess).
type baseProbe struct {
	s   []arrow.Date32
	row int32
	g   int32
}

func inInts(s []int32, p int32) bool {
	if len(s) == 0 || p < s[0] || p > s[len(s)-1] {
		return false
	}
	_, ok := slices.BinarySearch(s, p)
	return ok
}
