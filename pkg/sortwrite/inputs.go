package sortwrite

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/parquetfile"
)

// input is one data file of the table: a Parquet file the builder reads by
// row groups, or (Iceberg) the record batches a table reader handed over,
// one unit of work per batch.
type input struct {
	Rel       string  // path as recorded in lineage (relative to the input when inside it)
	Size      int64   // bytes
	Rows      int64   // rows read: from the footer, less deleted rows
	GroupRows []int64 // rows read per unit (row group or record batch)
	FirstRow  int64   // global row number of the file's first row
	Schema    FileSchema

	src *source.File
	tbl *source.Table
	// Parquet inputs.
	proj     *source.Projection
	rawRows  []int64 // rows per row group before deletes
	rawFirst []int64 // file row of each row group's first row
	// meta is the footer, parsed once by readFooter and handed to every
	// later open of the file: re-parsing it per row group made a build
	// quadratic in row groups per file (1,600 one-row groups: 45 s).
	meta    *metadata.FileMetaData
	deleted []uint64 // deleted row positions in the file, ascending
	// Record inputs: one per unit, released once read.
	records []arrow.RecordBatch
}

// discover lists the table's data files, in the order that decides
// "later" for --on-duplicate=last (see pkg/lake/source).
func discover(tbl *source.Table) []*input {
	ins := make([]*input, len(tbl.Files))
	for i, f := range tbl.Files {
		ins[i] = &input{Rel: f.Rel, Size: f.Size, src: f, tbl: tbl}
	}
	return ins
}

// open opens the input's Parquet file; a local one is memory-mapped when
// mmap is set (row groups are then read without copies into Go buffers).
func (in *input) open(ctx context.Context, mmap bool, extra ...file.ReadOption) (*file.Reader, error) {
	opts := extra
	if in.meta != nil {
		opts = append(opts, file.WithMetadata(in.meta))
	}
	if l, ok := in.tbl.Store.(objstore.Local); ok {
		pf, err := file.OpenParquetFile(l.Location(in.src.Name), mmap, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable Parquet file: %w", in.Rel, err)
		}
		return in.checked(pf)
	}
	f, _, err := in.tbl.Store.Open(ctx, in.src.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.Rel, err)
	}
	pf, err := file.NewParquetReader(f, opts...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a readable Parquet file: %w", in.Rel, err)
	}
	return in.checked(pf) // pf.Close closes f
}

// checked returns pf if every column chunk lies inside the file, and
// closes it otherwise: a reader over a chunk outside it would panic or
// allocate the footer's claimed length. A footer is checked once, when
// readFooter first parses it; later opens reuse it (in.meta) unchecked.
func (in *input) checked(pf *file.Reader) (*file.Reader, error) {
	if in.meta != nil {
		return pf, nil
	}
	if err := parquetfile.CheckChunks(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("%s: %w", in.Rel, err)
	}
	return pf, nil
}

// readFooter opens the file's footer for its row counts and Arrow schema,
// or reads a record input's batches.
func (in *input) readFooter(ctx context.Context) (err error) {
	defer recoverAs(&err, in.Rel)
	if in.tbl.ReadsRecords() {
		recs, err := in.tbl.Records(ctx, in.src)
		if err != nil {
			return err
		}
		in.records = recs
		if len(recs) > 0 {
			in.Schema = FileSchema{Path: in.Rel, Fields: recs[0].Schema().Fields()}
		}
		for _, r := range recs {
			if !r.Schema().Equal(recs[0].Schema()) {
				return fmt.Errorf("%s: record batches with different schemas", in.Rel)
			}
			in.GroupRows = append(in.GroupRows, r.NumRows())
			in.Rows += r.NumRows()
		}
		return nil
	}
	pf, err := in.open(ctx, false)
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return fmt.Errorf("%s: %w", in.Rel, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		return fmt.Errorf("%s: schema: %w", in.Rel, err)
	}
	if sc.NumFields() != pf.MetaData().Schema.NumColumns() {
		return fmt.Errorf("%s: nested columns are not supported (file has %d top-level fields but %d leaf columns)",
			in.Rel, sc.NumFields(), pf.MetaData().Schema.NumColumns())
	}
	if in.proj, err = in.tbl.Project(in.src, sc.Fields()); err != nil {
		return err
	}
	in.Schema = FileSchema{Path: in.Rel, Fields: in.proj.Fields}
	raw := pf.NumRows()
	md := pf.MetaData()
	in.rawRows = make([]int64, pf.NumRowGroups())
	in.rawFirst = make([]int64, pf.NumRowGroups())
	var sum int64
	for g := range in.rawRows {
		in.rawFirst[g] = sum
		in.rawRows[g] = md.RowGroups[g].GetNumRows()
		sum += in.rawRows[g]
	}
	if sum != raw {
		return fmt.Errorf("%s: row groups hold %d rows but the footer says %d", in.Rel, sum, raw)
	}
	if in.deleted, err = in.tbl.Deleted(ctx, in.src, raw); err != nil {
		return err
	}
	in.GroupRows = make([]int64, len(in.rawRows))
	var first int64
	for g, n := range in.rawRows {
		in.GroupRows[g] = n - int64(len(in.deletedIn(first, first+n)))
		first += n
	}
	in.Rows = raw - int64(len(in.deleted))
	in.meta = md
	return nil
}

// deletedIn returns the deleted positions in file rows [lo, hi).
func (in *input) deletedIn(lo, hi int64) []uint64 {
	d := in.deleted
	a := sort.Search(len(d), func(i int) bool { return d[i] >= uint64(lo) })
	b := sort.Search(len(d), func(i int) bool { return d[i] >= uint64(hi) })
	return d[a:b]
}

// checksum hashes the whole input file as stored.
func (in *input) checksum(ctx context.Context) (string, int64, error) {
	f, _, err := in.tbl.Store.Open(ctx, in.src.Name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := fileutil.NewHash()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return fileutil.FormatChecksum(h), n, nil
}

// release drops record batches not read (a failed build).
func (in *input) release() {
	for _, r := range in.records {
		if r != nil {
			r.Release()
		}
	}
	in.records = nil
	in.meta = nil
}

// recoverAs turns a panic inside the Parquet reader (malformed input can
// trigger them) into an error naming the file, so bad input never crashes
// a build.
func recoverAs(err *error, file string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: malformed Parquet file: %v", file, r)
	}
}
