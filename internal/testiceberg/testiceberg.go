// Package testiceberg writes Iceberg tables whose deletes are merge-on-read
// (position delete files, equality delete files and v3 deletion vectors),
// through iceberg-go's own writers and its filesystem ("hadoop") catalog.
//
// pyiceberg, which writes the other Iceberg fixtures, deletes only by
// copy-on-write, so without these tables no test would read a delete file.
// Each table comes with the rows it must hold, computed here from the rows
// written and the delete predicates in plain Go, not by reading the table
// back: the answer a reader is checked against owes nothing to any reader.
//
// It is test tooling: the tests of pkg/lake/source use it directly, and the
// interop suite runs its command (icebergmor) to hand the tables to
// snapbuild and pyiceberg.
package testiceberg

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"
)

// Row is one row of a table: the columns every fixture has.
type Row struct {
	Series string  `json:"series_id"`
	Period string  `json:"period"` // YYYY-MM-DD
	Value  float64 `json:"value"`
	Region string  `json:"region"`
}

// Table is one written table and what it must read as.
type Table struct {
	Name             string `json:"name"`
	FormatVersion    int    `json:"format_version"`
	Location         string `json:"location"`
	MetadataLocation string `json:"metadata_location"`
	// Deletes says which kinds of delete the current snapshot carries:
	// "position", "equality", "dv".
	Deletes []string `json:"deletes"`
	// Want is the current snapshot's rows, ordered by series and period.
	Want []Row `json:"want"`
	// Before is the rows of the snapshot before the first delete, and
	// BeforeSnapshotID its id: time travel past a delete file.
	BeforeSnapshotID int64 `json:"before_snapshot_id"`
	Before           []Row `json:"before"`
}

var schema = iceberggo.NewSchema(0,
	iceberggo.NestedField{ID: 1, Name: "series_id", Type: iceberggo.PrimitiveTypes.String, Required: true},
	iceberggo.NestedField{ID: 2, Name: "period", Type: iceberggo.PrimitiveTypes.Date, Required: true},
	iceberggo.NestedField{ID: 3, Name: "value", Type: iceberggo.PrimitiveTypes.Float64},
	iceberggo.NestedField{ID: 4, Name: "region", Type: iceberggo.PrimitiveTypes.String},
)

// rows makes n daily rows of one series from start, values base, base+0.5, ...
func rows(series, region, start string, n int, base float64) []Row {
	d0, err := time.Parse(time.DateOnly, start)
	if err != nil {
		panic(err) // constant dates only
	}
	out := make([]Row, n)
	for i := range out {
		out[i] = Row{series, d0.AddDate(0, 0, i).Format(time.DateOnly), base + float64(i)*0.5, region}
	}
	return out
}

func keep(rs []Row, drop func(Row) bool) []Row {
	var out []Row
	for _, r := range rs {
		if !drop(r) {
			out = append(out, r)
		}
	}
	return out
}

func sorted(rs []Row) []Row {
	out := append([]Row(nil), rs...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Series != out[j].Series {
			return out[i].Series < out[j].Series
		}
		return out[i].Period < out[j].Period
	})
	return out
}

var arrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "series_id", Type: arrow.BinaryTypes.String},
	{Name: "period", Type: arrow.FixedWidthTypes.Date32},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func record(rs []Row) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrowSchema)
	defer b.Release()
	for _, r := range rs {
		d, err := time.Parse(time.DateOnly, r.Period)
		if err != nil {
			return nil, err
		}
		b.Field(0).(*array.StringBuilder).Append(r.Series)
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32FromTime(d))
		b.Field(2).(*array.Float64Builder).Append(r.Value)
		b.Field(3).(*array.StringBuilder).Append(r.Region)
	}
	return b.NewRecordBatch(), nil
}

// keyRecord is a batch of (series_id, period) keys: an equality delete's rows.
func keyRecord(rs []Row) (arrow.RecordBatch, error) {
	full, err := record(rs)
	if err != nil {
		return nil, err
	}
	defer full.Release()
	sc := arrow.NewSchema(arrowSchema.Fields()[:2], nil)
	return array.NewRecordBatch(sc, full.Columns()[:2], full.NumRows()), nil
}

type writer struct {
	ctx context.Context
	cat *hadoop.Catalog
	tbl *table.Table
}

func (w *writer) append(rs []Row) error {
	rec, err := record(rs)
	if err != nil {
		return err
	}
	defer rec.Release()
	rdr, err := array.NewRecordReader(arrowSchema, []arrow.RecordBatch{rec})
	if err != nil {
		return err
	}
	defer rdr.Release()
	tx := w.tbl.NewTransaction()
	if err := tx.Append(w.ctx, rdr, nil); err != nil {
		return fmt.Errorf("append: %w", err)
	}
	return w.commit(tx)
}

func (w *writer) delete(filter iceberggo.BooleanExpression) error {
	tx := w.tbl.NewTransaction()
	if err := tx.Delete(w.ctx, filter, nil); err != nil {
		return fmt.Errorf("delete %s: %w", filter, err)
	}
	return w.commit(tx)
}

func (w *writer) deleteKeys(rs []Row) error {
	rec, err := keyRecord(rs)
	if err != nil {
		return err
	}
	defer rec.Release()
	var recs iter.Seq2[arrow.RecordBatch, error] = func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	tx := w.tbl.NewTransaction()
	if err := tx.CommitEqualityDeletes(w.ctx, []int{1, 2}, recs, nil); err != nil {
		return fmt.Errorf("equality deletes: %w", err)
	}
	return w.commit(tx)
}

func (w *writer) commit(tx *table.Transaction) error {
	t, err := tx.Commit(w.ctx)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	w.tbl = t
	return nil
}

func (w *writer) create(name string, version int) error {
	tbl, err := w.cat.CreateTable(w.ctx, table.Identifier{"db", name}, schema, catalog.WithProperties(iceberggo.Properties{
		table.PropertyFormatVersion: fmt.Sprint(version),
		table.WriteDeleteModeKey:    table.WriteModeMergeOnRead,
	}))
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	w.tbl = tbl
	return nil
}

func (w *writer) snapshotID() int64 { return w.tbl.CurrentSnapshot().SnapshotID }

// Write creates the tables under warehouse (namespace db) and returns them.
//
//   - mor_v2: two appends (two data files), then a position delete of part of
//     one series and of all of another, then an equality delete of single
//     (series_id, period) keys and a key that matches no row.
//   - mor_v3: the same rows in a format-version 3 table, where a merge-on-read
//     delete writes a deletion vector; a second delete on the same file
//     supersedes it with a wider one.
func Write(ctx context.Context, warehouse string) ([]Table, error) {
	cat, err := hadoop.NewCatalog("fixtures", warehouse, nil)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	if err := cat.CreateNamespace(ctx, table.Identifier{"db"}, nil); err != nil {
		return nil, err
	}
	first := append(rows("PET.A.D", "east", "2024-01-01", 30, 10), rows("PET.B.D", "west", "2024-01-01", 30, 50)...)
	second := append(rows("PET.C.D", "east", "2024-02-01", 20, 100), rows("PET.D.D", "west", "2024-02-01", 10, 7)...)
	all := append(append([]Row(nil), first...), second...)

	var out []Table
	for _, version := range []int{2, 3} {
		w := &writer{ctx: ctx, cat: cat}
		name := fmt.Sprintf("mor_v%d", version)
		if err := w.create(name, version); err != nil {
			return nil, err
		}
		if err := w.append(first); err != nil {
			return nil, err
		}
		if err := w.append(second); err != nil {
			return nil, err
		}
		t := Table{Name: name, FormatVersion: version, BeforeSnapshotID: w.snapshotID(), Before: sorted(all)}
		want := all

		// Part of PET.A.D (values above 15) and all of PET.D.D: a
		// position delete file (v2) or deletion vector (v3) per data file.
		posFilter := iceberggo.NewOr(
			iceberggo.NewAnd(iceberggo.EqualTo(iceberggo.Reference("series_id"), "PET.A.D"), iceberggo.GreaterThan(iceberggo.Reference("value"), 15.0)),
			iceberggo.EqualTo(iceberggo.Reference("series_id"), "PET.D.D"))
		if err := w.delete(posFilter); err != nil {
			return nil, err
		}
		want = keep(want, func(r Row) bool { return r.Series == "PET.A.D" && r.Value > 15 || r.Series == "PET.D.D" })
		if version == 2 {
			t.Deletes = append(t.Deletes, "position")
		} else {
			// A second delete on a file that already has a vector: the new
			// vector holds both sets and replaces the old one.
			if err := w.delete(iceberggo.EqualTo(iceberggo.Reference("series_id"), "PET.B.D")); err != nil {
				return nil, err
			}
			want = keep(want, func(r Row) bool { return r.Series == "PET.B.D" })
			t.Deletes = append(t.Deletes, "dv")
		}
		if version == 2 {
			// Equality deletes by (series_id, period): two rows of PET.B.D,
			// one of PET.C.D, and a key that matches nothing.
			keys := []Row{
				{Series: "PET.B.D", Period: "2024-01-03"},
				{Series: "PET.B.D", Period: "2024-01-30"},
				{Series: "PET.C.D", Period: "2024-02-01"},
				{Series: "PET.Z.D", Period: "2024-01-01"},
			}
			if err := w.deleteKeys(keys); err != nil {
				return nil, err
			}
			gone := map[[2]string]bool{}
			for _, k := range keys {
				gone[[2]string{k.Series, k.Period}] = true
			}
			want = keep(want, func(r Row) bool { return gone[[2]string{r.Series, r.Period}] })
			t.Deletes = append(t.Deletes, "equality")
		}
		t.Want = sorted(want)
		t.Location = w.tbl.Location()
		t.MetadataLocation = w.tbl.MetadataLocation()
		out = append(out, t)
	}
	return out, nil
}

// TableDir is where Write puts a table of that name.
func TableDir(warehouse, name string) string { return filepath.Join(warehouse, "db", name) }
