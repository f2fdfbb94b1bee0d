package datafile

import (
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/period"
)

// Location is where one series' rows are in the data file: what the index
// sidecar records for it, as the data writer saw it.
type Location struct {
	Batch       uint32 // the record batch holding the series
	BatchOffset uint32 // the series' first row inside that batch
	RowOffset   int64  // the series' first row over the whole file
	RowCount    int64
	FirstPeriod int32
	LastPeriod  int32
}

// Writer streams a data file: record batches already sorted and cut at
// series boundaries go in, one Write each, in file order. Every batch is
// checked against the format's invariants before it is written (one pass
// over its series_code and period columns), so a bug upstream (a builder,
// a compaction merging a base with a delta, an external sort) fails the
// write instead of publishing a file that readers would misread. The
// writer records each series' Location for the index.
//
// Nothing is visible until Close returns: on any error call Abort, which
// removes the partial file.
type Writer struct {
	path    string
	schema  *arrow.Schema
	f       *arrowfile.Writer
	locs    []Location // of the series since the last TakeLocations
	taken   int        // series whose locations TakeLocations handed out
	rows    int64
	batches int
	err     error // the first failure; the file is never published after one
	closed  bool
}

// Create starts a data file at path (which must not exist). schema must
// be a data file schema (Schema builds one): CheckSchema refuses anything
// else, dictionary-encoded columns included, since the file is mapped.
func Create(path string, schema *arrow.Schema) (*Writer, error) {
	if err := CheckSchema(schema); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	for _, i := range []int{ColumnSeriesCode, ColumnPeriod} {
		if f := schema.Field(i); f.Nullable {
			return nil, fmt.Errorf("create %s: column %s is nullable; key columns never hold nulls", path, f.Name)
		}
	}
	f, err := arrowfile.Create(path, schema)
	if err != nil {
		return nil, err
	}
	return &Writer{path: path, schema: schema, f: f}, nil
}

// Write checks rec and appends it as the next record batch. The checks,
// and why each exists:
//
//   - rec has the writer's schema: readers take columns by position and type.
//   - rec is not empty: an empty batch has no series, and the index's
//     batch column could not point at it.
//   - series_code and period hold no nulls: a null code belongs to no
//     series, a null period cannot be searched for.
//   - series codes start at the next code and step by 0 or 1: codes are
//     the index row numbers, dense from 0 in index (series id) order, so a
//     gap or a step back means rows of a series are missing or misplaced.
//   - a batch starts with a new series: a series never straddles two
//     batches, so that a query is one slice of one mapped batch.
//   - periods strictly increase within a series: a query binary-searches
//     the period range, and (series, period) is the key, so a repeat is a
//     duplicate row.
//
// (Create has refused dictionary-encoded columns, which arrow-go's mapped
// reader cannot open, and nullable key columns; the schema check carries
// both over to every batch.)
//
// A violation is an error naming the batch, the row inside it and the
// values; the writer then refuses further writes and Close, and Abort
// removes the file. rec is not retained.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return fmt.Errorf("write %s: an earlier write failed: %w", w.path, w.err)
	}
	if w.closed {
		return fmt.Errorf("write %s: the writer is closed", w.path)
	}
	nlocs := len(w.locs)
	if err := w.check(rec); err != nil {
		w.locs = w.locs[:nlocs]
		w.err = fmt.Errorf("data file %s: %w", w.path, err)
		return w.err
	}
	if err := w.f.Write(rec); err != nil {
		w.locs = w.locs[:nlocs]
		w.err = err
		return err
	}
	w.rows += rec.NumRows()
	w.batches++
	return nil
}

// check runs Write's checks on rec, the next batch, and appends the
// Locations of its series.
func (w *Writer) check(rec arrow.RecordBatch) error {
	b := w.batches
	if !rec.Schema().Equal(w.schema) {
		return fmt.Errorf("batch %d: schema %s differs from the file's %s", b, rec.Schema(), w.schema)
	}
	n := int(rec.NumRows())
	if n == 0 {
		return fmt.Errorf("batch %d is empty", b)
	}
	if b >= math.MaxUint32 || n > math.MaxUint32 {
		return fmt.Errorf("batch %d: %d rows; batch numbers and offsets must fit uint32", b, n)
	}
	codeCol, periodCol := rec.Column(ColumnSeriesCode), rec.Column(ColumnPeriod)
	if err := noNulls(b, codeCol, ColSeriesCode); err != nil {
		return err
	}
	if err := noNulls(b, periodCol, ColPeriod); err != nil {
		return err
	}
	codes := codeCol.(*array.Uint32).Uint32Values()
	periods := periodCol.(*array.Date32).Date32Values()

	next := uint32(w.taken + len(w.locs))
	if c := codes[0]; c != next {
		if next > 0 && c == next-1 {
			return fmt.Errorf("batch %d row 0: series_code %d continues from batch %d; a series never straddles two batches", b, c, b-1)
		}
		return fmt.Errorf("batch %d row 0: series_code %d, want %d (codes are dense index rows, in order)", b, c, next)
	}
	start := 0
	for i := 1; i < n; i++ {
		prev, c := codes[i-1], codes[i]
		switch {
		case c == prev:
			if periods[i] <= periods[i-1] {
				return fmt.Errorf("batch %d row %d: series_code %d period %s is not after %s; periods must strictly increase within a series",
					b, i, c, period.Format(int32(periods[i])), period.Format(int32(periods[i-1])))
			}
			continue
		case c == prev+1:
		case c < prev:
			return fmt.Errorf("batch %d row %d: series_code %d after %d; codes must not decrease", b, i, c, prev)
		default:
			return fmt.Errorf("batch %d row %d: series_code %d after %d skips codes (codes are dense index rows)", b, i, c, prev)
		}
		w.appendLocation(b, start, i, periods)
		start = i
	}
	w.appendLocation(b, start, n, periods)
	return nil
}

// appendLocation records the series at rows [lo, hi) of batch b.
func (w *Writer) appendLocation(b, lo, hi int, periods []arrow.Date32) {
	w.locs = append(w.locs, Location{
		Batch:       uint32(b),
		BatchOffset: uint32(lo),
		RowOffset:   w.rows + int64(lo),
		RowCount:    int64(hi - lo),
		FirstPeriod: int32(periods[lo]),
		LastPeriod:  int32(periods[hi-1]),
	})
}

// noNulls names the first null row of a key column, if any.
func noNulls(b int, a arrow.Array, name string) error {
	if a.NullN() == 0 {
		return nil
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			return fmt.Errorf("batch %d row %d: %s is null (%d nulls in the batch)", b, i, name, a.NullN())
		}
	}
	return nil
}

// Locations returns, per series code (index row), where the series' rows
// are, for the series written so far. The slice is the writer's: do not
// modify it; it stays valid after Close. After TakeLocations it holds only
// the series written since (element 0 is then the first series not taken).
func (w *Writer) Locations() []Location { return w.locs }

// TakeLocations appends to dst the locations of the series written since
// the last call (all of them at the first) and forgets them, so that a
// writer that indexes each batch's series as it is written holds no
// location per series of the file.
func (w *Writer) TakeLocations(dst []Location) []Location {
	dst = append(dst, w.locs...)
	w.taken += len(w.locs)
	w.locs = w.locs[:0]
	return dst
}

// Close writes the footer, fsyncs the file and returns its size, row and
// batch counts and checksum. After a failed Write it removes the file and
// returns that failure instead: a file that broke an invariant is never
// finished.
func (w *Writer) Close() (arrowfile.Info, error) {
	if w.closed {
		return arrowfile.Info{}, fmt.Errorf("close %s: already closed", w.path)
	}
	if w.err != nil {
		return arrowfile.Info{}, errors.Join(w.err, w.Abort())
	}
	w.closed = true
	info, err := w.f.Close()
	if err != nil {
		w.err = err
		return arrowfile.Info{}, err
	}
	return info, nil
}

// Abort closes and removes the file. It does nothing after a successful
// Close, so `defer w.Abort()` is safe.
func (w *Writer) Abort() error {
	if w.closed && w.err == nil {
		return nil
	}
	if w.f == nil {
		return nil
	}
	f := w.f
	w.f, w.closed = nil, true
	if w.err == nil {
		w.err = errors.New("aborted")
	}
	return f.Abort()
}
