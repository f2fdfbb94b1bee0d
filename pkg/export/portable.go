package export

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/query"
)

// The portable copy's layout (docs/FORMAT.md, "portable.parquet").
const (
	// PortableRowGroupRows is the default target of rows per row group: a
	// row group closes at the first series boundary at or after it, so no
	// series is split unless it alone exceeds PortableMaxRowGroupRows.
	PortableRowGroupRows = 128 << 10
	// PortableMaxRowGroupRows bounds a row group however long its series:
	// one series of more rows is split, still in period order.
	PortableMaxRowGroupRows = 1 << 20
	// PortableZstdLevel is the compression level of every column.
	PortableZstdLevel = 3
)

// PortableOptions shape the portable copy.
type PortableOptions struct {
	RowGroupRows int64            // 0: PortableRowGroupRows
	Allocator    memory.Allocator // nil: the default
}

// PortableResult says what was written.
type PortableResult struct {
	Rows      int64    `json:"rows"`
	Series    int      `json:"series"`
	RowGroups int      `json:"row_groups"`
	Columns   []string `json:"columns"`
}

// WritePortable writes every row the Reader serves, with its series id and
// attributes, to w as one Parquet file that engines read on their own
// (DuckDB, Spark, Trino, polars, pyarrow): rows in (series_id, period)
// order; row groups that start at series boundaries, so each row group's
// series_id statistics name a range no other row group overlaps and a
// one-series query reads only the row groups holding it; sorting_columns
// metadata saying so; statistics and the page index on every column;
// dictionary encoding (series ids and attributes repeat in runs, so they
// cost almost nothing) and zstd everywhere.
func WritePortable(ctx context.Context, r query.Reader, w io.Writer, opt PortableOptions) (*PortableResult, error) {
	req := &query.Request{Range: query.AllPeriods, Attributes: true, Select: query.Selector{Kind: query.ByPrefix}}
	plan, err := query.NewPlan(r, req, query.Limits{})
	if err != nil {
		return nil, err
	}
	schema := plainSchema(plan.Schema())
	if got := schema.Field(0).Name; got != query.ColSeriesID {
		return nil, fmt.Errorf("portable copy: answer's first column is %q, want %q", got, query.ColSeriesID)
	}
	target := opt.RowGroupRows
	if target <= 0 {
		target = PortableRowGroupRows
	}
	mem := opt.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	props := parquet.NewWriterProperties(
		parquet.WithAllocator(mem),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(PortableZstdLevel),
		parquet.WithDictionaryDefault(true),
		parquet.WithStats(true),
		parquet.WithPageIndexEnabled(true),
		// Row groups are cut here, at series boundaries; the writer's own
		// limit only guards a series longer than the maximum.
		parquet.WithMaxRowGroupLength(PortableMaxRowGroupRows),
		parquet.WithSortingColumns([]parquet.SortingColumn{{ColumnIdx: 0}, {ColumnIdx: 1}}),
		parquet.WithCreatedBy("servingsnap portable copy"),
	)
	fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem)))
	if err != nil {
		return nil, fmt.Errorf("portable copy: %w", err)
	}
	pw := &portableWriter{fw: fw, target: target}
	st, err := plan.Stream(ctx, mem, DefaultBatchBytes, func(rec arrow.RecordBatch) error {
		plain, err := decode(ctx, mem, schema, rec)
		if err != nil {
			return err
		}
		defer plain.Release()
		return pw.write(plain)
	})
	if err == nil {
		err = fw.Close()
	} else {
		fw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("portable copy: %w", err)
	}
	res := &PortableResult{Rows: st.Rows, Series: plan.Series(), RowGroups: pw.groups}
	for _, f := range schema.Fields() {
		res.Columns = append(res.Columns, f.Name)
	}
	return res, nil
}

// portableWriter cuts row groups at the first series boundary once a group
// holds target rows.
type portableWriter struct {
	fw     *pqarrow.FileWriter
	target int64
	rows   int64  // rows in the open row group
	last   string // the series of the open group's last row
	groups int
}

func (p *portableWriter) write(rec arrow.RecordBatch) error {
	ids, ok := rec.Column(0).(*array.String)
	if !ok {
		return fmt.Errorf("series_id column is %s, want utf8", rec.Column(0).DataType())
	}
	n := rec.NumRows()
	var lo int64
	for lo < n {
		if p.groups == 0 || p.rows >= PortableMaxRowGroupRows || p.rows >= p.target && ids.Value(int(lo)) != p.last {
			if err := p.fw.NewBufferedRowGroupChecked(); err != nil {
				return err
			}
			p.groups++
			p.rows = 0
		}
		// Take rows until the group is full, then up to the next series
		// boundary.
		hi := lo + max(p.target-p.rows, 1)
		if hi > n {
			hi = n
		}
		for hi < n && ids.Value(int(hi)) == ids.Value(int(hi-1)) && p.rows+(hi-lo) < PortableMaxRowGroupRows {
			hi++
		}
		part := rec.NewSlice(lo, hi)
		err := p.fw.WriteBuffered(part)
		part.Release()
		if err != nil {
			return err
		}
		p.rows += hi - lo
		p.last = ids.Value(int(hi - 1))
		lo = hi
	}
	return nil
}
