package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/progressui"
	"github.com/energyscope/servingsnap/pkg/convert"
)

func convertCommand() *cli.Command {
	return &cli.Command{
		Name:      "convert",
		Usage:     "convert a table between Parquet, Arrow IPC and Vortex (by file extension)",
		ArgsUsage: "IN OUT",
		Description: `Streams IN to OUT batch by batch; the formats come from the extensions
(.parquet, .arrow/.ipc/.feather, .vortex). OUT is written under a temporary
name and renamed into place when complete. Parquet output is zstd with
row groups of up to 1M rows; Arrow output is an uncompressed IPC file.

Examples:
   snapbuild convert lake/year=2024/part-0.parquet /tmp/2024.vortex
   snapbuild convert snapshots/PET/snapshots/000003/data.arrow /tmp/pet.parquet
   snapinspect vortex /tmp/2024.vortex`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "overwrite", Usage: "replace OUT if it exists"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			progressui.Flag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usagef("convert takes two arguments: IN OUT (see snapbuild convert --help)")
			}
			rep, stop, err := progressui.Start(c.String("progress"), c.App.ErrWriter, "convert")
			if err != nil {
				return err
			}
			st, err := convert.ConvertWith(c.Context, c.Args().Get(0), c.Args().Get(1), c.Bool("overwrite"), rep)
			stop()
			if errors.Is(err, convert.ErrFormat) {
				return cliutil.Usagef("%v (see snapbuild convert --help)", err)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, st)
			}
			fmt.Fprintf(c.App.Writer, "%s (%s, %s) -> %s (%s, %s): %s rows in %s batches\n",
				c.Args().Get(0), st.From, humanBytes(st.InSize), c.Args().Get(1), st.To, humanBytes(st.OutSize), count(st.Rows), count(st.Batches))
			return nil
		},
	}
}
