package vortexio

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// readLayout decodes rows [a, b) of layout l, touching only the flat
// segments that overlap the range.
func (f *File) readLayout(l *Layout, a, b uint64, ar *arena) (*vec, error) {
	if a > b || b > l.RowCount {
		return nil, fmt.Errorf("vortexio: range [%d,%d) outside %d rows", a, b, l.RowCount)
	}
	switch l.ID {
	case "vortex.flat":
		if l.RowCount > f.opts.MaxChunkRows {
			return nil, corruptf("flat layout of %d rows exceeds the limit", l.RowCount)
		}
		seg, err := f.segmentIn(l.Segments[0], ar)
		if err != nil {
			return nil, err
		}
		nd, err := f.parseFlat(seg)
		if err != nil {
			return nil, fmt.Errorf("segment %d: %w", l.Segments[0], err)
		}
		d := decoder{maxRows: f.opts.MaxChunkRows, ar: ar}
		v, err := d.decodeRange(nd, l.DType, int(l.RowCount), int(a), int(b))
		if err != nil {
			return nil, fmt.Errorf("segment %d: %w", l.Segments[0], err)
		}
		return v, nil
	case "vortex.chunked":
		var parts []*vec
		start := uint64(0)
		for _, c := range l.Children {
			end := start + c.RowCount
			if end > a && start < b && c.RowCount > 0 {
				p, err := f.readLayout(c, max(a, start)-start, min(b, end)-start, ar)
				if err != nil {
					return nil, err
				}
				parts = append(parts, p)
			}
			start = end
		}
		if len(parts) == 0 {
			return allNull(l.DType, 0).materialize(), nil
		}
		return concat(l.DType, parts)
	case "vortex.zoned", "vortex.stats":
		return f.readLayout(l.Children[0], a, b, ar)
	case "vortex.struct":
		dt := l.DType
		v := &vec{dt: dt, n: int(b - a)}
		kids := l.Children
		if dt.Nullable {
			valid, err := f.readLayout(kids[0], a, b, ar)
			if err != nil {
				return nil, err
			}
			v.valid = valid.materialize().data
			kids = kids[1:]
		}
		for i, k := range kids {
			c, err := f.readLayout(k, a, b, ar)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", dt.Names[i], err)
			}
			v.kids = append(v.kids, c)
		}
		return v, nil
	case "vortex.dict":
		values, err := f.readLayout(l.Children[0], 0, l.Children[0].RowCount, ar)
		if err != nil {
			return nil, fmt.Errorf("dict values: %w", err)
		}
		codes, err := f.readLayout(l.Children[1], a, b, ar)
		if err != nil {
			return nil, fmt.Errorf("dict codes: %w", err)
		}
		return takeCodes(values, codes, l.DType)
	}
	return nil, unsupportedf("layout %q", l.ID)
}

// columnLayouts resolves column names to the root struct's child layouts.
func (f *File) columnLayouts(columns []string) ([]*Layout, []arrow.Field, error) {
	if f.dtype.Kind != KindStruct || f.root.ID != "vortex.struct" {
		if len(columns) > 1 || (len(columns) == 1 && columns[0] != "value") {
			return nil, nil, fmt.Errorf("vortexio: file root is not a struct; only column \"value\" exists")
		}
		return []*Layout{f.root}, f.schema.Fields(), nil
	}
	kids := f.root.Children
	if f.dtype.Nullable {
		kids = kids[1:]
	}
	if columns == nil {
		return kids, f.schema.Fields(), nil
	}
	var ls []*Layout
	var fs []arrow.Field
	for _, c := range columns {
		idx := f.schema.FieldIndices(c)
		if len(idx) == 0 {
			return nil, nil, fmt.Errorf("vortexio: no column %q", c)
		}
		ls = append(ls, kids[idx[0]])
		fs = append(fs, f.schema.Field(idx[0]))
	}
	return ls, fs, nil
}

// ReadRange reads rows [a, b) of the named columns (nil = all) into a record
// batch. Only the chunks overlapping the range are read and decoded (plus
// the dictionary of a dict layout). The caller releases the batch.
func (f *File) ReadRange(columns []string, a, b int64) (arrow.RecordBatch, error) {
	if a < 0 || b < a || b > f.NumRows() {
		return nil, fmt.Errorf("vortexio: range [%d,%d) outside %d rows", a, b, f.NumRows())
	}
	ls, fs, err := f.columnLayouts(columns)
	if err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, len(ls))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	ar := getArena()
	defer putArena(ar)
	for i, l := range ls {
		v, err := f.readLayout(l, uint64(a), uint64(b), ar)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", fs[i].Name, err)
		}
		// The decode's buffers are the arena's, which the next read reuses:
		// the rows are copied out, exactly sized, to Go's heap.
		v = v.clone()
		if cols[i], err = v.toArrow(); err != nil {
			return nil, fmt.Errorf("column %q: %w", fs[i].Name, err)
		}
	}
	return array.NewRecordBatch(arrow.NewSchema(fs, nil), cols, b-a), nil
}

// Reader yields the rows of a file as record batches of at most BatchRows rows.
type Reader struct {
	f       *File
	columns []string
	batch   int64
	pos     int64
}

// NewReader returns a Reader over the named columns (nil = all). batchRows
// <= 0 means 65536.
func (f *File) NewReader(columns []string, batchRows int) (*Reader, error) {
	if _, _, err := f.columnLayouts(columns); err != nil {
		return nil, err
	}
	if batchRows <= 0 {
		batchRows = 65536
	}
	return &Reader{f: f, columns: columns, batch: int64(batchRows)}, nil
}

// Schema is the schema of the batches.
func (r *Reader) Schema() *arrow.Schema {
	_, fs, _ := r.f.columnLayouts(r.columns)
	return arrow.NewSchema(fs, nil)
}

// Next returns the next batch, or io.EOF after the last one.
func (r *Reader) Next() (arrow.RecordBatch, error) {
	if r.pos >= r.f.NumRows() {
		return nil, io.EOF
	}
	end := min(r.pos+r.batch, r.f.NumRows())
	rec, err := r.f.ReadRange(r.columns, r.pos, end)
	if err != nil {
		return nil, err
	}
	r.pos = end
	return rec, nil
}
