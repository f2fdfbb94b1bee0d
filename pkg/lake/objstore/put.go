package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	icebergio "github.com/apache/iceberg-go/io"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// Putter is a store that can also write: snapbuild publish-copy puts a
// snapshot's portable copy where engines read it. Both stores implement
// it; it is an interface of its own because nothing on the build's input
// side writes, and a store that only reads stays a Store.
type Putter interface {
	Store
	// Put writes r to name (relative to the root), replacing what was
	// there. A reader never sees a partial object: a local file is written
	// under a temporary name, fsynced and renamed; an S3 object appears
	// only once its upload completes.
	Put(ctx context.Context, name string, r io.Reader) error
}

// Put writes a local file atomically (temp, fsync, rename, fsync dir),
// creating its directories.
func (l Local) Put(_ context.Context, name string, r io.Reader) error {
	p := l.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", p, err)
	}
	return fileutil.SyncDir(filepath.Dir(p))
}

// Put uploads an object through iceberg-go's blob writer (gocloud's S3
// driver, which completes the upload at Close). gocloud aborts an upload
// only through the writer's context, which iceberg-go holds, so when r
// fails (a read error, or a checksum the reader checks at its end) the
// upload is completed and the object removed again: no object under name
// holds a partial copy once Put returns.
func (s *S3) Put(_ context.Context, name string, r io.Reader) error {
	uri := s.uri(name)
	wio, ok := s.io.(icebergio.WriteFileIO)
	if !ok {
		return fmt.Errorf("write %s: the S3 file IO cannot write", uri)
	}
	w, err := wio.Create(uri)
	if err != nil {
		return fmt.Errorf("write %s: %w", uri, err)
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return errors.Join(fmt.Errorf("write %s", uri), err, s.io.Remove(uri))
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write %s: %w", uri, err)
	}
	return nil
}
