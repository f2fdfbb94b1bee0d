// Package convert streams a table between Parquet, Arrow IPC and Vortex
// files (and out to CSV), chosen by file extension. It exists so data
// engineers can try the Vortex codec (pkg/vortexio) on their own files with
// one command, and so tables can be turned into Parquet or CSV for other
// engines; Create is the output side, which pkg/export writes through too.
package convert

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/parquetfile"
	"github.com/energyscope/servingsnap/pkg/vortexio"

	"github.com/energyscope/servingsnap/pkg/progress"
)

// Format is a table file format, named by its extension.
type Format string

// Supported formats.
const (
	Parquet Format = "parquet"
	Arrow   Format = "arrow" // Arrow IPC file (or stream, when reading)
	Vortex  Format = "vortex"
	CSV     Format = "csv" // written only
)

// ErrFormat marks a file name whose extension names no format this
// package reads (or writes): a usage error, not bad data.
var ErrFormat = errors.New("unsupported file format")

// formatError is an ErrFormat with its own message.
type formatError string

func (e formatError) Error() string      { return string(e) }
func (formatError) Is(target error) bool { return target == ErrFormat }

// FormatOf maps a path's extension to a format.

func FormatOf(path string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".parquet":
		return Parquet, nil
	case ".arrow", ".ipc", ".feather":
		return Arrow, nil
	case ".vortex", ".vtx":
		return Vortex, nil
	case ".csv":
		return CSV, nil
	default:
		return "", formatError(fmt.Sprintf("%s: unknown extension %q (want .parquet, .arrow, .vortex or .csv)", path, ext))
	}
}

// Stats describe a finished conversion.
type Stats struct {
	Rows    int64  `json:"rows"`
	Batches int    `json:"batches"`
	InSize  int64  `json:"in_bytes"`
	OutSize int64  `json:"out_bytes"`
	From    Format `json:"from"`
	To      Format `json:"to"`
}

// source yields record batches; Next returns io.EOF at the end.
type source interface {
	Schema() *arrow.Schema
	Next() (arrow.RecordBatch, error)
	Close() error
}

// sink consumes record batches.
type sink interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// ConvertWith is Convert reporting rows converted to rep (nil: none). The
// row total is known for Parquet input (its footer); otherwise the bar
// counts rows without a total.
func ConvertWith(ctx context.Context, in, out string, overwrite bool, rep progress.Reporter) (_ *Stats, err error) {
	// The Parquet and IPC readers can panic on malformed input; that is a
	// bad input file, reported as such (the deferred cleanup below still
	// removes the temporary output).
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: malformed input: %v", in, r)
		}
	}()
	from, err := FormatOf(in)
	if err != nil {
		return nil, err
	}
	if from == CSV {
		return nil, formatError(in + ": CSV is an output format only")
	}
	if _, err := FormatOf(out); err != nil {
		return nil, err
	}
	if _, err := os.Stat(out); err == nil && !overwrite {
		return nil, fmt.Errorf("%s exists (pass --overwrite to replace it)", out)
	}
	src, err := openSource(ctx, in, from)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	o, err := Create(out, src.Schema(), overwrite)
	if err != nil {
		return nil, err
	}
	defer o.Abort()
	st := &Stats{From: from, To: o.Format}
	var total int64
	if ps, ok := src.(*parquetSource); ok {
		total = ps.pf.NumRows()
	}
	ph := progress.Or(rep).Phase("convert", total, 0)
	defer ph.Done()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", in, err)
		}
		err = o.Write(rec)
		st.Rows += rec.NumRows()
		st.Batches++
		ph.Add(rec.NumRows(), 0)
		rec.Release()
		if err != nil {
			return nil, err
		}
	}
	if err := o.Close(); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(in); err == nil {
		st.InSize = fi.Size()
	}
	st.OutSize = o.Size
	return st, nil
}

// Output is a table file being written, its format chosen by extension.
// Batches go to a temporary file beside it that Close renames into place
// once complete (after fsync), so the path never holds a half-written
// table; Abort, or a failed Close, removes the temporary file.
type Output struct {
	Format Format
	Rows   int64 // rows written so far
	Size   int64 // bytes of the finished file, set by Close

	path, tmp string
	f         *os.File
	snk       sink          // nil: CreateRaw's output
	raw       *bufio.Writer // CreateRaw's
	done      bool
}

// Raw is where a CreateRaw output's bytes go.
func (o *Output) Raw() io.Writer { return o.raw }

// Create starts writing a table of schema to path. An existing path is
// refused unless overwrite is set.
func Create(path string, schema *arrow.Schema, overwrite bool) (*Output, error) {
	o, err := newOutput(path, overwrite)
	if err != nil {
		return nil, err
	}
	// Hide Close from the sink (pqarrow closes a writer that has one): the
	// file is synced and closed here, after the footer is out.
	if o.snk, err = createSink(struct{ io.Writer }{o.f}, schema, o.Format); err != nil {
		o.Abort()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// CreateRaw is Create for a writer of its own format (export's Parquet
// copy of a whole snapshot): the bytes written to Raw land at path the way
// Create's batches do, complete or not at all.
func CreateRaw(path string, overwrite bool) (*Output, error) {
	o, err := newOutput(path, overwrite)
	if err != nil {
		return nil, err
	}
	o.raw = bufio.NewWriterSize(o.f, 1<<20)
	return o, nil
}

// newOutput checks path and opens its temporary file.
func newOutput(path string, overwrite bool) (*Output, error) {
	f, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil && !overwrite {
		return nil, fmt.Errorf("%s exists (pass --overwrite to replace it)", path)
	}
	o := &Output{Format: f, path: path, tmp: filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")}
	if o.f, err = os.Create(o.tmp); err != nil {
		return nil, err
	}
	return o, nil
}

// Write appends a batch.
func (o *Output) Write(rec arrow.RecordBatch) error {
	if err := o.snk.Write(rec); err != nil {
		return fmt.Errorf("write %s (rows %d..): %w", o.path, o.Rows, err)
	}
	o.Rows += rec.NumRows()
	return nil
}

// Close finishes the file and moves it into place.
func (o *Output) Close() error {
	if o.done {
		return nil
	}
	var err error
	if o.snk != nil {
		err = o.snk.Close()
	} else {
		err = o.raw.Flush()
	}
	if err == nil {
		err = o.f.Sync()
	}
	if err == nil {
		var fi os.FileInfo
		if fi, err = o.f.Stat(); err == nil {
			o.Size = fi.Size()
		}
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.tmp, o.path)
	}
	if err != nil {
		os.Remove(o.tmp)
		o.done = true
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	o.done = true
	return fileutil.SyncDir(filepath.Dir(o.path))
}

// Abort drops an unfinished file; after Close it does nothing.
func (o *Output) Abort() {
	if o.done {
		return
	}
	o.done = true
	o.f.Close()
	os.Remove(o.tmp)
}

func openSource(ctx context.Context, path string, f Format) (source, error) {
	switch f {
	case Parquet:
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := parquetfile.CheckChunks(pf); err != nil {
			pf.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
		if err != nil {
			pf.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			pf.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &parquetSource{pf: pf, rr: rr}, nil
	case Arrow:
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		st, err := fh.Stat()
		if err != nil {
			fh.Close()
			return nil, err
		}
		// arrow-go trusts the lengths in IPC metadata; check them first.
		var head [6]byte
		fh.ReadAt(head[:], 0)
		if string(head[:]) == "ARROW1" {
			if err := arrowfile.CheckFooter(fh, st.Size()); err != nil {
				fh.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			r, err := ipc.NewFileReader(fh, ipc.WithBodySizeLimit(arrowfile.BodySizeLimit))
			if err != nil {
				fh.Close()
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return &ipcFileSource{fh: fh, r: r}, nil
		}
		if err := arrowfile.CheckStreamHead(fh, st.Size()); err != nil {
			fh.Close()
			return nil, fmt.Errorf("%s: neither an Arrow IPC file nor stream: %w", path, err)
		}
		r, err := ipc.NewReader(fh)
		if err != nil {
			fh.Close()
			return nil, fmt.Errorf("%s: neither an Arrow IPC file nor stream: %w", path, err)
		}
		return &ipcStreamSource{fh: fh, r: r}, nil
	case Vortex:
		vf, err := vortexio.OpenFile(path)
		if err != nil {
			return nil, err
		}
		r, err := vf.NewReader(nil, 64<<10)
		if err != nil {
			vf.Close()
			return nil, err
		}
		return &vortexSource{f: vf, r: r}, nil
	}
	return nil, fmt.Errorf("unknown format %q", f)
}

func createSink(w io.Writer, schema *arrow.Schema, f Format) (sink, error) {
	switch f {
	case Parquet:
		props := parquet.NewWriterProperties(
			parquet.WithCompression(compress.Codecs.Zstd),
			parquet.WithMaxRowGroupLength(1<<20),
			parquet.WithDictionaryPageSizeLimit(16<<20), // large dictionaries stay dictionaries
		)
		fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			return nil, err
		}
		return parquetSink{fw}, nil
	case Arrow:
		iw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
		if err != nil {
			return nil, err
		}
		return iw, nil
	case Vortex:
		return vortexio.NewWriter(w, schema, vortexio.WriterOptions{})
	case CSV:
		// A header line, nulls empty, floats in the shortest plain form
		// that reads back exactly, dates as YYYY-MM-DD.
		return &csvSink{csv.NewWriter(w, schema, csv.WithHeader(true), csv.WithNullWriter(""), csv.WithCustomTypeConverter(csvFloats))}, nil
	}
	return nil, fmt.Errorf("unknown format %q", f)
}

// parquetSink gathers batches into row groups of up to 1M rows (one
// encoded row group in memory at a time) instead of one per batch.
type parquetSink struct{ w *pqarrow.FileWriter }

func (s parquetSink) Write(rec arrow.RecordBatch) error { return s.w.WriteBuffered(rec) }
func (s parquetSink) Close() error                      { return s.w.Close() }

type csvSink struct{ w *csv.Writer }

func (s *csvSink) Write(rec arrow.RecordBatch) error { return s.w.Write(rec) }
func (s *csvSink) Close() error                      { s.w.Flush(); return s.w.Error() }

// csvFloats writes floating-point columns as 1234567.5 rather than the
// writer's default 1.2345675e+06.
func csvFloats(typ arrow.DataType, col arrow.Array) ([]string, bool) {
	var bits int
	var val func(i int) float64
	switch a := col.(type) {
	case *array.Float64:
		bits, val = 64, a.Value
	case *array.Float32:
		bits, val = 32, func(i int) float64 { return float64(a.Value(i)) }
	default:
		return nil, false
	}
	out := make([]string, col.Len())
	for i := range out {
		if col.IsNull(i) {
			continue
		}
		v := val(i)
		if a := math.Abs(v); a == 0 || (a >= 1e-6 && a < 1e21) {
			out[i] = strconv.FormatFloat(v, 'f', -1, bits)
		} else {
			out[i] = strconv.FormatFloat(v, 'g', -1, bits)
		}
	}
	return out, true
}

type parquetSource struct {
	pf *file.Reader
	rr pqarrow.RecordReader
}

func (s *parquetSource) Schema() *arrow.Schema { return s.rr.Schema() }
func (s *parquetSource) Next() (arrow.RecordBatch, error) {
	if !s.rr.Next() {
		if err := s.rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return nil, io.EOF
	}
	rec := s.rr.RecordBatch()
	rec.Retain()
	return rec, nil
}
func (s *parquetSource) Close() error { s.rr.Release(); return s.pf.Close() }

type ipcFileSource struct {
	fh *os.File
	r  *ipc.FileReader
	i  int
}

func (s *ipcFileSource) Schema() *arrow.Schema { return s.r.Schema() }
func (s *ipcFileSource) Next() (arrow.RecordBatch, error) {
	if s.i >= s.r.NumRecords() {
		return nil, io.EOF
	}
	rec, err := s.r.RecordBatchAt(s.i)
	s.i++
	return rec, err
}
func (s *ipcFileSource) Close() error { return errors.Join(s.r.Close(), s.fh.Close()) }

type ipcStreamSource struct {
	fh *os.File
	r  *ipc.Reader
}

func (s *ipcStreamSource) Schema() *arrow.Schema { return s.r.Schema() }
func (s *ipcStreamSource) Next() (arrow.RecordBatch, error) {
	if !s.r.Next() {
		if err := s.r.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	rec := s.r.RecordBatch()
	rec.Retain()
	return rec, nil
}
func (s *ipcStreamSource) Close() error { s.r.Release(); return s.fh.Close() }

type vortexSource struct {
	f *vortexio.File
	r *vortexio.Reader
}

func (s *vortexSource) Schema() *arrow.Schema            { return s.r.Schema() }
func (s *vortexSource) Next() (arrow.RecordBatch, error) { return s.r.Next() }
func (s *vortexSource) Close() error                     { return s.f.Close() }
