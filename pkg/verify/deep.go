package verify

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/snapshot"
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
// index's bounds and latest values over both tiers. Its steps run in the
// order below, each stopping the check when the findings are full or a
// later step has nothing sound to read.
func (v *verifier) deep() {
	df, _ := v.m.FileByRole(manifest.RoleData)
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	v.at = df.Path
	defer func() {
		if r := recover(); r != nil {
			v.add(CheckArrow, df.Path, "", "reading the snapshot failed: %v", r)
		}
	}()
	x := v.snap.Index()
	d := &deepPass{v: v, s: v.snap, x: x, n: x.Len(), data: df.Path, index: xf.Path}
	d.checkTypes()
	if !d.checkIndexAlone() || v.full() {
		return
	}
	if !d.checkHotRows() || !d.readColdRows() || !d.checkIndexAgainstRows() {
		return
	}
	d.checkStats()
}

// deepPass is what the steps of deep share: the snapshot, and what the
// rows said about each series and about the whole.
type deepPass struct {
	v           *verifier
	s           *snapshot.Snapshot
	x           *index.Reader
	n           int    // series in the index
	data, index string // the data and index files' paths, for findings
	st          []seriesSeen
	rows        int64 // rows of both tiers read
	minP, maxP  int32 // their period bounds, when rows > 0
	cold        []coldSeen
	coldDone    bool // every cold row was read (or there is no cold tier)
}

// checkTypes proves the index's latest_value has the data's value type.
func (d *deepPass) checkTypes() {
	d.v.ran()
	if vt, lt := d.s.Schema().Field(datafile.ColumnValue).Type, d.x.LatestValues().DataType(); !arrow.TypeEqual(vt, lt) {
		d.v.add(CheckTypes, d.index, "column "+index.ColLatestValue, "latest_value is %s, the data's value column is %s", lt, vt)
	}
}

// checkIndexAlone checks the index on its own: ids valid and strictly
// increasing, row counts positive, dictionaries sorted. It reports false
// when the ids are unreadable or the findings are full.
func (d *deepPass) checkIndexAlone() bool {
	v, x := d.v, d.x
	v.ran()
	ids := x.Record().Column(index.ColumnSeriesID).(*array.String)
	if err := ids.ValidateFull(); err != nil {
		v.add(CheckIndex, d.index, "column "+index.ColSeriesID, "%v", err)
		return false
	}
	for i := 1; i < d.n; i++ {
		if a, b := x.SeriesID(i-1), x.SeriesID(i); a >= b {
			if !v.add(CheckIndex, d.index, v.seriesLoc(i), "series_id %q is not after %q (index row %d): ids must be strictly increasing bytewise", b, a, i-1) {
				return false
			}
		}
	}
	fields, cols := x.Attributes()
	for k, c := range cols {
		if dict, ok := c.(*array.Dictionary); ok {
			d.checkDictionary(fields[k].Name, dict)
		}
	}
	return true
}

// checkDictionary proves an attribute's dictionary is sorted without
// repeats and every index into it is in range.
func (d *deepPass) checkDictionary(name string, dict *array.Dictionary) {
	vals, ok := dict.Dictionary().(*array.String)
	if !ok {
		return // reported by the fast schema check
	}
	for j := 1; j < vals.Len(); j++ {
		if vals.Value(j-1) >= vals.Value(j) {
			d.v.add(CheckIndex, d.index, "column "+name, "dictionary entry %d %q is not after entry %d %q: dictionaries are sorted bytewise without repeats", j, vals.Value(j), j-1, vals.Value(j-1))
			break
		}
	}
	for i := 0; i < dict.Len(); i++ {
		if dict.IsValid(i) {
			if j := dict.GetValueIndex(i); j < 0 || j >= vals.Len() {
				d.v.add(CheckIndex, d.index, d.v.seriesLoc(i)+" column "+name, "dictionary index %d out of range [0,%d)", j, vals.Len())
				break
			}
		}
	}
}

// orderRun gathers the out-of-order periods of one series into one
// finding (the first one's place, and how many there were).
type orderRun struct {
	bad int
	loc string
	msg string
}

// note records period p after prevP (series code c, batch b row i) when
// it is not increasing.
func (o *orderRun) note(p, prevP int32, c uint32, b, i int, start int64) {
	if p > prevP {
		return
	}
	o.bad++
	if o.bad == 1 {
		o.loc, o.msg = rowLoc(b, i, start), periodOrderMsg(p, prevP, c)
	}
}

// flush reports the run's finding, if any, and starts a new run; false
// when the findings are full.
func (o *orderRun) flush(v *verifier, path string) bool {
	ok := true
	if o.bad > 0 {
		msg := o.msg
		if o.bad > 1 {
			msg += fmt.Sprintf(" (%d rows of this series out of order or repeated)", o.bad)
		}
		ok = v.add(CheckSort, path, o.loc, "%s", msg)
	}
	o.bad = 0
	return ok
}

// hotCursor is where the row-by-row pass over the data file is: the
// previous row's series and period.
type hotCursor struct {
	have  bool
	prev  uint32
	prevP int32
	order orderRun
}

// checkHotRows reads the data file row by row: series contiguous and in
// id order, periods increasing, batches cut at series boundaries and no
// longer than build.batch_rows, and what each series' rows say for the
// index check. False when the findings are full.
func (d *deepPass) checkHotRows() bool {
	d.v.ran()
	d.st = make([]seriesSeen, d.n)
	var cur hotCursor
	for b := 0; b < d.s.NumBatches(); b++ {
		if !d.checkBatch(b, &cur) {
			return false
		}
	}
	return cur.order.flush(d.v, d.data)
}

// checkBatch is checkHotRows for batch b.
func (d *deepPass) checkBatch(b int, cur *hotCursor) bool {
	v := d.v
	rec := d.s.Batch(b)
	codes := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32).Uint32Values()
	periods := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
	vals := rec.Column(datafile.ColumnValue)
	start := d.s.BatchStart(b)
	runs := 0
	for i, c := range codes {
		p := int32(periods[i])
		d.notePeriod(p)
		if !cur.have || c != cur.prev {
			if !cur.order.flush(v, d.data) {
				return false
			}
			runs++
			if !d.startSeries(c, p, b, i, start, cur) {
				return false
			}
		} else {
			if i == 0 {
				runs++
				if int(c) < d.n && !v.add(CheckBatches, d.data, rowLoc(b, i, start), "series %q (code %d) continues from batch %d into batch %d: batches must be cut at series boundaries", d.x.SeriesID(int(c)), c, b-1, b) {
					return false
				}
			}
			cur.order.note(p, cur.prevP, c, b, i, start)
		}
		if int(c) < d.n {
			e := &d.st[c]
			e.rowCount++
			e.last = p
			if vals.IsValid(i) {
				e.latestBatch, e.latestRow = b, i
			}
		}
		cur.prev, cur.prevP, cur.have = c, p, true
	}
	if batchRows := int64(v.m.Build.BatchRows); batchRows > 0 && rec.NumRows() > batchRows && runs > 1 {
		if !v.add(CheckBatches, d.data, fmt.Sprintf("batch %d", b), "%d rows in %d series exceed build.batch_rows %d: only a batch holding one series may be larger", rec.NumRows(), runs, batchRows) {
			return false
		}
	}
	return true
}

// notePeriod counts a row of period p into the rows and their bounds.
func (d *deepPass) notePeriod(p int32) {
	if d.rows == 0 {
		d.minP, d.maxP = p, p
	}
	d.minP, d.maxP = min(d.minP, p), max(d.maxP, p)
	d.rows++
}

// startSeries checks the first row of a run of series code c (batch b
// row i): a code the index has, a series not seen before, after the
// previous one. False when the findings are full.
func (d *deepPass) startSeries(c uint32, p int32, b, i int, start int64, cur *hotCursor) bool {
	v, st := d.v, d.st
	loc := rowLoc(b, i, start)
	switch {
	case int(c) >= d.n:
		if !v.add(CheckSeriesCode, d.data, loc, "series_code %d is out of range: the index has %d series", c, d.n) {
			return false
		}
	case st[c].seen:
		if !v.add(CheckSeriesCode, d.data, loc, "series %q (code %d) starts again here; it already has rows from row %d: a series must be one contiguous run", d.x.SeriesID(int(c)), c, st[c].rowOffset) {
			return false
		}
	default:
		st[c] = seriesSeen{seen: true, rowOffset: start + int64(i), batch: b, batchOffset: i, first: p, latestBatch: -1}
	}
	if prev := cur.prev; cur.have && c < prev && int(prev) < d.n && int(c) < d.n {
		if !v.add(CheckSort, d.data, loc, "series %q (code %d) follows series %q (code %d): rows must be sorted by series_id", d.x.SeriesID(int(c)), c, d.x.SeriesID(int(prev)), prev) {
			return false
		}
	}
	return true
}

// readColdRows reads the cold tier one chunk at a time (a tiered snapshot
// only), adding its rows and bounds to the hot ones. False when the
// findings are full.
func (d *deepPass) readColdRows() bool {
	v := d.v
	d.coldDone = v.cold == nil
	if v.cold != nil && !v.full() {
		cold, crows, cmin, cmax := v.deepCold(d.n)
		d.cold, d.coldDone = cold, cold != nil
		if crows > 0 {
			if d.rows == 0 {
				d.minP, d.maxP = cmin, cmax
			}
			d.minP, d.maxP = min(d.minP, cmin), max(d.maxP, cmax)
		}
		d.rows += crows
	}
	if v.full() {
		return false
	}
	if !d.coldDone && v.cold != nil {
		v.note("the index was compared with the hot rows only: the cold file did not decode")
	}
	return true
}

// checkIndexAgainstRows compares every index entry with what the rows of
// both tiers said about its series. False when the findings are full.
func (d *deepPass) checkIndexAgainstRows() bool {
	v := d.v
	v.ran()
	for c := 0; c < d.n; c++ {
		e := d.x.Entry(c)
		hot := &d.st[c]
		var cs coldSeen
		if d.cold != nil {
			cs = d.cold[c]
		}
		hotless := v.cold != nil && e.RowCount == 0 && (cs.seen || !d.coldDone)
		if !hot.seen && !hotless {
			where := "the data file"
			if v.cold != nil {
				where = "either tier"
			}
			if !v.add(CheckIndex, d.index, v.seriesLoc(c), "series has no rows in %s (index says %d rows at row %d)", where, e.RowCount, e.RowOffset) {
				return false
			}
			continue
		}
		if !hot.seen && !d.coldDone {
			continue // nothing to compare it with
		}
		if diffs := d.entryDiffs(c, e, hot, cs); len(diffs) > 0 {
			if !v.add(CheckIndex, d.index, v.seriesLoc(c), "index disagrees with the data: %s", strings.Join(diffs, ", ")) {
				return false
			}
		}
	}
	return true
}

// entryDiffs lists where index entry c differs from its series' hot rows
// (hot) and cold rows (cs): location, bounds, latest period and value.
func (d *deepPass) entryDiffs(c int, e index.Entry, hot *seriesSeen, cs coldSeen) []string {
	var diffs []string
	diff := func(name string, idx, data any) {
		if idx == data {
			return // the same type and value: nothing to format
		}
		if fmt.Sprint(idx) != fmt.Sprint(data) {
			diffs = append(diffs, fmt.Sprintf("%s %v (data: %v)", name, idx, data))
		}
	}
	first, last := hot.first, hot.last
	if !hot.seen {
		// Every row cold: the hot location is the empty one.
		first, last = cs.first, cs.last
		hot = &seriesSeen{latestBatch: -1}
	}
	if cs.seen {
		first = cs.first
		if hot.seen && cs.last >= hot.first {
			diffs = append(diffs, fmt.Sprintf("cold rows end at %s, not before the first hot period %s", period.Format(cs.last), period.Format(hot.first)))
		}
	}
	diff(index.ColRowOffset, e.RowOffset, hot.rowOffset)
	diff(index.ColRowCount, e.RowCount, hot.rowCount)
	diff(index.ColBatch, e.Batch, hot.batch)
	diff(index.ColBatchOffset, e.BatchOffset, hot.batchOffset)
	if d.coldDone && e.FirstPeriod != first {
		diff(index.ColFirstPeriod, period.Format(e.FirstPeriod), period.Format(first))
	}
	if (hot.seen || d.coldDone) && e.LastPeriod != last {
		diff(index.ColLastPeriod, period.Format(e.LastPeriod), period.Format(last))
	}
	return append(diffs, d.latestDiffs(c, hot, cs)...)
}

// latestDiffs compares index entry c's latest period and value with the
// series' last non-null row: hot if it has one, else cold.
func (d *deepPass) latestDiffs(c int, hot *seriesSeen, cs coldSeen) []string {
	var diffs []string
	latestVals := d.x.LatestValues()
	lp, lok := d.x.Latest(c)
	switch {
	case hot.latestBatch >= 0:
		lrec := d.s.Batch(hot.latestBatch)
		dp := int32(lrec.Column(datafile.ColumnPeriod).(*array.Date32).Value(hot.latestRow))
		dv := lrec.Column(datafile.ColumnValue)
		if !lok || lp != dp {
			diffs = append(diffs, fmt.Sprintf("latest_period %s (data: %s)", fmtLatestPeriod(lp, lok), period.Format(dp)))
		}
		if !latestVals.IsValid(c) || slot(latestVals, c) != slot(dv, hot.latestRow) {
			diffs = append(diffs, fmt.Sprintf("latest_value %s (data: %s)", valueString(latestVals, c), valueString(dv, hot.latestRow)))
		}
	case !d.coldDone:
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
	return diffs
}

// checkStats compares the manifest's statistics with the rows of both
// tiers; skipped when the cold rows were not all read.
func (d *deepPass) checkStats() {
	v := d.v
	v.ran()
	ms := v.m.Stats
	if !d.coldDone {
		return // the row count and bounds of the cold rows are unknown
	}
	if d.rows != ms.Rows {
		v.add(CheckStats, v.r.Manifest, "stats.rows", "stats.rows %d, the data holds %d (both tiers)", ms.Rows, d.rows)
	}
	if int64(d.n) != ms.Series {
		v.add(CheckStats, v.r.Manifest, "stats.series", "stats.series %d, the index holds %d", ms.Series, d.n)
	}
	var first, last string
	if d.rows > 0 {
		first, last = period.Format(d.minP), period.Format(d.maxP)
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
