package export

import (
	"context"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/parquetfile"
	"github.com/energyscope/servingsnap/pkg/query"
)

// CheckPortable reads a portable copy back with pqarrow, the way an engine
// would, and compares it row by row with the rows the Reader serves (what
// WritePortable wrote from): the same columns and types, the same rows in
// the same order, and row groups whose series_id ranges ascend without
// overlap (what lets an engine skip them). It returns the rows compared,
// and a corrupt.ErrCorrupt error naming the first row, series and column
// that differ. It beside WritePortable because a format's reader lives
// beside its writer; snapverify --deep calls it.
func CheckPortable(ctx context.Context, r query.Reader, f parquet.ReaderAtSeeker, mem memory.Allocator) (rows int64, err error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	defer func() {
		if p := recover(); p != nil {
			err = corrupt.Errorf("reading the portable copy panicked: %v", p)
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return 0, corrupt.Errorf("not a readable Parquet file: %w", err)
	}
	defer pf.Close()
	if err := parquetfile.CheckChunks(pf); err != nil {
		return 0, corrupt.Errorf("%w", err)
	}
	if err := checkRowGroups(pf); err != nil {
		return 0, err
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, mem)
	if err != nil {
		return 0, corrupt.Errorf("%w", err)
	}
	req := &query.Request{Range: query.AllPeriods, Attributes: true, Select: query.Selector{Kind: query.ByPrefix}}
	plan, err := query.NewPlan(r, req, query.Limits{})
	if err != nil {
		return 0, err
	}
	schema := plainSchema(plan.Schema())
	got, err := fr.Schema()
	if err != nil {
		return 0, corrupt.Errorf("schema: %w", err)
	}
	if got.NumFields() != schema.NumFields() {
		return 0, corrupt.Errorf("%d columns, the snapshot's rows have %d (%v)", got.NumFields(), schema.NumFields(), schema)
	}
	for i, want := range schema.Fields() {
		if g := got.Field(i); g.Name != want.Name || !arrow.TypeEqual(g.Type, want.Type) {
			return 0, corrupt.Errorf("column %d is %s %s, want %s %s", i, g.Name, g.Type, want.Name, want.Type)
		}
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return 0, corrupt.Errorf("%w", err)
	}
	defer rr.Release()
	var cur arrow.RecordBatch // the portable copy's batch being compared
	var off int64             // rows of cur already compared
	next := func() error {
		for cur == nil || off == cur.NumRows() {
			if !rr.Next() {
				if err := rr.Err(); err != nil && err != io.EOF {
					return corrupt.Errorf("row %d: %w", rows, err)
				}
				return corrupt.Errorf("the copy ends after %d rows; the snapshot has more", rows)
			}
			cur, off = rr.RecordBatch(), 0
		}
		return nil
	}
	_, err = plan.Stream(ctx, mem, DefaultBatchBytes, func(rec arrow.RecordBatch) error {
		plain, err := decode(ctx, mem, schema, rec)
		if err != nil {
			return err
		}
		defer plain.Release()
		var lo int64
		for lo < plain.NumRows() {
			if err := next(); err != nil {
				return err
			}
			n := min(plain.NumRows()-lo, cur.NumRows()-off)
			for c := 0; c < int(plain.NumCols()); c++ {
				a, b := plain.Column(c), cur.Column(c)
				if array.SliceEqual(a, lo, lo+n, b, off, off+n) {
					continue
				}
				for k := int64(0); k < n; k++ {
					if !array.SliceEqual(a, lo+k, lo+k+1, b, off+k, off+k+1) {
						id := plain.Column(0).(*array.String).Value(int(lo + k))
						return corrupt.Errorf("row %d (series %q): column %s is %s, the snapshot has %s",
							rows+k, id, schema.Field(c).Name, b.ValueStr(int(off+k)), a.ValueStr(int(lo+k)))
					}
				}
			}
			lo, off, rows = lo+n, off+n, rows+n
		}
		return nil
	})
	if err != nil {
		return rows, err
	}
	if cur != nil && off < cur.NumRows() || rr.Next() {
		return rows, corrupt.Errorf("the copy has rows after the snapshot's %d", rows)
	}
	return rows, nil
}

// checkRowGroups checks that every row group has series_id statistics and
// that the groups' ranges ascend: a group may begin with the series the
// previous one ended with (a series longer than PortableMaxRowGroupRows is
// split), never before it.
func checkRowGroups(pf *file.Reader) error {
	md := pf.MetaData()
	var prevMax string
	for g := 0; g < md.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		cc, err := rg.ColumnChunk(0)
		if err != nil {
			return corrupt.Errorf("row group %d: %w", g, err)
		}
		st, err := cc.Statistics()
		if err != nil || st == nil || !st.HasMinMax() {
			return corrupt.Errorf("row group %d: no series_id statistics (engines could not skip it)", g)
		}
		bs, ok := st.(interface {
			Min() parquet.ByteArray
			Max() parquet.ByteArray
		})
		if !ok {
			return corrupt.Errorf("row group %d: series_id statistics are %s, not byte arrays", g, st.Type())
		}
		lo, hi := string(bs.Min()), string(bs.Max())
		if lo > hi || g > 0 && lo < prevMax {
			return corrupt.Errorf("row group %d: series_id range [%q, %q] starts before the previous group's end %q", g, lo, hi, prevMax)
		}
		prevMax = hi
	}
	return nil
}
