package sortwrite

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// attrRead checks, while the in-memory build reads, whether a string
// column other than the series id is constant within every series (an
// index attribute), so that an attribute's per-row codes are never
// written. They were 4 bytes a row per column of fresh memory (240 MB for
// the 15M-row lake's four attributes), each page zeroed by the kernel on
// first touch, then read again whole by the layout's constantPerSeries,
// and all for a column whose index needs one value per series.
//
// The page reader gives a unit's column chunk here when the unit's series
// column is already read: it checks the chunk's rows against a table
// indexed by the series' local dictionary index (pageScratch.tab, small
// enough for L1/L2), so that each series has one value in the unit, then
// merges the unit's (series, value) pairs into first, which holds each
// series' value over all units so far. A series
// found with two values (in one unit, or across units) makes the column
// not an attribute: conflict. Any unit whose codes went to the store row
// by row instead (pqarrow, a file without the column, a unit whose series
// were not paged, a unit read after the conflict) sets perRow.
//
// When the read ends (finish), a column without conflict and without
// perRow is an attribute whose value per series is first: gather reads it
// there. Any other column gets its per-row codes written (materialize)
// from first for the units that agreed with it, which keep nothing, and
// from their own pairs for the few that did not and the layout checks it over every row as before,
// so the outcome is the one constantPerSeries gives for any input; only
// the work differs.
type attrRead struct {
	mu sync.Mutex
	// first holds, per series code, the series' value: code+1, nullCode
	// for null, 0 while no unit had the series. It is as long as the
	// input's rows (an upper bound on the series), from the arena: only
	// the pages the series codes reach are touched.
	first []uint32
	units []attrUnit // units checked per series, for materialize

	conflict atomic.Bool
	perRow   atomic.Bool

	// decided: finish found the column an attribute (first is its value
	// per series, codes are never written); series is the series
	// column's codes, per row.
	decided bool
	series  []uint32
}

// attrUnit is one unit's column checked per series: rows [lo, hi) of the
// stores, and pairs of series code<<32 | value (as in first) when some
// value differs from first's (nil: each series' value is first's, which
// never changes once set, so the unit needs nothing kept).
type attrUnit struct {
	lo, hi int
	pairs  []uint64
}

func newAttrRead(rows int, mem *bigArena) *attrRead {
	return &attrRead{first: bigSlice[uint32](mem, rows)}
}

// perSeries reports whether a unit of the column should be checked per
// series: no conflict yet (after one the column is not an attribute, and
// its rows are written as they are).
func (a *attrRead) perSeries() bool {
	return a != nil && !a.conflict.Load() && !a.perRow.Load()
}

// notePerRow records that a unit's codes were written row by row.
func (a *attrRead) notePerRow() {
	if a != nil && !a.perRow.Load() {
		a.perRow.Store(true)
	}
}

// checkRows checks the rows of a page, whose series are series (local
// indices of the unit's series dictionary), against tab (an entry per
// local series: value code+1 or nullCode, 0 while not seen in the unit).
// It reports false when a series has a second value. Without nulls the
// loop has no branch on the data: each row stores its value and folds
// the difference from the value stored before (when there was one) into
// a word, a series first seen anywhere in the page (about one row in
// eight) being as cheap as any other row.
func checkRows(tab, series, remap, valid []uint32, hasNulls bool, idx []uint32) bool {
	var diff uint32
	if !hasNulls {
		idx = idx[:len(series)]
		for i, s := range series {
			v := remap[idx[i]] + 1
			e := tab[s]
			tab[s] = v
			var seen uint32
			if e != 0 { // a SETcc, not a jump
				seen = 1
			}
			diff |= (e ^ v) * seen
		}
		return diff == 0
	}
	j := 0
	for i, s := range series {
		v := uint32(nullCode)
		if valid[i] != 0 {
			v = remap[idx[j]] + 1
			j++
		}
		e := tab[s]
		tab[s] = v
		if e != 0 && e != v {
			return false
		}
	}
	return true
}

// merge adds a checked unit (rows [lo, hi); tab holds each local series'
// value, remap the series' global codes) to first, noting a conflict with
// another unit. Only a unit in conflict keeps its pairs (allocating them
// for every unit was 60 MB a build of the 15M-row lake).
func (a *attrRead) merge(lo, hi int, tab, remap []uint32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := a.first
	conflict := false
	for i, v := range tab {
		if v == 0 { // a dictionary entry no row uses has none
			continue
		}
		s := int(remap[i])
		if s >= len(first) {
			a.perRow.Store(true) // more series codes than rows: the general check
			conflict = true      // and the pairs kept, first cannot say
			continue
		}
		switch f := first[s]; f {
		case v:
		case 0:
			first[s] = v
		default:
			conflict = true
		}
	}
	var pairs []uint64
	if conflict {
		a.conflict.Store(true)
		for i, v := range tab {
			if v != 0 {
				pairs = append(pairs, uint64(remap[i])<<32|uint64(v))
			}
		}
	}
	a.units = append(a.units, attrUnit{lo, hi, pairs})
}

// code is the value code of a series (nullCode for null).
func (a *attrRead) code(series uint32) uint32 {
	v := a.first[series]
	if v != nullCode {
		v--
	}
	return v
}

// finishAttrs ends the read of every column checked per series: an
// attribute keeps its values per series, any other column gets its
// per-row codes from the units' pairs.
func (t *table) finishAttrs(parallel int) {
	for _, s := range t.others {
		a := s.att
		if a == nil {
			continue
		}
		decided := !a.conflict.Load() && !a.perRow.Load()
		if onAttrsRead != nil {
			onAttrsRead(s.col.Name, decided)
		}
		if decided {
			a.decided, a.series, a.units = true, t.series.codes, nil
			continue
		}
		s.materialize(t.series.codes, len(t.series.dict.values), parallel)
		s.att = nil
	}
}

// onAttrsRead (a test hook) is told, when the read ends, each column
// checked per series and whether the read found it an attribute.
var onAttrsRead func(column string, attr bool)

// materialize writes the per-row codes of the units checked per series:
// a unit's rows of series s hold the unit's one value of s.
func (s *store) materialize(series []uint32, nSeries, parallel int) {
	a := s.att
	var g errgroup.Group
	g.SetLimit(max(parallel, 1))
	tabs := sync.Pool{New: func() any { t := make([]uint32, nSeries); return &t }}
	for _, u := range a.units {
		g.Go(func() error {
			codes := s.codes[u.lo:u.hi]
			if u.pairs == nil { // the unit's values are first's
				for i, c := range series[u.lo:u.hi] {
					codes[i] = a.code(c)
				}
				return nil
			}
			tp := tabs.Get().(*[]uint32)
			defer tabs.Put(tp)
			tab := *tp
			for _, p := range u.pairs {
				tab[p>>32] = uint32(p)
			}
			for i, c := range series[u.lo:u.hi] {
				v := tab[c]
				if v != nullCode {
					v--
				}
				codes[i] = v
			}
			return nil
		})
	}
	g.Wait()
}

// perSeriesView is, for gathering an attribute read per series, a store
// of just the given rows (the value of row r is its series') and the rows
// to gather from it: position i, or noRow where rows has noRow.
func (s *store) perSeriesView(rows []uint32) (*store, []uint32) {
	codes := make([]uint32, len(rows))
	at := make([]uint32, len(rows))
	for i, r := range rows {
		if r == noRow {
			at[i] = noRow
			continue
		}
		at[i] = uint32(i)
		codes[i] = s.att.code(s.att.series[r])
	}
	return &store{col: s.col, kind: s.kind, dict: s.dict, codes: codes}, at
}
