package source

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/parquetfile"
)

// EachBatch reads the rows of one data file of the table as record batches
// under the table's column names, with the file's deleted rows left out
// and partition values filled in, and calls fn on each in file order. It
// is the whole-file reader for a caller that reads a table's rows once (a
// comparison), not the builder's row-group scheduler.
//
// Of a Delta table or a Parquet folder only the named columns are read
// (those the file has; a name it lacks is left out of the batch). An
// Iceberg table's batches come as its reader gives them, every column.
// fn must not keep a batch after it returns.
func (t *Table) EachBatch(ctx context.Context, f *File, columns []string, fn func(arrow.RecordBatch) error) (err error) {
	if t.iceberg != nil {
		recs, err := t.iceberg.records(ctx, f)
		if err != nil {
			return err
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: malformed Parquet file: %v", f.Rel, r)
		}
	}()
	rd, _, err := t.Store.Open(ctx, f.Name)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Rel, err)
	}
	pf, err := file.NewParquetReader(rd)
	if err != nil {
		rd.Close()
		return fmt.Errorf("%s: not a readable Parquet file: %w", f.Rel, err)
	}
	defer pf.Close() // closes rd
	if err := parquetfile.CheckChunks(pf); err != nil {
		return fmt.Errorf("%s: %w", f.Rel, err)
	}
	props := pqarrow.ArrowReadProperties{BatchSize: 1 << 16}
	fr, err := pqarrow.NewFileReader(pf, props, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Rel, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		return fmt.Errorf("%s: schema: %w", f.Rel, err)
	}
	if sc.NumFields() != pf.MetaData().Schema.NumColumns() {
		return fmt.Errorf("%s: nested columns are not supported", f.Rel)
	}
	proj, err := t.Project(f, sc.Fields())
	if err != nil {
		return err
	}
	deleted, err := t.Deleted(ctx, f, pf.NumRows())
	if err != nil {
		return err
	}
	// The fields to hand out, and the file columns to read for them.
	var fields []arrow.Field
	var leaves []int
	var from []int // per field: its position among leaves, or -1 for a constant
	for _, name := range columns {
		for i, fl := range proj.Fields {
			if fl.Name != name {
				continue
			}
			fields = append(fields, fl)
			if proj.Leaf[i] < 0 {
				from = append(from, -1)
			} else {
				from = append(from, len(leaves))
				leaves = append(leaves, proj.Leaf[i])
			}
			break
		}
	}
	if pf.NumRows() == 0 || pf.NumRowGroups() == 0 {
		return nil
	}
	// String columns come as dictionaries (per column chunk): a reader
	// resolves each distinct value once rather than once per row.
	dict := false
	for _, leaf := range leaves {
		if id := sc.Field(leaf).Type.ID(); id == arrow.STRING || id == arrow.LARGE_STRING {
			props.SetReadDict(leaf, true)
			dict = true
		}
	}
	if dict {
		if fr, err = pqarrow.NewFileReader(pf, props, memory.DefaultAllocator); err != nil {
			return fmt.Errorf("%s: %w", f.Rel, err)
		}
	}
	emit := func(rec arrow.RecordBatch, n int64) error {
		cols := make([]arrow.Array, len(fields))
		for j, fl := range fields {
			if from[j] >= 0 {
				cols[j] = rec.Column(from[j])
				cols[j].Retain()
				continue
			}
			c, cerr := t.Constant(f, fl, int(n), memory.DefaultAllocator)
			if cerr != nil {
				for _, c := range cols[:j] {
					c.Release()
				}
				return cerr
			}
			cols[j] = c
		}
		// A partition value may come dictionary-encoded: the batch's
		// fields take their columns' types.
		out := make([]arrow.Field, len(fields))
		for j, fl := range fields {
			out[j] = arrow.Field{Name: fl.Name, Type: cols[j].DataType(), Nullable: true, Metadata: fl.Metadata}
		}
		b := array.NewRecordBatch(arrow.NewSchema(out, nil), cols, n)
		for _, c := range cols {
			c.Release()
		}
		defer b.Release()
		return fn(b)
	}
	if len(leaves) == 0 {
		// Only constants (or nothing) asked for: the row count decides.
		n := pf.NumRows() - int64(len(deleted))
		none := array.NewRecordBatch(arrow.NewSchema(nil, nil), nil, n)
		defer none.Release()
		return emit(none, n)
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", f.Rel, err)
	}
	defer rr.Release()
	var first int64 // file row of the batch's first row
	for rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		del := deleted[sort.Search(len(deleted), func(i int) bool { return deleted[i] >= uint64(first) }):]
		del = del[:sort.Search(len(del), func(i int) bool { return del[i] >= uint64(first+n) })]
		if len(del) == 0 {
			err = emit(rec, n)
		} else {
			err = emitKept(ctx, rec, first, del, emit)
		}
		if err != nil {
			return err
		}
		first += n
	}
	if err := rr.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", f.Rel, err)
	}
	if first != pf.NumRows() {
		return fmt.Errorf("%s: read %d rows, the footer says %d", f.Rel, first, pf.NumRows())
	}
	return nil
}

// emitKept passes on rec without its rows at the file positions del (all
// within rec, whose first row is file row first).
func emitKept(ctx context.Context, rec arrow.RecordBatch, first int64, del []uint64, emit func(arrow.RecordBatch, int64) error) error {
	keep := make([]bool, rec.NumRows())
	for i := range keep {
		keep[i] = true
	}
	for _, d := range del {
		keep[int64(d)-first] = false
	}
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	b.AppendValues(keep, nil)
	mask := b.NewArray()
	b.Release()
	defer mask.Release()
	kept, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return fmt.Errorf("remove deleted rows: %w", err)
	}
	defer kept.Release()
	return emit(kept, kept.NumRows())
}
