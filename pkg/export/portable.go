package export

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/parquet-go/parquet-go/format"
	"golang.org/x/sync/errgroup"

	"github.com/energyscope/servingsnap/internal/bufpool"
	"github.com/energyscope/servingsnap/pkg/datafile"
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
	// PortableZstdLevel is the compression level of every column: level 1
	// (klauspost's fastest) cost a fifth less CPU than 3 for a file 3%
	// larger on the 15M-row benchmark lake (docs/FORMAT.md).
	PortableZstdLevel = 1
)

// PortableOptions shape the portable copy.
type PortableOptions struct {
	RowGroupRows int64 // 0: PortableRowGroupRows
	// Allocator: nil, a pool of buffers that the copy's column chunks
	// take back from one another (memory zeroed as Go's allocator does).
	Allocator memory.Allocator
	// Parallel is how many row groups are assembled, and how many columns
	// of one row group encoded, at once; 0: GOMAXPROCS.
	Parallel int

	maxRowGroupRows int64 // 0: PortableMaxRowGroupRows (tests lower it)
	noRuns          bool  // every column through arrow-go's writer (tests compare)
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
// dictionary encoding for series ids and attributes (they repeat in runs,
// so they cost almost nothing) and for the varying columns, plain periods
// and values; zstd everywhere.
//
// How it is fast (the copy must cost well under the build it accompanies):
// row groups are planned from the series' row counts, then assembled and
// encoded on Parallel goroutines, several groups at once (a group's data
// columns are slices of the Reader's batches, copied only where a group
// spans two of them), and joined into w in order (joinparquet.go);
// series_id and the attributes, one value per series, are written from
// their runs by runchunk.go (a dictionary page of the group's distinct
// values, RLE runs of indices: nothing per row), the other columns by
// arrow-go's writer, a group's columns in parallel, the plain ones (the
// costliest) first, every page on its column's goroutine; and the
// writer's buffers are recycled from one column chunk to the next
// (without an Allocator, the copy's own pool) rather than zeroed afresh.
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
		mem = &writeBuffers
	}
	par := opt.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	pw, err := newPortableFile(plan.Schema(), len(r.Shape().Attributes()), w, mem, !opt.noRuns)
	if err != nil {
		return nil, fmt.Errorf("portable copy: %w", err)
	}
	maxRows := opt.maxRowGroupRows
	if maxRows <= 0 {
		maxRows = PortableMaxRowGroupRows
	}
	groups, err := planGroups(r, plan.Series(), target, maxRows)
	if err != nil {
		return nil, fmt.Errorf("portable copy: %w", err)
	}
	asm := &assembler{r: r, sh: r.Shape(), schema: plan.Schema(), mem: mem, runs: pw.runs}
	// A group is assembled and encoded on one of par goroutines; the
	// encoded groups are joined into w in order.
	encode := func(ctx context.Context, g rowGroup) (*encodedGroup, error) {
		grp, err := asm.assemble(ctx, g)
		if err != nil {
			return nil, err
		}
		defer grp.release()
		return pw.encodeGroup(ctx, grp, par)
	}
	var rows int64
	err = writeGroups(ctx, groups, par, encode, func(e *encodedGroup) error {
		rows += e.rows
		return pw.appendGroup(e)
	}, (*encodedGroup).release)
	if err == nil {
		err = pw.close()
	}
	if err != nil {
		return nil, fmt.Errorf("portable copy: %w", err)
	}
	res := &PortableResult{Rows: rows, Series: plan.Series(), RowGroups: len(groups)}
	for _, f := range schema.Fields() {
		res.Columns = append(res.Columns, f.Name)
	}
	return res, nil
}

// encodedGroup is a row group encoded: its column chunks, in the
// schema's order, some of which lie in buf (the file arrow-go wrote of the
// group's other columns).
type encodedGroup struct {
	chunks []chunk
	buf    *bytes.Buffer // nil: none
	rows   int64
}

func (e *encodedGroup) release() {
	if e.buf != nil {
		groupFiles.Put(e.buf)
		e.buf = nil
	}
}

// writeGroups produces groups on par goroutines, at most par ahead of the
// writer, and writes them in order; a produced group that is not written
// (after an error) is released.
func writeGroups[T any](ctx context.Context, groups []rowGroup, par int, produce func(context.Context, rowGroup) (T, error), write func(T) error, release func(T)) error {
	type result struct {
		v   T
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make([]chan result, len(groups))
	for i := range slots {
		slots[i] = make(chan result, 1)
	}
	sem := make(chan struct{}, par)
	go func() {
		for i, g := range groups {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for ; i < len(groups); i++ {
					slots[i] <- result{err: ctx.Err()}
				}
				return
			}
			go func() {
				v, err := produce(ctx, g)
				slots[i] <- result{v, err}
			}()
		}
	}()
	var err error
	for i := range groups {
		res := <-slots[i]
		<-sem
		switch {
		case res.err != nil:
			if err == nil {
				err = res.err
			}
		case err == nil:
			err = write(res.v) // write owns v
		default:
			release(res.v)
		}
		if err != nil {
			cancel()
		}
	}
	return err
}

// rowGroup is a planned row group: the rows of series [lo, hi) in the
// Reader's codes, of which the first series starts at row skip of its
// own rows and the last ends after take of them (a series longer than
// PortableMaxRowGroupRows spans several groups).
type rowGroup struct {
	lo, hi     int
	skip, take int64 // of series lo (skip) and hi-1 (take; -1: all)
	rows       int64
}

// planGroups cuts the series into row groups: a group closes at the first
// series boundary at or after target rows, or at maxRows inside a longer
// series. A dataset of no rows has no row group.
func planGroups(r query.Reader, series int, target, maxRows int64) ([]rowGroup, error) {
	var (
		groups []rowGroup
		cur    = rowGroup{take: -1}
		buf    []query.Piece
		err    error
	)
	for code := 0; code < series; code++ {
		if buf, err = r.Rows(code, query.AllPeriods, buf[:0]); err != nil {
			return nil, err
		}
		var n int64
		for _, p := range buf {
			n += p.Len()
		}
		for done := int64(0); ; {
			if cur.rows == 0 {
				cur = rowGroup{lo: code, skip: done, take: -1}
			}
			cur.hi = code + 1
			room := maxRows - cur.rows
			if n-done <= room {
				cur.rows += n - done
				break
			}
			// The series does not fit: fill the group to the maximum and
			// go on in the next one.
			cur.take = room
			cur.rows += room
			done += room
			groups = append(groups, cur)
			cur = rowGroup{take: -1}
		}
		if cur.rows >= target {
			groups = append(groups, cur)
			cur = rowGroup{take: -1}
		}
	}
	if cur.rows > 0 {
		groups = append(groups, cur)
	}
	return groups, nil
}

// assembler turns a planned row group into its columns, in the portable
// schema's order: series_id and the attributes as runColumns where runs
// says so, else as dictionary arrays (the group's distinct values, in
// order of first use), the rest as slices of the Reader's batches.
type assembler struct {
	r      query.Reader
	sh     *query.Shape
	schema *arrow.Schema // the answer's schema (series_id and attributes as dictionaries)
	mem    memory.Allocator
	runs   []bool // per column of the schema: assembled as a runColumn
}

// assembled is a row group's columns: cols[i] or runs[i] for column i.
type assembled struct {
	rows   int64
	counts []int // rows of each of the group's series
	cols   []arrow.Array
	runs   []*runColumn
}

func (g *assembled) release() {
	for i := range g.cols {
		if g.cols[i] != nil {
			g.cols[i].Release()
		}
		if g.runs[i] != nil {
			g.runs[i].release()
		}
	}
}

func (a *assembler) assemble(ctx context.Context, g rowGroup) (*assembled, error) {
	data, attrs := a.sh.Data(), a.sh.Attributes()
	attrPos := make([]int, len(attrs))
	for i, c := range attrs {
		attrPos[i] = c.Pos
	}
	ids, vals, err := a.r.Dictionaries(ctx, query.CodeRange(g.lo, g.hi), attrPos, a.mem)
	if err != nil {
		return nil, err
	}
	defer ids.Release()
	defer func() {
		for _, v := range vals {
			v.Release()
		}
	}()
	// The group's pieces and each row's position in the group's series.
	var (
		pieces []query.Piece
		buf    []query.Piece
	)
	counts := make([]int, g.hi-g.lo) // rows of each of the group's series
	rows := 0
	for code := g.lo; code < g.hi; code++ {
		if buf, err = a.r.Rows(code, query.AllPeriods, buf[:0]); err != nil {
			return nil, err
		}
		skip, take := int64(0), int64(-1)
		if code == g.lo {
			skip = g.skip
		}
		if code == g.hi-1 {
			take = g.take
		}
		for _, p := range trimPieces(buf, skip, take) {
			pieces = appendPiece(pieces, p)
			counts[code-g.lo] += int(p.Len())
			rows += int(p.Len())
		}
	}
	n := a.schema.NumFields()
	out := &assembled{rows: int64(rows), counts: counts, cols: make([]arrow.Array, 0, n), runs: make([]*runColumn, 0, n)}
	ok := false
	defer func() {
		if !ok {
			out.release()
		}
	}()
	perSeries := func(v arrow.Array, name string) error {
		col := len(out.cols)
		var (
			c   arrow.Array
			rc  *runColumn
			err error
		)
		if a.runs[col] {
			rc, err = runsOf(a.mem, v)
		} else {
			c, err = dictionaryOf(a.mem, v, counts, rows)
		}
		if err != nil {
			return fmt.Errorf("column %s: %w", name, err)
		}
		out.cols, out.runs = append(out.cols, c), append(out.runs, rc)
		return nil
	}
	if err := perSeries(ids, query.ColSeriesID); err != nil {
		return nil, err
	}
	for _, pos := range append([]int{datafile.ColumnPeriod}, positions(data)...) {
		c, err := concatColumn(a.mem, pieces, pos)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", a.sh.DataSchema().Field(pos).Name, err)
		}
		out.cols, out.runs = append(out.cols, c), append(out.runs, nil)
	}
	for i, v := range vals {
		if err := perSeries(v, attrs[i].Name); err != nil {
			return nil, err
		}
	}
	ok = true
	return out, nil
}

func positions(cols []query.Column) []int {
	out := make([]int, len(cols))
	for i, c := range cols {
		out[i] = c.Pos
	}
	return out
}

// trimPieces drops the first skip rows of ps and keeps take rows (-1: all).
func trimPieces(ps []query.Piece, skip, take int64) []query.Piece {
	var out []query.Piece
	for _, p := range ps {
		if skip >= p.Len() {
			skip -= p.Len()
			continue
		}
		p.Lo += skip
		skip = 0
		if take >= 0 {
			if take == 0 {
				break
			}
			if p.Len() > take {
				p.Hi = p.Lo + take
			}
			take -= p.Len()
		}
		out = append(out, p)
	}
	return out
}

// appendPiece appends p, merged into the last piece when it continues it
// in the same batch (a bare snapshot's series are adjacent), so a group
// within one batch is one zero-copy slice.
func appendPiece(ps []query.Piece, p query.Piece) []query.Piece {
	if n := len(ps); n > 0 && ps[n-1].Rec == p.Rec && ps[n-1].Hi == p.Lo {
		ps[n-1].Hi = p.Hi
		return ps
	}
	return append(ps, p)
}

// concatColumn is column pos of the pieces, end to end: a slice when there
// is one piece, a copy otherwise.
func concatColumn(mem memory.Allocator, ps []query.Piece, pos int) (arrow.Array, error) {
	parts := make([]arrow.Array, len(ps))
	for i, p := range ps {
		parts[i] = array.NewSlice(p.Rec.Column(pos), p.Lo, p.Hi)
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	if len(parts) == 0 {
		return nil, fmt.Errorf("no rows")
	}
	return array.Concatenate(parts, mem)
}

// dictionaryOf is a dictionary array over the group's rows, counts[i]
// rows (of rows in all) of series i in a row, each holding perSeries[i].
// Its dictionary is the distinct non-null values of perSeries (the Parquet
// encoder falls back to plain encoding on a dictionary with repeats), and
// a series whose value is null has null indices. The indices are filled a
// series' run at a time, in a buffer from mem.
func dictionaryOf(mem memory.Allocator, perSeries arrow.Array, counts []int, rows int) (arrow.Array, error) {
	if n := perSeries.Len(); len(counts) != n {
		return nil, fmt.Errorf("%d values for %d series", n, len(counts))
	}
	rc, err := runsOf(mem, perSeries)
	if err != nil {
		return nil, err
	}
	defer rc.release()
	dict, remap := rc.dict, rc.codes
	ibuf := memory.NewResizableBuffer(mem)
	defer ibuf.Release()
	ibuf.Resize(arrow.Int32Traits.BytesRequired(rows))
	idx := arrow.Int32Traits.CastFromBytes(ibuf.Bytes())
	var (
		vbuf  *memory.Buffer
		valid []byte
		nulls int
	)
	pos := 0
	for i, c := range counts {
		run := idx[pos : pos+c]
		k := remap[i]
		if k < 0 {
			if vbuf == nil {
				vbuf = memory.NewResizableBuffer(mem)
				defer vbuf.Release()
				vbuf.Resize(int(bitutil.BytesForBits(int64(rows))))
				valid = vbuf.Bytes()
				bitutil.SetBitsTo(valid, 0, int64(rows), true)
			}
			bitutil.SetBitsTo(valid, int64(pos), int64(c), false)
			nulls += c
			k = 0
		}
		for j := range run {
			run[j] = k
		}
		pos += c
	}
	data := array.NewData(arrow.PrimitiveTypes.Int32, rows, []*memory.Buffer{vbuf, ibuf}, nil, nulls, 0)
	defer data.Release()
	indices := array.MakeFromData(data)
	defer indices.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: perSeries.DataType()}
	return array.NewDictionaryArray(dt, indices, dict), nil
}

// takeRows copies rows keep of a (in that order).
func takeRows(mem memory.Allocator, a arrow.Array, keep []int) (arrow.Array, error) {
	if s, ok := a.(*array.String); ok {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		b.Reserve(len(keep))
		for _, i := range keep {
			b.Append(s.Value(i))
		}
		return b.NewArray(), nil
	}
	b := array.NewBuilder(mem, a.DataType())
	defer b.Release()
	b.Reserve(len(keep))
	for _, i := range keep {
		if err := b.AppendValueFromString(a.ValueStr(i)); err != nil {
			return nil, err
		}
	}
	return b.NewArray(), nil
}

// portableFile is the Parquet file being written: each row group's
// columns that are runs per series encoded here (runchunk.go), the others
// by arrow-go's file writer as a Parquet file of their own (several groups
// at once, each column of a group on its own goroutine: column writers
// share nothing but the allocator), then joined in order into the file
// (joinparquet.go).
type portableFile struct {
	schema *arrow.Schema
	props  *parquet.WriterProperties
	arrow  pqarrow.ArrowWriterProperties
	meta   metadata.KeyValueMetadata
	runs   []bool // per column: encoded as runs
	// The columns arrow-go writes: their schema (as assembled: series_id
	// and attributes as dictionaries) and Parquet schema, their positions
	// in the file's, and whether each is nullable (definition level 1).
	piece     *arrow.Schema
	pieceRoot *schema.GroupNode
	pieceCols []int
	pieceNul  []bool
	chunks    chunkWriter
	join      *groupJoiner
}

// newPortableFile starts on w the file of the answers of schema answer
// (plainSchema's columns), whose last attrs columns are attributes; runs:
// series_id and the utf8 or binary attributes are written as runs (else
// every column through arrow-go).
func newPortableFile(answer *arrow.Schema, attrs int, w io.Writer, mem memory.Allocator, runs bool) (*portableFile, error) {
	sc := plainSchema(answer)
	props := parquet.NewWriterProperties(
		parquet.WithAllocator(mem),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(PortableZstdLevel),
		parquet.WithDictionaryDefault(true),
		// Periods and values are mostly distinct within a row group: a
		// dictionary costs a hash per row and made the file larger.
		parquet.WithDictionaryFor(query.ColPeriod, false),
		parquet.WithDictionaryFor(datafile.ColValue, false),
		parquet.WithStats(true),
		// One batch per column chunk: a dictionary column's indices are
		// buffered once (writePlain slices the other columns).
		parquet.WithBatchSize(PortableMaxRowGroupRows),
		parquet.WithPageIndexEnabled(true),
		parquet.WithDataPageSize(portableDataPageSize),
		parquet.WithMaxRowGroupLength(PortableMaxRowGroupRows),
		parquet.WithSortingColumns([]parquet.SortingColumn{{ColumnIdx: 0}, {ColumnIdx: 1}}),
		parquet.WithCreatedBy("servingsnap portable copy"),
	)
	ap := pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(mem))
	pqschema, err := pqarrow.ToParquet(sc, props, ap)
	if err != nil {
		return nil, err
	}
	// The key-value metadata pqarrow's own writer would write: the
	// schema's metadata and the Arrow schema, so Arrow readers get the
	// exact types back.
	meta := make(metadata.KeyValueMetadata, 0)
	md := sc.Metadata()
	for i, k := range md.Keys() {
		meta.Append(k, md.Values()[i])
	}
	meta.Append("ARROW:schema", base64.StdEncoding.EncodeToString(flight.SerializeSchema(sc, mem)))
	// The file's footer but its row groups: arrow-go's, for a file of
	// none (schema, column orders, metadata, writer).
	var empty bytes.Buffer
	fw, err := file.NewParquetWriterWithError(&empty, pqschema.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta))
	if err == nil {
		err = fw.FlushWithFooter()
	}
	if err != nil {
		return nil, err
	}
	template, err := footerOf(empty.Bytes())
	if err != nil {
		return nil, err
	}
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		return nil, err
	}
	var sorting []format.SortingColumn
	for _, c := range props.SortingColumns() {
		sorting = append(sorting, format.SortingColumn{ColumnIdx: c.ColumnIdx, Descending: c.Descending, NullsFirst: c.NullsFirst})
	}
	pf := &portableFile{schema: sc, props: props, arrow: ap, meta: meta,
		chunks: chunkWriter{codec: codec, level: PortableZstdLevel, maxStats: int(props.MaxStatsSize())},
		join:   newGroupJoiner(w, template, sorting)}
	// Runs: series_id (the first column) and the attributes (after the
	// period and the data columns), as the assembler builds them.
	var fields, plain []arrow.Field
	for i, f := range sc.Fields() {
		perSeries := i == 0 || i >= sc.NumFields()-attrs
		run := runs && perSeries && runEncodable(f.Type) && pqschema.Column(i).MaxRepetitionLevel() == 0
		pf.runs = append(pf.runs, run)
		if !run {
			fields, plain = append(fields, answer.Field(i)), append(plain, f)
			pf.pieceCols = append(pf.pieceCols, i)
			pf.pieceNul = append(pf.pieceNul, f.Nullable)
		}
	}
	pf.piece = arrow.NewSchema(fields, nil)
	ps, err := pqarrow.ToParquet(arrow.NewSchema(plain, nil), props, ap)
	if err != nil {
		return nil, err
	}
	pf.pieceRoot = ps.Root()
	return pf, nil
}

// groupFiles recycles the buffers of the one-group files.
var groupFiles = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encodeGroup encodes an assembled row group: its run columns here, the
// others as a Parquet file of their own in a buffer from groupFiles, their
// columns encoded by up to par goroutines, the costliest first (the plain
// columns: their pages are encoded and compressed on their goroutine; a
// dictionary column's are mostly runs of one index), so no core is left
// idle at the group's end while one long column finishes.
func (p *portableFile) encodeGroup(ctx context.Context, g *assembled, par int) (*encodedGroup, error) {
	e := &encodedGroup{chunks: make([]chunk, len(p.runs)), rows: g.rows, buf: groupFiles.Get().(*bytes.Buffer)}
	e.buf.Reset()
	if err := p.encodeChunks(ctx, g, par, e); err != nil {
		e.release()
		return nil, err
	}
	return e, nil
}

// encodeChunks fills e.chunks: arrow-go's file of the group's other
// columns in e.buf, split into its chunks, and the run columns' chunks.
func (p *portableFile) encodeChunks(ctx context.Context, g *assembled, par int, e *encodedGroup) error {
	cols := make([]arrow.Array, len(p.pieceCols))
	for k, i := range p.pieceCols {
		cols[k] = g.cols[i]
	}
	rec := array.NewRecordBatch(p.piece, cols, g.rows)
	err := p.writeGroup(ctx, e.buf, rec, par)
	rec.Release()
	if err != nil {
		return err
	}
	piece, err := chunksOf(e.buf.Bytes())
	if err != nil {
		return err
	}
	if len(piece) != len(p.pieceCols) {
		return fmt.Errorf("a row group's file holds %d columns, want %d", len(piece), len(p.pieceCols))
	}
	for k, i := range p.pieceCols {
		e.chunks[i] = piece[k]
	}
	for i, run := range p.runs {
		if run {
			f := p.schema.Field(i)
			if e.chunks[i], err = p.chunks.encodeRunChunk(g.runs[i], g.counts, f.Name, f.Nullable); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *portableFile) writeGroup(ctx context.Context, w io.Writer, rec arrow.RecordBatch, par int) error {
	fw, err := file.NewParquetWriterWithError(w, p.pieceRoot, file.WithWriterProps(p.props))
	if err != nil {
		return err
	}
	rgw, err := fw.AppendBufferedRowGroupChecked()
	if err != nil {
		return err
	}
	if err := p.writeColumns(ctx, rgw, rec, par); err != nil {
		rgw.Close()
		fw.Close()
		return err
	}
	if err := rgw.Close(); err != nil {
		return err
	}
	return fw.FlushWithFooter()
}

// writeColumns writes rec's columns to rgw, up to par at once.
func (p *portableFile) writeColumns(ctx context.Context, rgw file.BufferedRowGroupWriter, rec arrow.RecordBatch, par int) error {
	order := make([]int, 0, rec.NumCols())
	for i, col := range rec.Columns() {
		if _, ok := col.(*array.Dictionary); !ok {
			order = append(order, i)
		}
	}
	for i, col := range rec.Columns() {
		if _, ok := col.(*array.Dictionary); ok {
			order = append(order, i)
		}
	}
	var g errgroup.Group
	g.SetLimit(par)
	for _, i := range order {
		col := rec.Column(i)
		g.Go(func() error {
			cw, err := rgw.Column(i)
			if err != nil {
				return err
			}
			var def []int16
			if p.pieceNul[i] {
				def = definitionLevels(col)
			}
			if d, ok := col.(*array.Dictionary); ok {
				if done, err := writeDictionary(cw, d, def); done || err != nil {
					if err != nil {
						return fmt.Errorf("column %s: %w", rec.ColumnName(i), err)
					}
					return flushPages(cw)
				}
			}
			if err := writePlain(ctx, cw, col, def, p.pieceNul[i], &p.arrow); err != nil {
				return fmt.Errorf("column %s: %w", rec.ColumnName(i), err)
			}
			return flushPages(cw)
		})
	}
	return g.Wait()
}

// writePlain writes a column that is not dictionary-encoded in slices of
// portableBatchRows rows: the writer checks the page size after each call,
// so pages stay near the data page size, while a dictionary column's
// indices, handed over in one call, are buffered once per chunk (the
// writer's batch size is a whole row group).
func writePlain(ctx context.Context, cw file.ColumnChunkWriter, col arrow.Array, def []int16, nullable bool, props *pqarrow.ArrowWriterProperties) error {
	wctx := pqarrow.NewArrowWriteContext(ctx, props)
	n := col.Len()
	for lo := 0; lo < n; lo += portableBatchRows {
		hi := min(lo+portableBatchRows, n)
		part := array.NewSlice(col, int64(lo), int64(hi))
		var d []int16
		if def != nil {
			d = def[lo:hi]
		}
		err := pqarrow.WriteArrowToColumn(wctx, cw, part, d, nil, nullable)
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// writeBuffers is the portable copy's default allocator: the Parquet
// writer allocates its page, level and dictionary-index buffers for every
// column chunk (several times the file's size in all).
var writeBuffers bufpool.Recycler

// portableBatchRows is how many rows of a plain column are handed to the
// Parquet writer at once.
const portableBatchRows = 16 << 10

// portableDataPageSize is the data page size: the writer closes a page at
// the first batch that reaches it, so a limit of 1 MiB less one batch of
// float64 values ends a value page at 1 MiB at most, and the writer's
// pooled page buffers (powers of two, zeroed whole when released) stay at
// 1 MiB instead of doubling to 2.
const portableDataPageSize = 1<<20 - portableBatchRows*8

// flushPages encodes and compresses a column's last page here, on the
// column's goroutine, rather than in the row group's Close, which closes
// the columns one after another (the value column's compression would
// otherwise run alone). A plain column's pages are written out; a
// dictionary column's page is kept by the column writer until Close has
// written the dictionary page before it. A dictionary column with no
// values since its last page (the page statistics count them) has no page
// to flush: an empty one would be written.
func flushPages(cw file.ColumnChunkWriter) error {
	if e := cw.CurrentEncoder().Encoding(); e == parquet.Encodings.PlainDict || e == parquet.Encodings.RLEDict {
		st := cw.PageStatistics()
		if st == nil || st.NumValues()+st.NullCount() == 0 {
			return nil
		}
		if f, ok := cw.(interface{ FlushCurrentPage() error }); ok {
			return f.FlushCurrentPage()
		}
		return nil
	}
	if f, ok := cw.(interface{ FlushBufferedDataPages() error }); ok {
		return f.FlushBufferedDataPages()
	}
	return nil
}

// definitionLevels of a flat optional column: 1 for a value, 0 for a
// null. A column without nulls shares one read-only run of ones.
func definitionLevels(a arrow.Array) []int16 {
	if a.NullN() == 0 {
		return allDefined(a.Len())
	}
	def := make([]int16, a.Len())
	for i := range def {
		if a.IsValid(i) {
			def[i] = 1
		}
	}
	return def
}

var (
	onesMu sync.Mutex
	ones   []int16 // all 1; only ever replaced by a longer slice, never written
)

// allDefined is n definition levels of 1, shared: callers only read it.
func allDefined(n int) []int16 {
	onesMu.Lock()
	defer onesMu.Unlock()
	if len(ones) < n {
		o := make([]int16, max(n, 2*len(ones)))
		for i := range o {
			o[i] = 1
		}
		ones = o
	}
	return ones[:n:n]
}

// writeDictionary writes a dictionary column chunk the way pqarrow does
// for a dictionary array (the dictionary page from d's dictionary, the
// data pages from its indices), but without pqarrow's pass over every
// index to find which dictionary entries are used (compute.Unique, the
// largest cost of the copy): dictionaryOf's dictionaries hold only values
// some row uses, so the statistics come from the dictionary alone. It
// reports false when the column is not dictionary-encoded (the caller
// writes it the ordinary way); that is decided before anything is written.
func writeDictionary(cw file.ColumnChunkWriter, d *array.Dictionary, def []int16) (bool, error) {
	type dictEncoder interface {
		PutDictionary(arrow.Array) error
		NumEntries() int
	}
	type indexWriter interface {
		WriteDictIndices(indices arrow.Array, defLevels, repLevels []int16) error
	}
	enc, ok := cw.CurrentEncoder().(dictEncoder)
	iw, ok2 := cw.(indexWriter)
	if e := cw.CurrentEncoder().Encoding(); !ok || !ok2 || (e != parquet.Encodings.PlainDict && e != parquet.Encodings.RLEDict) {
		return false, nil
	}
	dict, indices := d.Dictionary(), d.Indices()
	if err := enc.PutDictionary(dict); err != nil {
		return true, err
	}
	if enc.NumEntries() != dict.Len() {
		return true, fmt.Errorf("dictionary of %d values has repeats (%d distinct)", dict.Len(), enc.NumEntries())
	}
	if st := cw.PageStatistics(); st != nil {
		nonNull := indices.Len() - indices.NullN()
		st.IncNulls(int64(max(len(def)-nonNull, 0)))
		st.IncNumValues(int64(nonNull))
		if err := st.UpdateFromArrow(dict, false); err != nil {
			return true, err
		}
	}
	return true, iw.WriteDictIndices(indices, def, nil)
}

// appendGroup appends a row group encodeGroup encoded, and releases it.
func (p *portableFile) appendGroup(e *encodedGroup) error {
	err := p.join.append(e.chunks, e.rows)
	e.release()
	return err
}

func (p *portableFile) close() error { return p.join.close() }
