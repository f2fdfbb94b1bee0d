package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"time"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// CopySidecar is the JSON written beside a published portable copy
// (docs/FORMAT.md, "publish-copy"): which snapshot the Parquet file is, so
// an engine's user can tell which vintage they query and check the bytes.
type CopySidecar struct {
	Format     string `json:"format"` // CopySidecarFormat
	Dataset    string `json:"dataset"`
	SnapshotID uint64 `json:"snapshot_id"`
	Created    string `json:"created"` // the snapshot's creation time
	Path       string `json:"path"`    // the Parquet object, relative to the sidecar
	Size       int64  `json:"size"`
	Rows       int64  `json:"rows"`
	RowGroups  int    `json:"row_groups"`
	Checksum   string `json:"checksum"` // xxh64 of the Parquet file, as in the manifest
	Published  string `json:"published"`
}

// CopySidecarFormat names the sidecar's format in its "format" field.
const CopySidecarFormat = "servingsnap.portable-copy"

// CopySidecarName is the sidecar's name under TARGET/DATASET.
const CopySidecarName = "portable.json"

// Putter writes an object of a target store, replacing what was there,
// never leaving a partial object for a reader to see (objstore.Putter).
type Putter interface {
	Put(ctx context.Context, name string, r io.Reader) error
}

// PublishCopy puts snapshot id's portable copy where engines read it:
// DATASET/NNNNNN/portable.parquet of dst, its bytes checked against the
// manifest's size and checksum while they are copied (a damaged copy is
// refused, and the sidecar left as it was), then DATASET/portable.json,
// replaced last, so whoever follows it finds a complete file. The snapshot
// is leased for the copy, so gc cannot remove it meanwhile. published is
// the time the sidecar records.
func PublishCopy(ctx context.Context, ds *dataset.Dir, id uint64, dst Putter, published time.Time) (CopySidecar, error) {
	lease, err := ds.AcquireLease(id)
	if err != nil {
		return CopySidecar{}, err
	}
	defer lease.Release()
	m, err := ds.Load(id)
	if err != nil {
		return CopySidecar{}, err
	}
	pf, ok := m.FileByRole(manifest.RolePortable)
	if !ok {
		return CopySidecar{}, fmt.Errorf("snapshot %d of %s has no portable copy: build it with snapbuild build --portable", id, ds.Name)
	}
	f, err := os.Open(ds.Path(pf.Path))
	if err != nil {
		return CopySidecar{}, err
	}
	defer f.Close()
	rel := path.Join(dataset.FormatID(id), path.Base(pf.Path))
	cr := &checkedReader{r: f, h: fileutil.NewHash(), want: pf.Checksum, size: pf.Size, name: pf.Path}
	if err := dst.Put(ctx, path.Join(ds.Name, rel), cr); err != nil {
		return CopySidecar{}, err
	}
	side := CopySidecar{Format: CopySidecarFormat, Dataset: ds.Name, SnapshotID: id, Created: m.Created,
		Path: rel, Size: pf.Size, Rows: pf.Rows, RowGroups: pf.Batches, Checksum: pf.Checksum,
		Published: published.UTC().Format(time.RFC3339)}
	b, err := json.MarshalIndent(side, "", "  ")
	if err != nil {
		return CopySidecar{}, err
	}
	b = append(b, '\n')
	if err := dst.Put(ctx, path.Join(ds.Name, CopySidecarName), bytes.NewReader(b)); err != nil {
		return CopySidecar{}, err
	}
	return side, nil
}

// checkedReader hashes what it reads and, at the end, fails unless the
// bytes are the size and checksum the manifest records: a copy of a file
// damaged since it was written is refused rather than published.
type checkedReader struct {
	r    io.Reader
	h    hash.Hash64
	n    int64
	want string
	size int64
	name string
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if err == io.EOF {
		if c.n != c.size {
			return n, fmt.Errorf("%s is %d bytes, the manifest says %d: not published", c.name, c.n, c.size)
		}
		if got := fileutil.FormatChecksum(c.h); got != c.want {
			return n, fmt.Errorf("%s has checksum %s, the manifest says %s: damaged, not published", c.name, got, c.want)
		}
	}
	return n, err
}
