// Package export writes the rows of a snapshot to a Parquet, CSV or Arrow
// IPC file (chosen by extension) the way people read a table: one row per
// observation with its series id, period, value, the other data columns
// and the series' attributes, in (series_id, period) order.
//
// It reads through the read layer (pkg/query: a Plan over the snapshot's
// Reader, streamed batch by batch) and writes through pkg/convert's
// Output, so memory is one answer batch plus the writer's buffer (a
// Parquet row group), whatever the size of the snapshot; the dictionary
// columns of an answer (series_id, attributes) are decoded per batch.
package export

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/convert"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// DefaultBatchBytes is the target size of one batch read from the
// snapshot (the server's default message size).
const DefaultBatchBytes = 2 << 20

// Options say what to export. At most one of Series, Prefix and Category
// selects series; none selects every series.
type Options struct {
	Dataset  string   // the dataset directory, ROOT/DATASET
	Snapshot uint64   // the vintage; 0: the one CURRENT names
	Out      string   // .parquet, .csv or .arrow (.ipc, .feather)
	Series   []string // these series (every id must exist)
	Prefix   string   // every series whose id starts with it
	Category string   // every series in this category or below it
	// From and To bound the periods, inclusive of the whole period each
	// names (pkg/period forms: 2024, 2024-03, 2024-Q1, 2024-03-15, ...).
	From, To string
	// NoAttributes leaves the per-series attribute columns out.
	NoAttributes bool
	Overwrite    bool
	BatchBytes   int64            // 0: DefaultBatchBytes
	Allocator    memory.Allocator // nil: the default
}

// Result says what was written; field names are stable (docs/CLI.md).
type Result struct {
	Dataset    string         `json:"dataset"`
	SnapshotID uint64         `json:"snapshot_id"`
	Out        string         `json:"out"`
	Format     convert.Format `json:"format"`
	Columns    []string       `json:"columns"`
	Rows       int64          `json:"rows"`
	Series     int            `json:"series"` // series selected (some may have no rows in the range)
	Batches    int            `json:"batches"`
	Bytes      int64          `json:"bytes"`
	Seconds    float64        `json:"seconds"`
}

// Export writes the selected rows of the snapshot to o.Out. The file
// appears complete or not at all (pkg/convert.Output).
func Export(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	req, err := o.request()
	if err != nil {
		return nil, err
	}
	d, err := dataset.Open(o.Dataset)
	if err != nil {
		return nil, err
	}
	if err := d.CheckExists(); err != nil {
		return nil, err
	}
	id := o.Snapshot
	if id == 0 {
		if id, err = d.CurrentID(); err != nil {
			return nil, err
		}
	} else if err := d.CheckVintage(id); err != nil {
		return nil, err
	}
	s, err := snapshot.OpenID(d.Dir, id, snapshot.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r, err := query.FromSnapshot(d.Name, s)
	if err != nil {
		return nil, err
	}
	plan, err := query.NewPlan(r, req, query.Limits{})
	if err != nil {
		return nil, err
	}
	schema := plainSchema(plan.Schema())
	if o.whole() {
		if f, err := convert.FormatOf(o.Out); err == nil && f == convert.Parquet {
			return exportWhole(ctx, o, d.Name, id, r, plan, start)
		}
	}
	out, err := convert.Create(o.Out, schema, o.Overwrite)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	mem := o.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	budget := o.BatchBytes
	if budget <= 0 {
		budget = DefaultBatchBytes
	}
	st, err := plan.Stream(ctx, mem, budget, func(rec arrow.RecordBatch) error {
		plain, err := decode(ctx, mem, schema, rec)
		if err != nil {
			return err
		}
		defer plain.Release()
		return out.Write(plain)
	})
	if err != nil {
		return nil, fmt.Errorf("export %s snapshot %d to %s: %w", d.Name, id, o.Out, err)
	}
	if err := out.Close(); err != nil {
		return nil, err
	}
	res := &Result{Dataset: d.Name, SnapshotID: id, Out: o.Out, Format: out.Format, Rows: st.Rows,
		Series: plan.Series(), Batches: st.Batches, Bytes: out.Size, Seconds: time.Since(start).Seconds()}
	for _, f := range schema.Fields() {
		res.Columns = append(res.Columns, f.Name)
	}
	return res, nil
}

// whole reports whether the options ask for every row of the snapshot with
// its attributes: what the portable copy's writer writes, in parallel.
func (o Options) whole() bool {
	return len(o.Series) == 0 && o.Prefix == "" && o.Category == "" && o.From == "" && o.To == "" && !o.NoAttributes
}

// exportWhole writes every row to a Parquet file through WritePortable:
// the portable copy's layout (series-aligned row groups, statistics, the
// page index), assembled and encoded in parallel.
func exportWhole(ctx context.Context, o Options, name string, id uint64, r query.Reader, plan *query.Plan, start time.Time) (*Result, error) {
	out, err := convert.CreateRaw(o.Out, o.Overwrite)
	if err != nil {
		return nil, err
	}
	defer out.Abort()
	pr, err := WritePortable(ctx, r, out.Raw(), PortableOptions{Allocator: o.Allocator})
	if err != nil {
		return nil, fmt.Errorf("export %s snapshot %d to %s: %w", name, id, o.Out, err)
	}
	if err := out.Close(); err != nil {
		return nil, err
	}
	return &Result{Dataset: name, SnapshotID: id, Out: o.Out, Format: out.Format, Columns: pr.Columns, Rows: pr.Rows,
		Series: plan.Series(), Batches: pr.RowGroups, Bytes: out.Size, Seconds: time.Since(start).Seconds()}, nil
}

// request turns the options into a query: every data column, and the
// attributes unless left out.
func (o Options) request() (*query.Request, error) {
	req := &query.Request{Range: query.AllPeriods, Attributes: !o.NoAttributes}
	req.Select = query.Selector{Kind: query.ByPrefix} // every series
	n := 0
	if len(o.Series) > 0 {
		n++
		req.Select = query.Selector{Kind: query.ByIDs, IDs: o.Series}
	}
	if o.Prefix != "" {
		n++
		req.Select = query.Selector{Kind: query.ByPrefix, Prefix: o.Prefix}
	}
	if o.Category != "" {
		n++
		req.Select = query.Selector{Kind: query.ByCategory, Category: o.Category}
	}
	if n > 1 {
		return nil, fmt.Errorf("select series by ids, by prefix or by category, not several")
	}
	if o.From != "" {
		d, err := period.Parse(o.From)
		if err != nil {
			return nil, fmt.Errorf("--from: %w", err)
		}
		req.Range.From = d
	}
	if o.To != "" {
		d, err := period.End(o.To)
		if err != nil {
			return nil, fmt.Errorf("--to: %w", err)
		}
		req.Range.To = d
	}
	if req.Range.From > req.Range.To {
		return nil, fmt.Errorf("--from %s is after --to %s", o.From, o.To)
	}
	return req, nil
}

// plainSchema is the answer's schema with every dictionary column (the
// series ids, the attributes) replaced by its value type: what files for
// other engines hold, and what Arrow IPC files can carry when the
// dictionary changes from batch to batch (delta dictionaries).
func plainSchema(sc *arrow.Schema) *arrow.Schema {
	fields := make([]arrow.Field, sc.NumFields())
	for i, f := range sc.Fields() {
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			f.Type = dt.ValueType
		}
		fields[i] = f
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md)
}

// decode returns rec with its dictionary columns decoded.
func decode(ctx context.Context, mem memory.Allocator, schema *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	ectx := compute.WithAllocator(ctx, mem)
	for i, c := range rec.Columns() {
		d, ok := c.(*array.Dictionary)
		if !ok {
			c.Retain()
			cols[i] = c
			continue
		}
		v, err := compute.TakeArray(ectx, d.Dictionary(), d.Indices())
		if err != nil {
			return nil, fmt.Errorf("decode column %s: %w", rec.ColumnName(i), err)
		}
		cols[i] = v
	}
	return array.NewRecordBatch(schema, cols, rec.NumRows()), nil
}
