package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/mapbuf"
)

// Series is one index row as Writer.Add takes it. A caller fills one
// Series and reuses it (and its Attrs slice) for every call.
type Series struct {
	ID string
	// Location is where the series' rows are in the data file, as
	// datafile.Writer reported it.
	datafile.Location
	// HasLatest says some value of the series is not null: LatestPeriod is
	// the period of the last such row and LatestValue its value. Without
	// it both are written as nulls and LatestValue is not read.
	HasLatest    bool
	LatestPeriod int32
	LatestValue  Cell
	// Attrs holds the series' attribute values, one per attribute column
	// in schema order.
	Attrs []Cell
	// Cold is where the series' cold rows went (a tiered writer only, see
	// SetTiered): then Location is its hot rows, and the index's
	// first_period and last_period span both tiers.
	Cold Cold
}

// Writer builds an index sidecar one series at a time, in series id
// order, and writes it at Close as the single record batch the format
// wants (version 5: no dictionaries, low-cardinality strings as codes, a
// lookup table over the ids). Values come as (array, row) cells, so a builder passes rows of
// the arrays it gathered and a compaction passes rows of the base index
// or of delta records, without converting anything per series.
//
// Add checks what makes the index agree with the data file: ids strictly
// increasing, and locations that tile the data file (each series starts
// where the previous one ended, in the same batch or at the start of the
// next). After an error the writer is unusable: Close fails and nothing
// is written.
//
// The columns are held until Close in buffers of a mapbuf.Arena: past a
// few hundred KiB, mapped temporary files beside the index (unlinked from
// the start), so that an index of millions of series is page cache the
// kernel can write back and evict, not anonymous memory that grows with
// the snapshot. Close or Abort releases them.
type Writer struct {
	path      string
	valueType arrow.DataType
	attrs     []arrow.Field

	mem         *mapbuf.Arena
	n           int
	ids         *mapbuf.Buf // the ids' bytes, end to end
	idOffsets   *mapbuf.Buf // int32, n+1
	rowOffset   *mapbuf.Buf // int64
	rowCount    *mapbuf.Buf // int64
	batch       *mapbuf.Buf // uint32
	batchOffset *mapbuf.Buf // uint32
	firstPeriod *mapbuf.Buf // int32
	lastPeriod  *mapbuf.Buf // int32
	latestP     *column
	latestV     *column
	attrCols    []*column
	prev        datafile.Location
	err         error
	done        bool

	// A tiered writer (SetTiered) writes a version-3 index.
	tiered, allCold bool
	coldStart       *mapbuf.Buf // int64
	coldRows        *mapbuf.Buf // int64
	coldFirst       *mapbuf.Buf // int32
	coldLast        *mapbuf.Buf // int32
	prevCold        Cold
}

// spillHeapMax is the size past which a column buffer moves from the Go
// heap to a mapped file (a variable so tests can map every buffer).
var spillHeapMax = 256 << 10

// NewWriter starts an index for a value column of valueType and the given
// attribute columns. A dictionary-typed attribute is taken as its value
// type: the index stores it plain (a version-1 base index, whose string
// attributes may be dictionaries, compacts into a version-2 one). The
// file is created at path (which must not exist) only by Close.
//
// The writer's column buffers spill to temporary files in path's
// directory; call Close or Abort to release them.
func NewWriter(path string, valueType arrow.DataType, attrs []arrow.Field) (*Writer, error) {
	a := mapbuf.NewArena(filepath.Dir(path), spillHeapMax)
	w := &Writer{path: path, valueType: valueType, mem: a,
		ids: a.New(), idOffsets: a.New(), rowOffset: a.New(), rowCount: a.New(), batch: a.New(), batchOffset: a.New(),
		firstPeriod: a.New(), lastPeriod: a.New(), coldStart: a.New(), coldRows: a.New(), coldFirst: a.New(), coldLast: a.New()}
	appendInt32(w.idOffsets, 0)
	var err error
	if w.latestP, err = newColumn(a, arrow.FixedWidthTypes.Date32); err != nil {
		return nil, err
	}
	if w.latestV, err = newColumn(a, valueType); err != nil {
		return nil, fmt.Errorf("index %s: value column: %w", path, err)
	}
	for _, f := range attrs {
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			f.Type = dt.ValueType
		}
		if k := f.Metadata.FindKey(MetaDictionary); k >= 0 {
			// Only Close says which columns are code columns.
			keys, vals := slices.Delete(slices.Clone(f.Metadata.Keys()), k, k+1), slices.Delete(slices.Clone(f.Metadata.Values()), k, k+1)
			f.Metadata = arrow.NewMetadata(keys, vals)
		}
		c, err := newColumn(a, f.Type)
		if err != nil {
			return nil, fmt.Errorf("index %s: attribute %q: %w", path, f.Name, err)
		}
		w.attrs = append(w.attrs, f)
		w.attrCols = append(w.attrCols, c)
	}
	return w, nil
}

// SetTiered makes the writer write a version-3 (tiered) index: each
// Series carries its Cold location, which must tile the cold file as its
// hot Location tiles the data file. With allCold (--format vortex) every
// series' rows are all cold: its hot Location is empty (no rows, at row 0
// of batch 0). Call it before the first Add.
func (w *Writer) SetTiered(allCold bool) {
	if w.n == 0 {
		w.tiered, w.allCold = true, allCold
	}
}

// Reserve makes room for n more series, so that a caller that knows the
// count (a builder, a compaction) saves the copies of growing buffers.
func (w *Writer) Reserve(n int) {
	w.idOffsets.Reserve(4 * n)
	w.rowOffset.Reserve(8 * n)
	w.rowCount.Reserve(8 * n)
	w.batch.Reserve(4 * n)
	w.batchOffset.Reserve(4 * n)
	w.firstPeriod.Reserve(4 * n)
	w.lastPeriod.Reserve(4 * n)
	if w.tiered {
		w.coldStart.Reserve(8 * n)
		w.coldRows.Reserve(8 * n)
		w.coldFirst.Reserve(4 * n)
		w.coldLast.Reserve(4 * n)
	}
	w.latestP.reserve(n)
	w.latestV.reserve(n)
	for _, c := range w.attrCols {
		c.reserve(n)
	}
}

// Add appends the next series; its code (index row) is the number of series
// added before the call. Add copies what it needs: s and the arrays it
// points into may change once it returns. It does not allocate, except to grow the
// writer's buffers.
func (w *Writer) Add(s *Series) error {
	if w.err != nil {
		return fmt.Errorf("index %s: an earlier add failed: %w", w.path, w.err)
	}
	if w.done {
		return fmt.Errorf("index %s: the writer is closed", w.path)
	}
	if err := w.add(s); err != nil {
		w.err = fmt.Errorf("index %s: series %d (%q): %w", w.path, w.n, s.ID, err)
		return w.err
	}
	return nil
}

func (w *Writer) add(s *Series) error {
	if err := w.checkLocation(s); err != nil {
		return err
	}
	if len(s.Attrs) != len(w.attrCols) {
		return fmt.Errorf("%d attribute values for %d attribute columns", len(s.Attrs), len(w.attrCols))
	}
	if w.ids.Len()+len(s.ID) > math.MaxInt32 {
		return fmt.Errorf("more than 2 GiB of series ids")
	}
	w.ids.AppendString(s.ID)
	appendInt32(w.idOffsets, int32(w.ids.Len()))
	appendInt64(w.rowOffset, s.RowOffset)
	appendInt64(w.rowCount, s.RowCount)
	appendUint32(w.batch, s.Batch)
	appendUint32(w.batchOffset, s.BatchOffset)
	first, last := s.FirstPeriod, s.LastPeriod
	if w.tiered {
		c := s.Cold
		if c.Rows > 0 {
			first = c.FirstPeriod
		}
		if s.RowCount == 0 {
			last = c.LastPeriod
		}
		appendInt64(w.coldStart, c.Start)
		appendInt64(w.coldRows, c.Rows)
		appendInt32(w.coldFirst, c.FirstPeriod)
		appendInt32(w.coldLast, c.LastPeriod)
		w.prevCold = c
	}
	appendInt32(w.firstPeriod, first)
	appendInt32(w.lastPeriod, last)
	if s.HasLatest {
		if s.LatestPeriod < first || s.LatestPeriod > last {
			return fmt.Errorf("latest period %d outside the series' periods %d..%d", s.LatestPeriod, first, last)
		}
		w.latestP.addDate32(arrow.Date32(s.LatestPeriod))
		null, err := w.latestV.add(s.LatestValue)
		if err != nil {
			return fmt.Errorf("latest value: %w", err)
		}
		if null {
			return fmt.Errorf("latest value is null; a series whose values are all null has no latest value")
		}
	} else {
		w.latestP.appendNull()
		w.latestV.appendNull()
	}
	for i, c := range w.attrCols {
		if _, err := c.add(s.Attrs[i]); err != nil {
			return fmt.Errorf("attribute %q: %w", w.attrs[i].Name, err)
		}
	}
	if err := w.mem.Err(); err != nil {
		return err // a column could not grow in its file
	}
	w.prev = s.Location
	w.n++
	return nil
}

// checkLocation checks s against the series before it: the id order the
// readers' binary search relies on, and locations that tile the data file
// the way datafile.Writer lays it out.
func (w *Writer) checkLocation(s *Series) error {
	if w.tiered {
		if err := w.checkCold(s); err != nil {
			return err
		}
	}
	if w.allCold {
		if s.Location != (datafile.Location{}) {
			return fmt.Errorf("hot rows %d at row %d of a snapshot whose rows are all cold", s.RowCount, s.RowOffset)
		}
	} else if s.RowCount < 1 {
		return fmt.Errorf("row count %d; every series has at least one (hot) row", s.RowCount)
	}
	if s.FirstPeriod > s.LastPeriod {
		return fmt.Errorf("first period %d after last period %d", s.FirstPeriod, s.LastPeriod)
	}
	if w.n == 0 {
		if s.RowOffset != 0 || s.Batch != 0 || s.BatchOffset != 0 {
			return fmt.Errorf("the first series starts at row %d (batch %d offset %d), want row 0 of batch 0", s.RowOffset, s.Batch, s.BatchOffset)
		}
		return nil
	}
	start := binary.NativeEndian.Uint32(w.idOffsets.Bytes()[4*(w.n-1):])
	if prev := unsafeString(w.ids.Bytes()[start:]); s.ID <= prev {
		return fmt.Errorf("series id %q is not after %q (series %d); ids must be strictly increasing bytewise", s.ID, prev, w.n-1)
	}
	p := w.prev
	if end := p.RowOffset + p.RowCount; s.RowOffset != end {
		return fmt.Errorf("starts at row %d, the previous series ends at row %d", s.RowOffset, end)
	}
	sameBatch := s.Batch == p.Batch && int64(s.BatchOffset) == int64(p.BatchOffset)+p.RowCount
	nextBatch := s.Batch == p.Batch+1 && s.BatchOffset == 0
	if !sameBatch && !nextBatch {
		return fmt.Errorf("at batch %d offset %d, the previous series is at batch %d offset %d with %d rows",
			s.Batch, s.BatchOffset, p.Batch, p.BatchOffset, p.RowCount)
	}
	return nil
}

// checkCold checks a tiered series' cold location: the series' cold rows
// follow the previous series' in the cold file, lie before its hot rows,
// and exist when it has no hot rows.
func (w *Writer) checkCold(s *Series) error {
	c := w.prevCold
	if w.n == 0 {
		c = Cold{}
	}
	if end := c.Start + c.Rows; s.Cold.Start != end || s.Cold.Rows < 0 {
		return fmt.Errorf("cold rows [%d,+%d), the previous series' cold rows end at %d", s.Cold.Start, s.Cold.Rows, end)
	}
	switch {
	case s.Cold.Rows == 0:
		if w.allCold {
			return fmt.Errorf("no rows: no cold rows in a snapshot whose rows are all cold")
		}
		if s.Cold.FirstPeriod != 0 || s.Cold.LastPeriod != 0 {
			return fmt.Errorf("no cold rows but cold periods %d..%d", s.Cold.FirstPeriod, s.Cold.LastPeriod)
		}
	case s.Cold.FirstPeriod > s.Cold.LastPeriod:
		return fmt.Errorf("first cold period %d after last cold period %d", s.Cold.FirstPeriod, s.Cold.LastPeriod)
	case s.RowCount > 0 && s.Cold.LastPeriod >= s.FirstPeriod:
		return fmt.Errorf("last cold period %d is not before the first hot period %d", s.Cold.LastPeriod, s.FirstPeriod)
	}
	return nil
}

// Close builds the index record batch, writes it to the path given to
// NewWriter and returns the file's description and final schema. No
// column is dictionary-encoded, so readers map the file instead of
// copying it; a string attribute with few distinct values is written as
// a code column (index version 4, FORMAT.md §4; codes.go), any other
// plain; the lookup table (version 5, lookup.go) is built from the ids
// here, in two more buffers of the arena.
func (w *Writer) Close() (arrowfile.Info, *arrow.Schema, error) {
	if w.done {
		return arrowfile.Info{}, nil, fmt.Errorf("index %s: the writer is closed", w.path)
	}
	defer w.Abort()
	if w.err != nil {
		return arrowfile.Info{}, nil, fmt.Errorf("index %s: an earlier add failed: %w", w.path, w.err)
	}
	w.done = true
	n := w.n
	attrs := append([]arrow.Field(nil), w.attrs...)
	cols := make([]arrow.Array, NumFixed, NumFixedTiered+NumLookup+len(attrs))
	cols[ColumnSeriesID] = makeArray(arrow.BinaryTypes.String, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(w.idOffsets.Bytes()), memory.NewBufferBytes(w.ids.Bytes())}, 0)
	cols[ColumnRowOffset] = fixedArray(arrow.PrimitiveTypes.Int64, n, w.rowOffset.Bytes())
	cols[ColumnRowCount] = fixedArray(arrow.PrimitiveTypes.Int64, n, w.rowCount.Bytes())
	cols[ColumnBatch] = fixedArray(arrow.PrimitiveTypes.Uint32, n, w.batch.Bytes())
	cols[ColumnBatchOffset] = fixedArray(arrow.PrimitiveTypes.Uint32, n, w.batchOffset.Bytes())
	cols[ColumnFirstPeriod] = fixedArray(arrow.FixedWidthTypes.Date32, n, w.firstPeriod.Bytes())
	cols[ColumnLastPeriod] = fixedArray(arrow.FixedWidthTypes.Date32, n, w.lastPeriod.Bytes())
	cols[ColumnLatestPeriod] = w.latestP.date32Array()
	cols[ColumnLatestValue] = w.latestV.array()
	if w.tiered {
		cols = append(cols,
			fixedArray(arrow.PrimitiveTypes.Int64, n, w.coldStart.Bytes()),
			fixedArray(arrow.PrimitiveTypes.Int64, n, w.coldRows.Bytes()),
			fixedArray(arrow.FixedWidthTypes.Date32, n, w.coldFirst.Bytes()),
			fixedArray(arrow.FixedWidthTypes.Date32, n, w.coldLast.Bytes()))
	}
	start, code := buildLookup(w.mem, arrow.Int32Traits.CastFromBytes(w.idOffsets.Bytes()), w.ids.Bytes(), n)
	if err := w.mem.Err(); err != nil {
		for _, c := range cols {
			c.Release()
		}
		return arrowfile.Info{}, nil, fmt.Errorf("index %s: lookup table: %w", w.path, err)
	}
	cols = append(cols,
		fixedArray(arrow.PrimitiveTypes.Uint32, n, start.Bytes()),
		fixedArray(arrow.PrimitiveTypes.Uint32, n, code.Bytes()))
	budget := MaxCodeValueBytes
	for i, c := range w.attrCols {
		coded, f, ok, err := encodeCodes(w.mem, attrs[i], c, budget)
		if err != nil {
			for _, c := range cols {
				c.Release()
			}
			return arrowfile.Info{}, nil, fmt.Errorf("index %s: attribute %q: %w", w.path, attrs[i].Name, err)
		}
		if ok {
			budget -= len(f.Metadata.Values()[0])
			attrs[i] = f
			cols = append(cols, coded)
		} else {
			cols = append(cols, c.array())
		}
	}
	schema := schema(w.valueType, attrs, w.tiered)
	rec := array.NewRecordBatch(schema, cols, int64(n))
	defer rec.Release()
	for _, c := range cols {
		c.Release()
	}
	f, err := arrowfile.Create(w.path, schema)
	if err != nil {
		return arrowfile.Info{}, nil, err
	}
	if err := f.Write(rec); err != nil {
		return arrowfile.Info{}, nil, errors.Join(err, f.Abort())
	}
	info, err := f.Close()
	if err != nil {
		return arrowfile.Info{}, nil, err
	}
	return info, schema, nil
}

// Abort releases the column buffers (their temporary files) without
// writing the index. It does nothing after Close (which releases them
// itself), so `defer w.Abort()` is safe; the writer is unusable after it.
func (w *Writer) Abort() {
	if w.mem == nil {
		return
	}
	w.mem.Release()
	w.mem = nil
	w.done = true
}

// fixedArray wraps a no-null fixed-width buffer as an array without a copy.
func fixedArray(dt arrow.DataType, n int, data []byte) arrow.Array {
	return makeArray(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(data)}, 0)
}
