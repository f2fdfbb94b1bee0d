package main

import (
	"fmt"
	"path"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
)

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
			st, err := objstore.Open(c.Context, c.String("to"), objstore.S3Config{Endpoint: c.String("s3-endpoint"), Region: c.String("s3-region")})
			if err != nil {
				return cliutil.Usagef("--to: %v", err)
			}
			put, ok := st.(objstore.Putter)
			if !ok {
				return cliutil.Usagef("--to %s: this store cannot be written", c.String("to"))
			}
			side, err := export.PublishCopy(c.Context, ds, id, put, time.Now())
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, side)
			}
			fmt.Fprintf(c.App.Writer, "%s snapshot %d -> %s (%s, %s rows, %s)\n", ds.Name, id,
				st.Location(path.Join(ds.Name, side.Path)), humanBytes(side.Size), count(side.Rows), side.Checksum)
			return nil
		},
	}
}
