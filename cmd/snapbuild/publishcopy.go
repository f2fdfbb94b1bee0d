package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// copySidecar is the JSON written beside a published portable copy
// (docs/FORMAT.md, "publish-copy"): which snapshot the Parquet file is, so
// an engine's user can tell which vintage they query and check the bytes.
type copySidecar struct {
	Format     string `json:"format"` // copySidecarFormat
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

const copySidecarFormat = "servingsnap.portable-copy"

// publishCopyCommand is "snapbuild publish-copy": put a snapshot's
// portable.parquet where engines read it, a local directory or S3.
func publishCopyCommand() *cli.Command {
	return &cli.Command{
		Name:      "publish-copy",
		Usage:     "copy a snapshot's portable.parquet (built with --portable) to a directory or s3://bucket/prefix",
		ArgsUsage: "ROOT/DATASET",
		Description: `Copies portable.parquet of the snapshot CURRENT names (or --snapshot N) to
TARGET/DATASET/NNNNNN/portable.parquet, checking its checksum against the
manifest while it copies, then writes TARGET/DATASET/portable.json, which
names the snapshot id, the object's path, size, rows and checksum. The
Parquet object of a vintage is never rewritten; portable.json is replaced
last, so whoever follows it finds a complete file. A snapshot built without
--portable has nothing to copy (exit 1).

Examples:
   snapbuild build --input lake/ --out snapshots/PET --portable
   snapbuild publish-copy snapshots/PET --to /srv/parquet
   snapbuild publish-copy snapshots/PET --to s3://bucket/portable --s3-endpoint http://127.0.0.1:9000`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "target `DIR` or s3://bucket/prefix", Required: true},
			&cli.Uint64Flag{Name: "snapshot", Aliases: []string{"s"}, Usage: "copy vintage `N` instead of the one CURRENT names", DefaultText: "CURRENT"},
			&cli.StringFlag{Name: "s3-endpoint", EnvVars: []string{"AWS_ENDPOINT_URL_S3"}, Usage: "S3-compatible endpoint `URL` (path-style addressing); default: AWS"},
			&cli.StringFlag{Name: "s3-region", Usage: "S3 `REGION`; default: from the AWS configuration"},
			&cli.BoolFlag{Name: "json", Usage: "print the sidecar written as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cliutil.Usagef("publish-copy takes one argument: ROOT/DATASET (see snapbuild publish-copy --help)")
			}
			ds, err := dataset.Open(c.Args().Get(0))
			if err != nil {
				return cliutil.Usagef("%v", err)
			}
			if err := ds.CheckExists(); err != nil {
				return err
			}
			id := c.Uint64("snapshot")
			if id == 0 {
				if id, err = ds.CurrentID(); err != nil {
					return err
				}
			} else if err := ds.CheckVintage(id); err != nil {
				return err
			}
			// The lease keeps gc from removing the snapshot mid-copy.
			lease, err := ds.AcquireLease(id)
			if err != nil {
				return err
			}
			defer lease.Release()
			m, err := ds.Load(id)
			if err != nil {
				return err
			}
			pf, ok := m.FileByRole(manifest.RolePortable)
			if !ok {
				return fmt.Errorf("snapshot %d of %s has no portable copy: build it with snapbuild build --portable", id, ds.Name)
			}
			st, err := objstore.Open(c.Context, c.String("to"), objstore.S3Config{Endpoint: c.String("s3-endpoint"), Region: c.String("s3-region")})
			if err != nil {
				return cliutil.Usagef("--to: %v", err)
			}
			put, ok := st.(objstore.Putter)
			if !ok {
				return cliutil.Usagef("--to %s: this store cannot be written", c.String("to"))
			}
			f, err := os.Open(ds.Path(pf.Path))
			if err != nil {
				return err
			}
			defer f.Close()
			rel := path.Join(dataset.FormatID(id), path.Base(pf.Path))
			cr := &checkedReader{r: f, h: fileutil.NewHash(), want: pf.Checksum, size: pf.Size, name: pf.Path}
			if err := put.Put(c.Context, path.Join(ds.Name, rel), cr); err != nil {
				return err
			}
			side := copySidecar{Format: copySidecarFormat, Dataset: ds.Name, SnapshotID: id, Created: m.Created,
				Path: rel, Size: pf.Size, Rows: pf.Rows, RowGroups: pf.Batches, Checksum: pf.Checksum,
				Published: time.Now().UTC().Format(time.RFC3339)}
			b, err := json.MarshalIndent(side, "", "  ")
			if err != nil {
				return err
			}
			b = append(b, '\n')
			if err := put.Put(c.Context, path.Join(ds.Name, "portable.json"), bytes.NewReader(b)); err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, side)
			}
			fmt.Fprintf(c.App.Writer, "%s snapshot %d -> %s (%s, %s rows, %s)\n", ds.Name, id,
				st.Location(path.Join(ds.Name, rel)), humanBytes(pf.Size), count(pf.Rows), pf.Checksum)
			return nil
		},
	}
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
