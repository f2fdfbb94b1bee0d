// Package convert streams a table between Parquet, Arrow IPC and Vortex
// files, chosen by file extension. It exists so data engineers can try the
// Vortex codec (pkg/vortexio) on their own files with one command, and so
// snapshots' Arrow files can be turned into Parquet for other engines.
package convert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/vortexio"
)

// Format is a table file format, named by its extension.
type Format string

// Supported formats.
const (
	Parquet Format = "parquet"
	Arrow   Format = "arrow" // Arrow IPC file (or stream, when reading)
	Vortex  Format = "vortex"
)

// FormatOf maps a path's extension to a format.
func FormatOf(path string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".parquet":
		return Parquet, nil
	case ".arrow", ".ipc", ".feather":
		return Arrow, nil
	case ".vortex", ".vtx":
		return Vortex, nil
	default:
		return "", fmt.Errorf("%s: unknown extension %q (want .parquet, .arrow or .vortex)", path, ext)
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

// Convert streams in to out. out is written under a temporary name and
// renamed into place only when complete; an existing out is refused unless
// overwrite is set.
func Convert(ctx context.Context, in, out string, overwrite bool) (_ *Stats, err error) {
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
	to, err := FormatOf(out)
	if err != nil {
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
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Hide Close from the sink (pqarrow closes a writer that has one): the
	// file is synced and closed here, after the footer is out.
	snk, err := createSink(struct{ io.Writer }{f}, src.Schema(), to)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", out, err)
	}
	st := &Stats{From: from, To: to}
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
		err = snk.Write(rec)
		st.Rows += rec.NumRows()
		st.Batches++
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("write %s (rows %d..): %w", out, st.Rows, err)
		}
	}
	if err := snk.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	ok = true
	if err := fileutil.SyncDir(filepath.Dir(out)); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(in); err == nil {
		st.InSize = fi.Size()
	}
	if fi, err := os.Stat(out); err == nil {
		st.OutSize = fi.Size()
	}
	return st, nil
}

func openSource(ctx context.Context, path string, f Format) (source, error) {
	switch f {
	case Parquet:
		pf, err := file.OpenParquetFile(path, false)
		if err != nil {
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
		return pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	case Arrow:
		iw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
		if err != nil {
			return nil, err
		}
		return iw, nil
	case Vortex:
		return vortexio.NewWriter(w, schema, vortexio.WriterOptions{})
	}
	return nil, fmt.Errorf("unknown format %q", f)
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
