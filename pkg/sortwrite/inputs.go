package sortwrite

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/energyscope/servingsnap/pkg/lake"
)

// input is one Parquet file of the lake.
type input struct {
	Rel       string  // path relative to the input directory, slash-separated
	Abs       string  // path to open
	Size      int64   // bytes
	Rows      int64   // rows, from the footer
	GroupRows []int64 // rows per row group, from the footer
	FirstRow  int64   // global row number of the file's first row
	Schema    FileSchema
}

// discover lists the inputs in publication order (see pkg/lake).
func discover(dir string) ([]*input, error) {
	files, err := lake.List(dir)
	if err != nil {
		return nil, err
	}
	ins := make([]*input, len(files))
	for i, f := range files {
		ins[i] = &input{Rel: f.Rel, Abs: f.Abs, Size: f.Size}
	}
	return ins, nil
}

// readFooter opens the file's footer for its row counts and Arrow schema.
func (in *input) readFooter() (err error) {
	defer recoverAs(&err, in.Rel)
	pf, err := file.OpenParquetFile(in.Abs, false)
	if err != nil {
		return fmt.Errorf("%s: not a readable Parquet file: %w", in.Rel, err)
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
	in.Schema = FileSchema{Path: in.Rel, Fields: sc.Fields()}
	in.Rows = pf.NumRows()
	in.GroupRows = make([]int64, pf.NumRowGroups())
	var sum int64
	for g := range in.GroupRows {
		in.GroupRows[g] = pf.MetaData().RowGroup(g).NumRows()
		sum += in.GroupRows[g]
	}
	if sum != in.Rows {
		return fmt.Errorf("%s: row groups hold %d rows but the footer says %d", in.Rel, sum, in.Rows)
	}
	return nil
}

// recoverAs turns a panic inside the Parquet reader (malformed input can
// trigger them) into an error naming the file, so bad input never crashes
// a build.
func recoverAs(err *error, file string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: malformed Parquet file: %v", file, r)
	}
}
