package sortwrite

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
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

// discover lists the Parquet files below dir in publication order: sorted
// by path with digit runs compared as numbers, so year=999 precedes
// year=1000 and part-2 precedes part-10. That order decides which row is
// "later" for --on-duplicate=last. Hidden files and folders (".", "_"
// prefixes: _SUCCESS, .crc, _delta_log) are skipped.
func discover(dir string) ([]*input, error) {
	// A symlinked input directory is common (a "latest" link); walk what
	// it points to.
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("input %s is not a directory", dir)
	}
	var ins []*input
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(strings.ToLower(name), ".parquet") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		ins = append(ins, &input{Rel: filepath.ToSlash(rel), Abs: p, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list inputs: %w", err)
	}
	if len(ins) == 0 {
		return nil, fmt.Errorf("input %s holds no .parquet files", dir)
	}
	sort.Slice(ins, func(i, j int) bool { return naturalLess(ins[i].Rel, ins[j].Rel) })
	return ins, nil
}

// naturalLess compares strings with runs of ASCII digits compared by value.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, nb := digitRun(a), digitRun(b)
			ta, tb := strings.TrimLeft(a[:na], "0"), strings.TrimLeft(b[:nb], "0")
			if len(ta) != len(tb) {
				return len(ta) < len(tb)
			}
			if ta != tb {
				return ta < tb
			}
			if na != nb {
				return na < nb
			}
			a, b = a[na:], b[nb:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
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
