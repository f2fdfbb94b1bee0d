package export

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// PortableFile is the portable copy's name inside a snapshot directory
// (docs/FORMAT.md, "portable.parquet").
const PortableFile = "portable.parquet"

func stagedPortable(ctx context.Context, staged string, m *manifest.Manifest, opt PortableOptions) (manifest.File, error) {
	s, err := snapshot.OpenStaged(staged, m, snapshot.Options{})
	if err != nil {
		return manifest.File{}, fmt.Errorf("portable copy: open the staged snapshot: %w", err)
	}
	defer s.Close()
	r, err := query.FromSnapshot(m.Dataset, s)
	if err != nil {
		return manifest.File{}, fmt.Errorf("portable copy: %w", err)
	}
	path := filepath.Join(staged, PortableFile)
	f, err := os.Create(path)
	if err != nil {
		return manifest.File{}, err
	}
	h := fileutil.NewHash()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	res, err := WritePortable(ctx, r, bw, opt)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return manifest.File{}, errors.Join(fmt.Errorf("write %s", PortableFile), err)
	}
	return manifest.File{Path: PortableFile, Role: manifest.RolePortable, Format: manifest.FormatParquet,
		Size: cw.n, Rows: res.Rows, Batches: res.RowGroups, Checksum: fileutil.FormatChecksum(h)}, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// PortableStep is the builder's --portable step (sortwrite.Options.Extra),
// with options (the row group target of --portable-row-group-rows): it
// writes the portable copy of the snapshot a build has just written to
// staged (m is the manifest about to be published, its file paths relative
// to staged) and returns its manifest entry. It reads the staged files back
// through snapshot.OpenStaged and the query layer, the path a server takes,
// so the copy holds exactly the rows a client would be served; the file is
// checksummed while it is written.
func PortableStep(opt PortableOptions) func(context.Context, string, *manifest.Manifest) (manifest.File, error) {
	return func(ctx context.Context, staged string, m *manifest.Manifest) (manifest.File, error) {
		return stagedPortable(ctx, staged, m, opt)
	}
}
