package query

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/datafile"
)

// Totals summarise the rows a request selects without sending them: what
// SQL's count(*), min(period), max(period) and count(DISTINCT series_id)
// ask.
type Totals struct {
	Rows   int64 // rows the request's answer would hold (Limit aside)
	Series int64 // series with at least one of those rows
	// First and Last are the least and greatest period among the rows;
	// meaningless when Rows is 0.
	First, Last int32
}

// spanner is a Reader that knows a series' whole extent from its index:
// rows (both tiers) and first and last period. ok is false when the rows
// must be read to know (a series the delta touches).
type spanner interface {
	span(code int) (rows int64, first, last int32, ok bool)
}

func (r *SnapshotReader) span(code int) (int64, int32, int32, bool) {
	e := r.x.Entry(code)
	return e.RowCount + e.Cold.Rows, e.FirstPeriod, e.LastPeriod, true
}

func (c *Composite) span(code int) (int64, int32, int32, bool) {
	if c.inDelta(code) {
		return 0, 0, 0, false
	}
	return c.base.span(code)
}

// Aggregate computes the totals of req over r. The selection and limits
// are NewPlan's, so a request refused as rows is refused as totals; the
// columns and Limit do not matter. A series whose rows all lie in the
// range is answered from the index (its row count and first and last
// period), one the range cuts by the binary searches a plan makes, one
// the delta touches by merging its rows; a latest request's period of a
// series comes from the index when the range is open.
func Aggregate(r Reader, req *Request, lim Limits) (Totals, error) {
	info := r.Info()
	if req.Snapshot != 0 && req.Snapshot != info.SnapshotID {
		return Totals{}, Errorf(ErrStale, "dataset %q is serving snapshot %d, the request asks for snapshot %d", info.Dataset, info.SnapshotID, req.Snapshot)
	}
	if req.Range.From > req.Range.To {
		return Totals{}, Errorf(ErrInvalid, "period range starts after it ends")
	}
	if req.Select.Kind == ByIDs && lim.MaxSeries > 0 && len(req.Select.IDs) > lim.MaxSeries {
		return Totals{}, Errorf(ErrLimit, "%d series requested from dataset %q, limit %d per request; use a prefix or category for more", len(req.Select.IDs), info.Dataset, lim.MaxSeries)
	}
	sel, err := r.Select(req.Select)
	if err != nil {
		return Totals{}, err
	}
	t := Totals{First: math.MaxInt32, Last: math.MinInt32}
	add := func(rows int64, first, last int32) {
		if rows <= 0 {
			return
		}
		t.Rows += rows
		t.Series++
		t.First, t.Last = min(t.First, first), max(t.Last, last)
	}
	sp, _ := r.(spanner)
	rg := req.Range
	var buf []Piece
	for k := 0; k < sel.Len(); k++ {
		code := sel.Code(k)
		if req.Latest {
			p, ok, err := latestPeriod(r, code, rg)
			if err != nil {
				return Totals{}, err
			}
			if ok {
				add(1, p, p)
			}
			continue
		}
		if sp != nil {
			if n, first, last, ok := sp.span(code); ok && rg.Covers(first, last) {
				add(n, first, last)
				continue
			}
		}
		if buf, err = r.Rows(code, rg, buf[:0]); err != nil {
			return Totals{}, err
		}
		var n int64
		for _, pc := range buf {
			n += pc.Len()
		}
		if n > 0 {
			add(n, periodAt(buf[0], buf[0].Lo), periodAt(buf[len(buf)-1], buf[len(buf)-1].Hi-1))
		}
	}
	if t.Rows == 0 {
		t.First, t.Last = 0, 0
	}
	return t, nil
}

// latestPeriod is the period of a series' latest row in rg: the index's
// when rg is open, else the row LatestRow finds.
func latestPeriod(r Reader, code int, rg Range) (int32, bool, error) {
	if rg.IsAll() {
		p, ok := r.Latest(code)
		return p, ok, nil
	}
	pc, ok, err := r.LatestRow(code, rg)
	if err != nil || !ok {
		return 0, false, err
	}
	return periodAt(pc, pc.Lo), true, nil
}

// periodAt is the period of row i of a piece's batch.
func periodAt(p Piece, i int64) int32 {
	return int32(p.Rec.Column(datafile.ColumnPeriod).(*array.Date32).Value(int(i)))
}
