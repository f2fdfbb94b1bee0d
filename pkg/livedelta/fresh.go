package livedelta

import (
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// FreshSeries is a series its State's base lacks: its id, and the run
// series whose attributes stand for it (the newest write that gave them;
// the newest write of the series if none did). It is immutable: a write
// that gives it attributes later makes a new one for the States after it.
type FreshSeries struct {
	ID    string
	attrs *runAttrs
	local int32
	given bool
}

// runAttrs are one run's attribute columns (Run.attrs), shared by the
// FreshSeries that point into it. A FreshSeries keeps only these and its
// id's bytes (the run's id column, as the key index's entries do) alive,
// not the run's rows: a merged-away run's rows are freed while its
// attribute columns stay for the series they describe, until a rebase
// (a reload, a compaction) lists the fresh series anew.
type runAttrs struct{ cols []arrow.Array }

// Attr is attribute a of the series: its column and the series' row in it.
func (f *FreshSeries) Attr(a int) (arrow.Array, int) { return f.attrs.cols[a], int(f.local) }

// Given reports whether a write carried the series' attributes.
func (f *FreshSeries) Given() bool { return f.given }

// supersedes reports whether run-local series i of a newer run stands for
// a series instead of f: a newer write does unless f's gave attributes
// and its does not.
func supersedes(r *Run, i int, f *FreshSeries) bool { return f == nil || r.Given(i) || !f.given }

func freshOf(r *Run, ra *runAttrs, i int32) *FreshSeries {
	return &FreshSeries{ID: r.SeriesID(int(i)), attrs: ra, local: i, given: r.Given(int(i))}
}

// listFresh is the sorted list of the series runs (oldest first) hold
// that their base lacks (each run's fresh, set by indexRuns): what a
// rebase builds in full.
func listFresh(runs []*Run) []*FreshSeries {
	byID := map[string]*FreshSeries{}
	for _, r := range runs {
		if len(r.fresh) == 0 {
			continue
		}
		ra := &runAttrs{r.attrs}
		for _, i := range r.fresh {
			id := r.SeriesID(int(i))
			if f := byID[id]; supersedes(r, int(i), f) {
				byID[id] = freshOf(r, ra, i)
			}
		}
	}
	out := make([]*FreshSeries, 0, len(byID))
	for _, f := range byID {
		out = append(out, f)
	}
	slices.SortFunc(out, compareFresh)
	return out
}

func compareFresh(a, b *FreshSeries) int { return strings.Compare(a.ID, b.ID) }

// withFresh is list (sorted, of the States before) with run r's fresh
// series counted in, r being newer than every run list came from. list is
// shared with readers, so a change makes a new slice; a run that adds no
// fresh series returns list itself. The cost is a search per fresh series
// of r (galloping from the one before: r's series are in id order) and a
// copy of list's pointers, never a sort of the whole list: a delta with
// 100k series of its own used to collect and sort all of them at every
// acknowledged write (BenchmarkPublishNewSeries).
func withFresh(list []*FreshSeries, r *Run) []*FreshSeries {
	if len(r.fresh) == 0 {
		return list
	}
	ra := &runAttrs{r.attrs}
	out := make([]*FreshSeries, 0, len(list)+len(r.fresh))
	at := 0 // list[:at] is copied
	for _, i := range r.fresh {
		id := r.SeriesID(int(i))
		j := at + gallop(list[at:], id)
		out = append(out, list[at:j]...)
		at = j
		if j < len(list) && list[j].ID == id {
			f := list[j]
			if supersedes(r, int(i), f) {
				f = freshOf(r, ra, i)
			}
			out = append(out, f)
			at++
			continue
		}
		out = append(out, freshOf(r, ra, i))
	}
	return append(out, list[at:]...)
}

// gallop is the index of the first of list (sorted by id) whose id is not
// below id: an exponential probe from the front, then a binary search
// within the last step, so ids that follow one another cost O(log gap).
func gallop(list []*FreshSeries, id string) int {
	hi := 1
	for hi <= len(list) && list[hi-1].ID < id {
		hi *= 2
	}
	lo := hi / 2 // list[:lo] is below id
	hi = min(hi, len(list))
	j, _ := slices.BinarySearchFunc(list[lo:hi], id, func(f *FreshSeries, id string) int { return strings.Compare(f.ID, id) })
	return lo + j
}
