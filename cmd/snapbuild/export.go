package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/convert"
	"github.com/energyscope/servingsnap/pkg/export"
)

// exportCommand is "snapbuild export": the rows of a snapshot as a file
// with series ids and attributes (pkg/export).
func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write a snapshot's rows, with series ids and attributes, to Parquet, CSV or Arrow",
		ArgsUsage: "ROOT/DATASET OUT.{parquet,csv,arrow}",
		Description: `Writes one row per observation: series_id, period, value, the other data
columns, then the series' attribute columns (units, category, ...), in
(series_id, period) order; the format comes from OUT's extension (.parquet
zstd, .csv with a header, .arrow an Arrow IPC file). Reads the snapshot
CURRENT names (or --snapshot N) through the query layer and streams: memory
is one batch plus one Parquet row group, whatever the snapshot's size. OUT is
written under a temporary name and renamed into place when complete.

--from and --to take any period form (2024, 2024-03, 2024-Q1, 2024-03-15)
and include the whole period they name. Without --series, --prefix or
--category every series is exported.

Examples:
   snapbuild export snapshots/EIA eia.parquet
   snapbuild export snapshots/EIA brent.csv --series PET.RBRTE.D --series PET.RBRTE.M --from 2020
   snapbuild export snapshots/EIA petroleum.arrow --category Petroleum --to 2024-Q2
   snapbuild export snapshots/EIA old.parquet --snapshot 3 --json`,
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "series", Usage: "export series `ID` (repeat, or separate with commas)"},
			&cli.StringFlag{Name: "prefix", Usage: "export every series whose id starts with `P`"},
			&cli.StringFlag{Name: "category", Usage: "export every series whose category is `C` or below it (C/...)"},
			&cli.StringFlag{Name: "from", Usage: "first `PERIOD` to include"},
			&cli.StringFlag{Name: "to", Usage: "last `PERIOD` to include (all of it)"},
			&cli.Uint64Flag{Name: "snapshot", Aliases: []string{"s"}, Usage: "export vintage `N` instead of the one CURRENT names", DefaultText: "CURRENT"},
			&cli.BoolFlag{Name: "no-attributes", Usage: "leave the per-series attribute columns out"},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace OUT if it exists"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return cliutil.Usagef("export takes two arguments: ROOT/DATASET OUT (see snapbuild export --help)")
			}
			res, err := export.Export(c.Context, export.Options{
				Dataset:      c.Args().Get(0),
				Out:          c.Args().Get(1),
				Snapshot:     c.Uint64("snapshot"),
				Series:       c.StringSlice("series"),
				Prefix:       c.String("prefix"),
				Category:     c.String("category"),
				From:         c.String("from"),
				To:           c.String("to"),
				NoAttributes: c.Bool("no-attributes"),
				Overwrite:    c.Bool("overwrite"),
			})
			if errors.Is(err, convert.ErrFormat) {
				return cliutil.Usagef("%v (see snapbuild export --help)", err)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, res)
			}
			fmt.Fprintf(c.App.Writer, "%s snapshot %d -> %s (%s): %s rows of %s series, %s in %.2fs\n",
				res.Dataset, res.SnapshotID, res.Out, res.Format, count(res.Rows), count(res.Series), humanBytes(res.Bytes), res.Seconds)
			return nil
		},
	}
}
