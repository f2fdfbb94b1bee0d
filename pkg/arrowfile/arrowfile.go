// Package arrowfile writes and maps Arrow IPC files the way every
// servingsnap file needs them: uncompressed and dictionary-free so they can
// be memory-mapped and sliced with zero copies, and checksummed while they
// are written so publishing never has to read a file back.
//
// Both the data file and the index sidecar go through it; the read-side
// snapshot package maps them through it.
package arrowfile

import (
	"bufio"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// BodySizeLimit is passed to every IPC reader: a record batch body may be
// larger than arrow-go's 256 MiB default (a 1M-row batch of wide rows, or a
// single long series), and we want that to be a decision, not a failure.
const BodySizeLimit = 1 << 40

// Info describes a finished file.
type Info struct {
	Size     int64
	Rows     int64
	Batches  int
	Checksum string
}

// Writer writes an Arrow IPC file and hashes every byte on the way out.
type Writer struct {
	path string
	f    *os.File
	bw   *bufio.Writer
	cw   *countingWriter
	w    *ipc.FileWriter
	info Info
}

type countingWriter struct {
	w io.Writer
	h hash.Hash64
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// CreateOption changes what Create accepts.
type CreateOption int

// AllowDictionaries lets a file carry dictionary-encoded fields. Only for
// files that are loaded (Load), never for files that are mapped (Map).
const AllowDictionaries CreateOption = 1

// Create starts a new file at path (which must not exist) with schema.
// Dictionary-typed fields are refused unless AllowDictionaries is given:
// arrow-go's mapped reader cannot open files that contain them.
func Create(path string, schema *arrow.Schema, opts ...CreateOption) (*Writer, error) {
	allowDict := false
	for _, o := range opts {
		allowDict = allowDict || o == AllowDictionaries
	}
	for _, f := range schema.Fields() {
		if f.Type.ID() == arrow.DICTIONARY && !allowDict {
			return nil, fmt.Errorf("create %s: column %q is dictionary-encoded; mapped files must not contain dictionaries", path, f.Name)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	h := fileutil.NewHash()
	bw := bufio.NewWriterSize(&writeBehind{f: f}, 1<<20)
	cw := &countingWriter{w: bw, h: h}
	iw, err := ipc.NewFileWriter(cw, ipc.WithSchema(schema), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return &Writer{path: path, f: f, bw: bw, cw: cw, w: iw}, nil
}

// Write appends one record batch.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if err := w.w.Write(rec); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	w.info.Rows += rec.NumRows()
	w.info.Batches++
	return nil
}

// Close writes the footer, flushes and fsyncs the file, and returns its
// size, row and batch counts and checksum.
func (w *Writer) Close() (Info, error) {
	err := w.w.Close()
	if err == nil {
		err = w.bw.Flush()
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Info{}, fmt.Errorf("close %s: %w", w.path, err)
	}
	w.info.Size = w.cw.n
	w.info.Checksum = fileutil.FormatChecksum(w.cw.h)
	return w.info, nil
}

// Abort closes and removes a file that will not be published.
func (w *Writer) Abort() error {
	return errors.Join(w.f.Close(), os.Remove(w.path))
}
