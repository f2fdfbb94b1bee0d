package verify

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/sidecar"
)

// seriesSeen is what the data file says about one series.
type seriesSeen struct {
	seen        bool
	rowOffset   int64
	rowCount    int64
	batch       int
	batchOffset int
	first, last int32
	latestBatch int // -1: no non-null value
	latestRow   int
}

// deep reads every row of the data file once and checks it against the
// sort order, the index and the manifest (docs/FORMAT.md §3–4); in a
// tiered snapshot, every row of the cold file too (deepCold), and the
// index's bounds and latest values over both tiers.
func (v *verifier) deep() {
	s := v.snap
	x := s.Index()
	n := x.Len()
	df, _ := v.m.FileByRole(manifest.RoleData)
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	v.at = df.Path
	defer func() {
		if r := recover(); r != nil {
			v.add(CheckArrow, df.Path, "", "reading the snapshot failed: %v", r)
		}
	}()

	// Types.
	v.ran()
	if vt, lt := s.Schema().Field(datafile.ColumnValue).Type, x.LatestValues().DataType(); !arrow.TypeEqual(vt, lt) {
		v.add(CheckTypes, xf.Path, "column "+sidecar.ColLatestValue, "latest_value is %s, the data's value column is %s", lt, vt)
	}

	// The index on its own: ids valid and strictly increasing, row counts
	// positive, dictionaries sorted.
	v.ran()
	ids := x.Record().Column(sidecar.ColumnSeriesID).(*array.String)
	if err := ids.ValidateFull(); err != nil {
		v.add(CheckIndex, xf.Path, "column "+sidecar.ColSeriesID, "%v", err)
		return
	}
	for i := 1; i < n; i++ {
		if a, b := x.SeriesID(i-1), x.SeriesID(i); a >= b {
			if !v.add(CheckIndex, xf.Path, v.seriesLoc(i), "series_id %q is not after %q (index row %d): ids must be strictly increasing bytewise", b, a, i-1) {
				return
			}
		}
	}
	fields, cols := x.Attributes()
	for k, c := range cols {
		d, ok := c.(*array.Dictionary)
		if !ok {
			continue
		}
		vals, ok := d.Dictionary().(*array.String)
		if !ok {
			continue // reported by the fast schema check
		}
		for j := 1; j < vals.Len(); j++ {
			if vals.Value(j-1) >= vals.Value(j) {
				v.add(CheckIndex, xf.Path, "column "+fields[k].Name, "dictionary entry %d %q is not after entry %d %q: dictionaries are sorted bytewise without repeats", j, vals.Value(j), j-1, vals.Value(j-1))
				break
			}
		}
		for i := 0; i < d.Len(); i++ {
			if d.IsValid(i) {
				if j := d.GetValueIndex(i); j < 0 || j >= vals.Len() {
					v.add(CheckIndex, xf.Path, v.seriesLoc(i)+" column "+fields[k].Name, "dictionary index %d out of range [0,%d)", j, vals.Len())
					break
				}
			}
		}
	}
	if v.full() {
		return
	}

	// The data, row by row.
	v.ran()
	st := make([]seriesSeen, n)
	batchRows := int64(v.m.Build.BatchRows)
	var (
		have       bool
		prev       uint32
		prevP      int32
		minP, maxP int32
		rows       int64
		bad        int // out-of-order rows in the current run
		badLoc     string
		badMsg     string
	)
	flush := func() bool {
		ok := true
		if bad > 0 {
			msg := badMsg
			if bad > 1 {
				msg += fmt.Sprintf(" (%d rows of this series out of order or repeated)", bad)
			}
			ok = v.add(CheckSort, df.Path, badLoc, "%s", msg)
		}
		bad = 0
		return ok
	}
	for b := 0; b < s.NumBatches(); b++ {
		rec := s.Batch(b)
		codes := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32).Uint32Values()
		periods := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
		vals := rec.Column(datafile.ColumnValue)
		start := s.BatchStart(b)
		runs := 0
		for i, c := range codes {
			p := int32(periods[i])
			if rows == 0 {
				minP, maxP = p, p
			}
			minP, maxP = min(minP, p), max(maxP, p)
			rows++
			newRun := !have || c != prev
			if newRun {
				if !flush() {
					return
				}
				runs++
				loc := rowLoc(b, i, start)
				switch {
				case int(c) >= n:
					if !v.add(CheckSeriesCode, df.Path, loc, "series_code %d is out of range: the index has %d series", c, n) {
						return
					}
				case st[c].seen:
					if !v.add(CheckSeriesCode, df.Path, loc, "series %q (code %d) starts again here; it already has rows from row %d: a series must be one contiguous run", x.SeriesID(int(c)), c, st[c].rowOffset) {
						return
					}
				default:
					st[c] = seriesSeen{seen: true, rowOffset: start + int64(i), batch: b, batchOffset: i, first: p, latestBatch: -1}
				}
				if have && c < prev && int(prev) < n && int(c) < n {
					if !v.add(CheckSort, df.Path, loc, "series %q (code %d) follows series %q (code %d): rows must be sorted by series_id", x.SeriesID(int(c)), c, x.SeriesID(int(prev)), prev) {
						return
					}
				}
			} else {
				if i == 0 {
					runs++
					if int(c) < n && !v.add(CheckBatches, df.Path, rowLoc(b, i, start), "series %q (code %d) continues from batch %d into batch %d: batches must be cut at series boundaries", x.SeriesID(int(c)), c, b-1, b) {
						return
					}
				}
				if p <= prevP {
					bad++
					if bad == 1 {
						badLoc = rowLoc(b, i, start)
						badMsg = periodOrderMsg(p, prevP, c)
					}
				}
			}
			if int(c) < n {
				e := &st[c]
				e.rowCount++
				e.last = p
				if vals.IsValid(i) {
					e.latestBatch, e.latestRow = b, i
				}
			}
			prev, prevP, have = c, p, true
		}
		if batchRows > 0 && rec.NumRows() > batchRows && runs > 1 {
			if !v.add(CheckBatches, df.Path, fmt.Sprintf("batch %d", b), "%d rows in %d series exceed build.batch_rows %d: only a batch holding one series may be larger", rec.NumRows(), runs, batchRows) {
				return
			}
		}
	}
	if !flush() {
		return
	}

	// The cold tier, one chunk at a time (a tiered snapshot only).
	var cold []coldSeen
	coldDone := v.cold == nil
	if v.cold != nil && !v.full() {
		var crows int64
		var cmin, cmax int32
		cold, crows, cmin, cmax = v.deepCold(n)
		coldDone = cold != nil
		if crows > 0 {
			if rows == 0 {
				minP, maxP = cmin, cmax
			}
			minP, maxP = min(minP, cmin), max(maxP, cmax)
		}
		rows += crows
	}
	if v.full() {
		return
	}
	if !coldDone && v.cold != nil {
		v.note("the index was compared with the hot rows only: the cold file did not decode")
	}

	// The index against what the data says (both tiers).
	v.ran()
	latestVals := x.LatestValues()
	for c := 0; c < n; c++ {
		e := x.Entry(c)
		d := &st[c]
		var cs coldSeen
		if cold != nil {
			cs = cold[c]
		}
		hotless := v.cold != nil && e.RowCount == 0 && (cs.seen || !coldDone)
		if !d.seen && !hotless {
			where := "the data file"
			if v.cold != nil {
				where = "either tier"
			}
			if !v.add(CheckIndex, xf.Path, v.seriesLoc(c), "series has no rows in %s (index says %d rows at row %d)", where, e.RowCount, e.RowOffset) {
				return
			}
			continue
		}
		if !d.seen && !coldDone {
			continue // nothing to compare it with
		}
		var diffs []string
		diff := func(name string, idx, data any) {
			if fmt.Sprint(idx) != fmt.Sprint(data) {
				diffs = append(diffs, fmt.Sprintf("%s %v (data: %v)", name, idx, data))
			}
		}
		first, last := d.first, d.last
		if !d.seen {
			// Every row cold: the hot location is the empty one.
			first, last = cs.first, cs.last
			d = &seriesSeen{latestBatch: -1}
		}
		if cs.seen {
			first = cs.first
			if d.seen && cs.last >= d.first {
				diffs = append(diffs, fmt.Sprintf("cold rows end at %s, not before the first hot period %s", period.Format(cs.last), period.Format(d.first)))
			}
		}
		diff(sidecar.ColRowOffset, e.RowOffset, d.rowOffset)
		diff(sidecar.ColRowCount, e.RowCount, d.rowCount)
		diff(sidecar.ColBatch, e.Batch, d.batch)
		diff(sidecar.ColBatchOffset, e.BatchOffset, d.batchOffset)
		if coldDone {
			diff(sidecar.ColFirstPeriod, period.Format(e.FirstPeriod), period.Format(first))
		}
		if d.seen || coldDone {
			diff(sidecar.ColLastPeriod, period.Format(e.LastPeriod), period.Format(last))
		}
		lp, lok := x.Latest(c)
		switch {
		case d.latestBatch >= 0:
			lrec := s.Batch(d.latestBatch)
			dp := int32(lrec.Column(datafile.ColumnPeriod).(*array.Date32).Value(d.latestRow))
			dv := lrec.Column(datafile.ColumnValue)
			if !lok || lp != dp {
				diffs = append(diffs, fmt.Sprintf("latest_period %s (data: %s)", fmtLatestPeriod(lp, lok), period.Format(dp)))
			}
			if !latestVals.IsValid(c) || slot(latestVals, c) != slot(dv, d.latestRow) {
				diffs = append(diffs, fmt.Sprintf("latest_value %s (data: %s)", valueString(latestVals, c), valueString(dv, d.latestRow)))
			}
		case !coldDone:
			// The latest value may be a cold row the pass did not reach.
		case cs.latestOK:
			if !lok || lp != cs.latestP {
				diffs = append(diffs, fmt.Sprintf("latest_period %s (cold data: %s)", fmtLatestPeriod(lp, lok), period.Format(cs.latestP)))
			}
			if !latestVals.IsValid(c) || slot(latestVals, c) != cs.latestSlot {
				diffs = append(diffs, fmt.Sprintf("latest_value %s (cold data: %s)", valueString(latestVals, c), cs.latestText))
			}
		default:
			if lok || latestVals.IsValid(c) {
				diffs = append(diffs, fmt.Sprintf("latest_period %s latest_value %s (data: every value is null, want both null)", fmtLatestPeriod(lp, lok), valueString(latestVals, c)))
			}
		}
		if len(diffs) > 0 {
			if !v.add(CheckIndex, xf.Path, v.seriesLoc(c), "index disagrees with the data: %s", strings.Join(diffs, ", ")) {
				return
			}
		}
	}

	// The manifest's statistics against the data.
	v.ran()
	ms := v.m.Stats
	if !coldDone {
		return // the row count and bounds of the cold rows are unknown
	}
	if rows != ms.Rows {
		v.add(CheckStats, v.r.Manifest, "stats.rows", "stats.rows %d, the data holds %d (both tiers)", ms.Rows, rows)
	}
	if int64(n) != ms.Series {
		v.add(CheckStats, v.r.Manifest, "stats.series", "stats.series %d, the index holds %d", ms.Series, n)
	}
	var first, last string
	if rows > 0 {
		first, last = period.Format(minP), period.Format(maxP)
	}
	if first != ms.FirstPeriod || last != ms.LastPeriod {
		v.add(CheckStats, v.r.Manifest, "stats.first_period", "period bounds %q..%q, the data's are %q..%q", ms.FirstPeriod, ms.LastPeriod, first, last)
	}
}

// seriesLoc names index row c and its id.
func (v *verifier) seriesLoc(c int) string {
	x := v.snap.Index()
	if c < 0 || c >= x.Len() {
		return fmt.Sprintf("series %d", c)
	}
	return fmt.Sprintf("series %d %q", c, x.SeriesID(c))
}

func rowLoc(batch, row int, start int64) string {
	return fmt.Sprintf("batch %d row %d (row %d)", batch, row, start+int64(row))
}

func fmtLatestPeriod(p int32, ok bool) string {
	if !ok {
		return "null"
	}
	return period.Format(p)
}

func valueString(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch f := a.(type) {
	case *array.Float64:
		return strconv.FormatFloat(f.Value(i), 'g', -1, 64)
	case *array.Float32:
		return strconv.FormatFloat(float64(f.Value(i)), 'g', -1, 32)
	}
	return a.ValueStr(i)
}

// slot returns the raw bytes of element i of a fixed-width array (so that
// NaN payloads and -0 compare exactly), or its text for other types.
func slot(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return ""
	}
	if fw, ok := a.DataType().(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 && fw.BitWidth()%8 == 0 {
		d := a.Data()
		if bufs := d.Buffers(); len(bufs) > 1 && bufs[1] != nil {
			w := fw.BitWidth() / 8
			off := (d.Offset() + i) * w
			if b := bufs[1].Bytes(); off+w <= len(b) {
				return string(b[off : off+w])
			}
		}
	}
	return a.ValueStr(i)
}

// periodOrderMsg is the finding for period p after prevP (p <= prevP) in
// one series, code c: the hot and the cold rows' checks say it alike.
func periodOrderMsg(p, prevP int32, c uint32) string {
	what := "repeats"
	if p < prevP {
		what = "comes after"
	}
	return fmt.Sprintf("period %s %s period %s in the same series (code %d): periods must be strictly increasing", period.Format(p), what, period.Format(prevP), c)
}
