package verify

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/verify/arrowcheck"
	"github.com/energyscope/servingsnap/pkg/vortexio"
)

// The cold tier (cold.vortex, docs/FORMAT.md §9) of a tiered snapshot
// (manifest format_version 3). snapshot.Open with VerifyData already
// proves the file's checksum, its Vortex trailer, footer and layout, its
// schema and its row count against the manifest; what it does not check,
// because a server reads one series' cold rows at a time and trusts the
// index to say where, is checked here: fast, the layout's chunks and the
// index's tier columns on their own (they tile the file in code order,
// are in bounds, and end before each series' first hot row); deep, every
// cold row decoded one chunk at a time against the index.

// maxColdWindow bounds the rows decoded at once by the deep and against
// passes (the writer's chunks are at most 65536 rows; a window never
// spans more than two of them), so memory does not grow with the file.
const maxColdWindow = 65536

// coldTier is the open cold file of the snapshot being verified.
type coldTier struct {
	file    manifest.File
	vf      *vortexio.File
	windows []int64 // decode windows: chunk starts, and NumRows last
	allCold bool    // build.format vortex: no hot rows at all
}

// close closes the cold file, if open.
func (c *coldTier) close() {
	if c != nil && c.vf != nil {
		c.vf.Close()
	}
}

// checkCold makes the fast checks of a tiered snapshot's cold tier. It
// leaves v.cold nil when the cold file cannot be opened for reading chunk
// by chunk (deep and against then skip, with a note).
func (v *verifier) checkCold() {
	cf, ok := v.m.FileByRole(manifest.RoleCold)
	if !ok || !v.snap.Tiered() {
		return
	}
	v.at = cf.Path
	defer func() { v.at = "" }()
	v.ran()
	vf, err := vortexio.OpenFile(v.ds.Path(cf.Path))
	if err != nil {
		v.add(CheckCold, cf.Path, "", "cannot open the Vortex file: %v", unwrapPath(err))
		return
	}
	ct := &coldTier{file: cf, vf: vf, allCold: v.m.Build.DataFormat == coldfile.FormatVortex}
	v.cold = ct
	bounds, err := chunkBounds(vf)
	v.r.ColdChunks = len(bounds) - 1
	if err != nil {
		v.add(CheckCold, cf.Path, "layout", "%v", err)
	} else if got := len(bounds) - 1; got != cf.Batches {
		v.add(CheckCold, cf.Path, "layout", "%d chunks, manifest says %d", got, cf.Batches)
	}
	ct.windows = windows(bounds, vf.NumRows())

	v.checkTierColumns(ct)
}

// checkTierColumns checks the index's tier columns on their own and
// against the first hot row of each series (one period read per series,
// from the mapped data file).
func (v *verifier) checkTierColumns(ct *coldTier) {
	v.ran()
	s := v.snap
	x := s.Index()
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	fileRows := ct.vf.NumRows()
	var end int64 // where the next series' cold rows must start
	for i := 0; i < x.Len(); i++ {
		e := x.Entry(i)
		c := e.Cold
		loc := v.seriesLoc(i)
		bad := func(col, format string, a ...any) bool {
			return v.add(CheckCold, xf.Path, loc+" column "+col, format, a...)
		}
		switch {
		case c.Rows < 0:
			if !bad(index.ColColdRows, "cold_rows %d < 0", c.Rows) {
				return
			}
			continue
		case c.Start != end:
			if !bad(index.ColColdStart, "cold_start %d, the previous series' cold rows end at %d: cold rows must tile %s in series order", c.Start, end, ct.file.Path) {
				return
			}
		}
		if c.Start < 0 || c.Start > fileRows || c.Rows > fileRows-c.Start {
			if !bad(index.ColColdRows, "cold rows [%d,%d) outside %s's %d rows", c.Start, c.Start+c.Rows, ct.file.Path, fileRows) {
				return
			}
		}
		end = c.Start + c.Rows
		ok := true
		switch {
		case c.Rows == 0:
			if c.FirstPeriod != 0 || c.LastPeriod != 0 {
				ok = bad(index.ColColdFirstPeriod, "no cold rows but cold periods %s..%s (want both 0)", period.Format(c.FirstPeriod), period.Format(c.LastPeriod))
			}
			if ct.allCold && ok {
				ok = bad(index.ColColdRows, "no cold rows in a snapshot whose rows are all cold (build.format %q): the series has no rows", coldfile.FormatVortex)
			}
		case c.FirstPeriod > c.LastPeriod:
			ok = bad(index.ColColdFirstPeriod, "cold_first_period %s after cold_last_period %s", period.Format(c.FirstPeriod), period.Format(c.LastPeriod))
		case int64(c.LastPeriod)-int64(c.FirstPeriod) < c.Rows-1:
			ok = bad(index.ColColdRows, "%d cold rows cannot fit strictly increasing periods %s..%s", c.Rows, period.Format(c.FirstPeriod), period.Format(c.LastPeriod))
		case e.FirstPeriod != c.FirstPeriod:
			ok = v.add(CheckCold, xf.Path, loc+" column "+index.ColFirstPeriod, "first_period %s, but the series' first (cold) row is at cold_first_period %s", period.Format(e.FirstPeriod), period.Format(c.FirstPeriod))
		}
		if !ok {
			return
		}
		switch {
		case e.RowCount == 0 && !ct.allCold:
			ok = v.add(CheckCold, xf.Path, loc+" column "+index.ColRowCount, "row_count 0: only a snapshot whose rows are all cold (build.format %q) has series without hot rows", coldfile.FormatVortex)
		case e.RowCount != 0 && ct.allCold:
			ok = v.add(CheckCold, xf.Path, loc+" column "+index.ColRowCount, "row_count %d in a snapshot whose rows are all cold (build.format %q)", e.RowCount, coldfile.FormatVortex)
		case e.RowCount == 0 && c.Rows > 0 && e.LastPeriod != c.LastPeriod:
			ok = v.add(CheckCold, xf.Path, loc+" column "+index.ColLastPeriod, "last_period %s, but the series' rows are all cold and end at cold_last_period %s", period.Format(e.LastPeriod), period.Format(c.LastPeriod))
		case e.RowCount > 0 && c.Rows > 0:
			if hot, found := v.firstHotPeriod(e); found && c.LastPeriod >= hot {
				df, _ := v.m.FileByRole(manifest.RoleData)
				ok = bad(index.ColColdLastPeriod, "cold_last_period %s is not before the series' first hot period %s (%s %s)", period.Format(c.LastPeriod), period.Format(hot), df.Path, rowLoc(e.Batch, e.BatchOffset, v.snap.BatchStart(e.Batch)))
			} else if c.LastPeriod >= e.LastPeriod {
				ok = bad(index.ColColdLastPeriod, "cold_last_period %s is not before last_period %s (the series has hot rows)", period.Format(c.LastPeriod), period.Format(e.LastPeriod))
			}
		}
		if !ok {
			return
		}
	}
	if end != fileRows {
		v.add(CheckCold, xf.Path, "column "+index.ColColdRows, "the series' cold rows end at row %d, %s holds %d", end, ct.file.Path, fileRows)
	}
}

// firstHotPeriod is the period of series e's first hot row, when its
// location lies inside the data (deep reports it when it does not).
func (v *verifier) firstHotPeriod(e index.Entry) (int32, bool) {
	s := v.snap
	if e.Batch < 0 || e.Batch >= s.NumBatches() || e.RowCount <= 0 {
		return 0, false
	}
	ps := s.Periods(e.Batch)
	if e.BatchOffset < 0 || e.BatchOffset >= len(ps) {
		return 0, false
	}
	return int32(ps[e.BatchOffset]), true
}

// chunkBounds returns the row where each chunk of the file starts, and
// its row count last, after checking that every column is cut at the same
// rows (the writer cuts them together, so that one series' rows are one
// chunk of every column).
func chunkBounds(vf *vortexio.File) ([]int64, error) {
	root := vf.Root()
	var cols []*vortexio.Layout
	var names []string
	if root.ID == "vortex.struct" {
		cols = root.Children
		names = root.DType.Names
		if root.DType.Nullable && len(cols) > 0 {
			cols = cols[1:]
		}
	} else {
		cols = []*vortexio.Layout{root}
	}
	var first []int64
	for k, l := range cols {
		for (l.ID == "vortex.zoned" || l.ID == "vortex.stats") && len(l.Children) > 0 {
			l = l.Children[0]
		}
		b := []int64{0}
		if l.ID == "vortex.chunked" {
			var r int64
			for _, c := range l.Children {
				if c.RowCount == 0 {
					continue
				}
				r += int64(c.RowCount)
				b = append(b, r)
			}
		} else if l.RowCount > 0 {
			b = append(b, int64(l.RowCount))
		}
		if k == 0 {
			first = b
			continue
		}
		if !equalInts(b, first) {
			name := fmt.Sprint(k)
			if k < len(names) {
				name = fmt.Sprintf("%q", names[k])
			}
			return first, fmt.Errorf("column %s is chunked at other rows than the first column (%d chunks, %d)", name, len(b)-1, len(first)-1)
		}
	}
	if first == nil {
		first = []int64{0}
	}
	return first, nil
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// windows turns chunk bounds into decode windows of at most
// maxColdWindow rows ending at n.
func windows(bounds []int64, n int64) []int64 {
	out := []int64{0}
	add := func(end int64) {
		for last := out[len(out)-1]; end-last > maxColdWindow; last = out[len(out)-1] {
			out = append(out, last+maxColdWindow)
		}
		if end > out[len(out)-1] {
			out = append(out, end)
		}
	}
	for _, b := range bounds[1:] {
		if b > out[len(out)-1] && b <= n {
			add(b)
		}
	}
	add(n)
	return out
}

// eachColdWindow decodes the cold file one window at a time and calls fn
// with each batch and the file row of its first row, until fn returns
// false. A batch that does not decode, or whose buffers or key column
// types are not the data schema's, is a finding and ends the pass
// (returned false).
func (v *verifier) eachColdWindow(fn func(rec arrow.RecordBatch, start int64) bool) bool {
	ct := v.cold
	v.at = ct.file.Path
	defer func() { v.at = "" }()
	for k := 0; k+1 < len(ct.windows); k++ {
		a, b := ct.windows[k], ct.windows[k+1]
		rec, err := ct.vf.ReadRange(nil, a, b)
		if err != nil {
			v.add(CheckCold, ct.file.Path, fmt.Sprintf("rows [%d,%d)", a, b), "cannot decode: %v", err)
			return false
		}
		if err := arrowcheck.Record(rec); err != nil {
			rec.Release()
			v.add(CheckStructure, ct.file.Path, fmt.Sprintf("rows [%d,%d)", a, b), "decoded rows: %v", err)
			return false
		}
		_, ok1 := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32)
		_, ok2 := rec.Column(datafile.ColumnPeriod).(*array.Date32)
		if !ok1 || !ok2 || rec.NumRows() != b-a {
			rec.Release()
			v.add(CheckCold, ct.file.Path, fmt.Sprintf("rows [%d,%d)", a, b), "decoded %d rows of %s, want %d rows of the data schema", rec.NumRows(), rec.Schema(), b-a)
			return false
		}
		more := fn(rec, a)
		rec.Release()
		if !more {
			return false
		}
	}
	return true
}

// coldSeen is what the cold file says about one series.
type coldSeen struct {
	seen        bool
	start, rows int64
	first, last int32
	// The last non-null value among the series' cold rows.
	latestOK   bool
	latestP    int32
	latestSlot string // slot(): raw bytes, for an exact comparison
	latestText string
}

// deepCold reads every cold row once: the rows are series runs in code
// order, one run per series, periods strictly increasing; and each
// series' run is where the index's tier columns say. It returns what it
// saw per series (nil when the pass did not finish), the rows read and
// their period bounds.
func (v *verifier) deepCold(n int) (st []coldSeen, rows int64, minP, maxP int32) {
	ct := v.cold
	x := v.snap.Index()
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	path := ct.file.Path
	v.ran()
	st = make([]coldSeen, n)
	var (
		have       bool
		prev       uint32
		prevP      int32
		bad        int
		badLoc     string
		badMsg     string
		pendingRow = -1 // last valid value row of the current run in the current batch
	)
	flush := func() bool {
		ok := true
		if bad > 0 {
			msg := badMsg
			if bad > 1 {
				msg += fmt.Sprintf(" (%d rows of this series out of order or repeated)", bad)
			}
			ok = v.add(CheckSort, path, badLoc, "%s", msg)
		}
		bad = 0
		return ok
	}
	finished := v.eachColdWindow(func(rec arrow.RecordBatch, start int64) bool {
		codes := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32).Uint32Values()
		periods := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
		vals := rec.Column(datafile.ColumnValue)
		settle := func() { // record the current run's latest value from this batch
			if pendingRow >= 0 && have && int(prev) < n {
				e := &st[prev]
				e.latestOK, e.latestP = true, int32(periods[pendingRow])
				e.latestSlot, e.latestText = slot(vals, pendingRow), valueString(vals, pendingRow)
			}
			pendingRow = -1
		}
		for i, c := range codes {
			p := int32(periods[i])
			if rows == 0 {
				minP, maxP = p, p
			}
			minP, maxP = min(minP, p), max(maxP, p)
			rows++
			g := start + int64(i)
			if !have || c != prev {
				settle()
				if !flush() {
					return false
				}
				loc := fmt.Sprintf("row %d", g)
				switch {
				case int(c) >= n:
					if !v.add(CheckSeriesCode, path, loc, "series_code %d is out of range: the index has %d series", c, n) {
						return false
					}
				case st[c].seen:
					if !v.add(CheckSeriesCode, path, loc, "series %q (code %d) starts again here; its cold rows began at row %d: a series' cold rows must be one contiguous run", x.SeriesID(int(c)), c, st[c].start) {
						return false
					}
				default:
					st[c] = coldSeen{seen: true, start: g, first: p}
				}
				if have && c < prev && int(prev) < n && int(c) < n {
					if !v.add(CheckSort, path, loc, "series %q (code %d) follows series %q (code %d): cold rows must be in series order", x.SeriesID(int(c)), c, x.SeriesID(int(prev)), prev) {
						return false
					}
				}
			} else if p <= prevP {
				bad++
				if bad == 1 {
					badLoc = fmt.Sprintf("row %d", g)
					badMsg = periodOrderMsg(p, prevP, c)
				}
			}
			if int(c) < n {
				e := &st[c]
				e.rows++
				e.last = p
				if vals.IsValid(i) {
					pendingRow = i
				}
			}
			prev, prevP, have = c, p, true
		}
		settle()
		return true
	})
	if !finished || !flush() {
		return nil, rows, minP, maxP
	}

	// The tier columns against what the cold file says.
	for c := 0; c < n; c++ {
		e := x.Cold(c)
		d := st[c]
		if !d.seen {
			if e.Rows != 0 {
				if !v.add(CheckCold, xf.Path, v.seriesLoc(c), "index says %d cold rows at row %d; %s holds none of the series", e.Rows, e.Start, path) {
					return nil, rows, minP, maxP
				}
			}
			continue
		}
		got := index.Cold{Start: d.start, Rows: d.rows, FirstPeriod: d.first, LastPeriod: d.last}
		if got != e {
			if !v.add(CheckCold, xf.Path, v.seriesLoc(c), "index disagrees with %s: cold_start %d cold_rows %d cold_first_period %s cold_last_period %s (cold file: %d, %d, %s, %s)", path,
				e.Start, e.Rows, fmtColdPeriod(e.FirstPeriod, e.Rows), fmtColdPeriod(e.LastPeriod, e.Rows),
				got.Start, got.Rows, period.Format(got.FirstPeriod), period.Format(got.LastPeriod)) {
				return nil, rows, minP, maxP
			}
		}
	}
	return st, rows, minP, maxP
}

func fmtColdPeriod(p int32, rows int64) string {
	if rows == 0 {
		return "0"
	}
	return period.Format(p)
}
