package inspect

import (
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// Kinds of SeriesDiff.Change.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// DiffSide describes one of the two snapshots compared.
type DiffSide struct {
	SnapshotID uint64 `json:"snapshot_id"`
	Created    string `json:"created"`
	Current    bool   `json:"current"`
	Rows       int64  `json:"rows"`
	Series     int64  `json:"series"`
}

// SeriesDiff is one series that differs between snapshot A and B. Rows of
// the two are matched by period: a period only in B is an added row, only
// in A a removed row, in both with a different value a changed row. A
// series only in B has all its rows added; only in A, all removed.
type SeriesDiff struct {
	SeriesID    string `json:"series_id"`
	Change      string `json:"change"` // added, removed or changed
	RowsA       int64  `json:"rows_a"`
	RowsB       int64  `json:"rows_b"`
	RowsAdded   int64  `json:"rows_added"`
	RowsRemoved int64  `json:"rows_removed"`
	RowsChanged int64  `json:"rows_changed"`
}

// DiffTotals sum a diff. RowsNet = B.Rows - A.Rows = RowsAdded -
// RowsRemoved; SeriesNet = B.Series - A.Series = SeriesAdded -
// SeriesRemoved.
type DiffTotals struct {
	SeriesAdded     int64 `json:"series_added"`
	SeriesRemoved   int64 `json:"series_removed"`
	SeriesChanged   int64 `json:"series_changed"`
	SeriesUnchanged int64 `json:"series_unchanged"`
	SeriesNet       int64 `json:"series_net"`
	RowsAdded       int64 `json:"rows_added"`
	RowsRemoved     int64 `json:"rows_removed"`
	RowsChanged     int64 `json:"rows_changed"`
	RowsNet         int64 `json:"rows_net"`
}

// Differ reports whether the two snapshots differ in any series or
// (period, value) row.
func (t DiffTotals) Differ() bool { return t.SeriesAdded+t.SeriesRemoved+t.SeriesChanged > 0 }

// DiffReport is the JSON document of `snapinspect diff A B --json`.
type DiffReport struct {
	Dataset string       `json:"dataset"`
	A       DiffSide     `json:"a"`
	B       DiffSide     `json:"b"`
	Totals  DiffTotals   `json:"totals"`
	Stat    bool         `json:"stat"`   // --stat: totals only, series is empty
	Series  []SeriesDiff `json:"series"` // sorted by series_id
}

// Side describes s for a diff.
func Side(s *snapshot.Snapshot) DiffSide {
	m := s.Manifest
	return DiffSide{
		SnapshotID: m.SnapshotID,
		Created:    m.Created,
		Current:    currentID(s.Dataset) == m.SnapshotID,
		Rows:       m.Stats.Rows,
		Series:     m.Stats.Series,
	}
}

// Diff compares snapshot a with b, calling visit for every series that
// differs, in series_id order. It merges the two sorted indexes and
// compares each common series' row slices in place: memory stays
// independent of the number of series and rows. Only period and value are
// compared; other data columns and attributes are not.
func Diff(a, b *snapshot.Snapshot, visit func(SeriesDiff) error) (DiffTotals, error) {
	var t DiffTotals
	xa, xb := a.Index(), b.Index()
	na, nb := xa.Len(), xb.Len()
	emit := func(d SeriesDiff) error {
		switch d.Change {
		case Added:
			t.SeriesAdded++
		case Removed:
			t.SeriesRemoved++
		default:
			t.SeriesChanged++
		}
		t.RowsAdded += d.RowsAdded
		t.RowsRemoved += d.RowsRemoved
		t.RowsChanged += d.RowsChanged
		return visit(d)
	}
	ra, err := query.FromSnapshot(a.Dataset.Name, a)
	if err != nil {
		return t, err
	}
	rb, err := query.FromSnapshot(b.Dataset.Name, b)
	if err != nil {
		return t, err
	}
	safeA, safeB := newPieceChecker(a), newPieceChecker(b)
	i, j := 0, 0
	for i < na || j < nb {
		var d SeriesDiff
		switch {
		case j >= nb || (i < na && xa.SeriesID(i) < xb.SeriesID(j)):
			e := xa.Entry(i)
			n := seriesRowCount(e)
			d = SeriesDiff{SeriesID: e.SeriesID, Change: Removed, RowsA: n, RowsRemoved: n}
			i++
		case i >= na || xb.SeriesID(j) < xa.SeriesID(i):
			e := xb.Entry(j)
			n := seriesRowCount(e)
			d = SeriesDiff{SeriesID: e.SeriesID, Change: Added, RowsB: n, RowsAdded: n}
			j++
		default:
			var err error
			d, err = compareSeries(ra, safeA, i, rb, safeB, j)
			if err != nil {
				return t, err
			}
			i++
			j++
			if d.Change == "" {
				t.SeriesUnchanged++
				continue
			}
		}
		if err := emit(d); err != nil {
			return t, err
		}
	}
	t.SeriesNet = int64(nb) - int64(na)
	t.RowsNet = t.RowsAdded - t.RowsRemoved
	return t, nil
}

// compareSeries merges the period-sorted rows of series ca of a and cb of
// b, both tiers of each (query.SnapshotReader.Rows). Change is "" when
// they hold the same (period, value) pairs.
func compareSeries(a *query.SnapshotReader, safeA *pieceChecker, ca int, b *query.SnapshotReader, safeB *pieceChecker, cb int) (SeriesDiff, error) {
	ra, err := allRows(a, safeA, ca)
	if err != nil {
		return SeriesDiff{}, err
	}
	defer ra.Release()
	rb, err := allRows(b, safeB, cb)
	if err != nil {
		return SeriesDiff{}, err
	}
	defer rb.Release()
	d := SeriesDiff{SeriesID: a.SeriesID(ca), RowsA: ra.NumRows(), RowsB: rb.NumRows()}
	pa := ra.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
	pb := rb.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
	eq := valuesEqual(ra.Column(datafile.ColumnValue), rb.Column(datafile.ColumnValue))
	i, j := 0, 0
	for i < len(pa) && j < len(pb) {
		switch {
		case pa[i] < pb[j]:
			d.RowsRemoved++
			i++
		case pa[i] > pb[j]:
			d.RowsAdded++
			j++
		default:
			if !eq(i, j) {
				d.RowsChanged++
			}
			i++
			j++
		}
	}
	d.RowsRemoved += int64(len(pa) - i)
	d.RowsAdded += int64(len(pb) - j)
	if d.RowsAdded+d.RowsRemoved+d.RowsChanged > 0 {
		d.Change = Changed
	}
	return d, nil
}

// valuesEqual compares row i of va with row j of vb: nulls equal nulls,
// NaN equals NaN. float64 (the usual value type) is compared directly;
// anything else, or two different types, through the rendered value.
func valuesEqual(va, vb arrow.Array) func(i, j int) bool {
	if fa, ok := va.(*array.Float64); ok {
		if fb, ok := vb.(*array.Float64); ok {
			xa, xb := fa.Float64Values(), fb.Float64Values()
			return func(i, j int) bool {
				na, nb := fa.IsNull(i), fb.IsNull(j)
				if na || nb {
					return na == nb
				}
				x, y := xa[i], xb[j]
				return x == y || (x != x && y != y)
			}
		}
	}
	return func(i, j int) bool {
		x, y := CellOf(va, i), CellOf(vb, j)
		return x.Null == y.Null && x.Text == y.Text
	}
}

// CollectDiff runs Diff and gathers the differing series for JSON; with
// stat, only the totals.
func CollectDiff(a, b *snapshot.Snapshot, stat bool) (*DiffReport, error) {
	r := &DiffReport{Dataset: a.Dataset.Name, A: Side(a), B: Side(b), Stat: stat, Series: []SeriesDiff{}}
	t, err := Diff(a, b, func(d SeriesDiff) error {
		if !stat {
			r.Series = append(r.Series, d)
		}
		return nil
	})
	r.Totals = t
	return r, err
}

// WriteDiffText renders the diff of a and b for a terminal: the two sides
// and the totals first, then (unless stat) a line per differing series.
// Totals first cost a second merge of the two indexes, so that the series
// lines still stream as the merge finds them and memory stays independent
// of the number of differences (column widths come from a pass over both
// indexes' ids and row counts, not from the diff).
func WriteDiffText(w io.Writer, a, b *snapshot.Snapshot, stat bool) (DiffTotals, error) {
	sa, sb := Side(a), Side(b)
	t, err := Diff(a, b, func(SeriesDiff) error { return nil })
	if err != nil {
		return t, err
	}
	fmt.Fprintf(w, "diff of %s\n", a.Dataset.Name)
	side := func(name string, s DiffSide) {
		cur := ""
		if s.Current {
			cur = "  (CURRENT)"
		}
		fmt.Fprintf(w, "  %s  snapshot %d  created %s  %s rows in %s series%s\n", name, s.SnapshotID, s.Created, Commas(s.Rows), Commas(s.Series), cur)
	}
	side("a", sa)
	side("b", sb)
	fmt.Fprintf(w, "\ntotals\n")
	tt := newTable("", "a", "b", "net").alignRight(1, 2, 3)
	tt.add("rows", Commas(sa.Rows), Commas(sb.Rows), signed(sb.Rows-sa.Rows))
	tt.add("series", Commas(sa.Series), Commas(sb.Series), signed(sb.Series-sa.Series))
	tt.write(w, "  ")
	fmt.Fprintf(w, "  series: %s added, %s removed, %s changed, %s unchanged\n",
		Commas(t.SeriesAdded), Commas(t.SeriesRemoved), Commas(t.SeriesChanged), Commas(t.SeriesUnchanged))
	_, err = fmt.Fprintf(w, "  rows:   %s added, %s removed, %s changed\n",
		Commas(t.RowsAdded), Commas(t.RowsRemoved), Commas(t.RowsChanged))
	if err != nil || stat {
		return t, err
	}
	if !t.Differ() {
		_, err = fmt.Fprintf(w, "\n  no differences in series or (period, value) rows\n")
		return t, err
	}

	head := []string{"series_id", "change", "rows_a", "rows_b", "rows_added", "rows_removed", "rows_changed"}
	right := []bool{false, false, true, true, true, true, true}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len(h)
	}
	width[1] = len(Changed)
	var maxRows int64
	for _, x := range []*snapshot.Snapshot{a, b} {
		ix := x.Index()
		for c := 0; c < ix.Len(); c++ {
			width[0] = max(width[0], utf8.RuneCountInString(ix.SeriesID(c)))
			maxRows = max(maxRows, seriesRowCount(ix.Entry(c)))
		}
	}
	for i := 2; i < len(width); i++ {
		width[i] = max(width[i], len(Commas(maxRows)))
	}
	io.WriteString(w, "\n")
	io.WriteString(w, formatLine("  ", head, width, right))
	_, err = Diff(a, b, func(d SeriesDiff) error {
		_, err := io.WriteString(w, formatLine("  ", []string{d.SeriesID, d.Change,
			Commas(d.RowsA), Commas(d.RowsB), Commas(d.RowsAdded), Commas(d.RowsRemoved), Commas(d.RowsChanged)}, width, right))
		return err
	})
	return t, err
}

// WriteJSON renders the report as indented JSON.
func (r *DiffReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// seriesRowCount is a series' rows in both tiers.
func seriesRowCount(e index.Entry) int64 { return e.RowCount + e.Cold.Rows }

// allRows returns every row of series code, both tiers, as one batch (the
// hot slice alone, not copied, when the series has no cold rows; the two
// pieces concatenated when it has: one series' rows). The caller releases
// it.
func allRows(r *query.SnapshotReader, safe *pieceChecker, code int) (arrow.RecordBatch, error) {
	pieces, err := r.Rows(code, query.AllPeriods, nil)
	if err != nil {
		return nil, err
	}
	for _, p := range pieces {
		if err := safe.check(p.Rec); err != nil {
			return nil, err
		}
	}
	switch len(pieces) {
	case 0:
		sc := r.Snapshot().Schema()
		cols := make([]arrow.Array, sc.NumFields())
		for i, f := range sc.Fields() {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
			defer cols[i].Release()
		}
		return array.NewRecordBatch(sc, cols, 0), nil
	case 1:
		return pieces[0].Rec.NewSlice(pieces[0].Lo, pieces[0].Hi), nil
	}
	sc := pieces[0].Rec.Schema()
	cols := make([]arrow.Array, sc.NumFields())
	var n int64
	for _, p := range pieces {
		n += p.Len()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(pieces))
		for k, p := range pieces {
			parts[k] = array.NewSlice(p.Rec.Column(i), p.Lo, p.Hi)
			defer parts[k].Release()
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("series %q: joining its cold and hot rows: %w", r.SeriesID(code), err)
		}
		cols[i] = c
		defer c.Release()
	}
	return array.NewRecordBatch(sc, cols, n), nil
}
