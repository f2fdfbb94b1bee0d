package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/progressui"
	"github.com/energyscope/servingsnap/pkg/lakegen"
)

// genCommand is "snapbuild gen": write a sample Parquet lake, synthetic
// (pkg/lakegen.Generate) or from the real EIA CSVs (lakegen.GenerateEIAWith).
func genCommand() *cli.Command {
	return &cli.Command{
		Name:      "gen",
		Usage:     "generate a sample Parquet lake",
		UsageText: "snapbuild gen --out DIR [--series N] [--from-year Y] [--to-year Y] [--seed S] [options]\nsnapbuild gen --out DIR --eia CSVDIR [--period-as-date] [--overwrite]",
		Description: `Writes hive-style year partitions OUT/year=YYYY/part-N.parquet (parquet-go, zstd,
several row groups per file) with one row per observation and the columns
series_id, period, value, units, frequency, name, category, shaped like EIA
bulk data. Output is byte-identical for the same options and seed.

A series has about 150 rows on average over 2000-2024, so --series 100000
gives about 15 million rows (the benchmark profile).

Examples:
   snapbuild gen --out /tmp/lake                              # demo: 2000 series, ~300k rows
   snapbuild gen --out /tmp/bench --series 100000             # benchmark: ~15M rows
   snapbuild gen --out /tmp/lake --series 500 --from-year 2015 --files-per-year 4
   snapbuild gen --out /tmp/lake --period-as-date --overwrite
   snapbuild gen --out /tmp/eia --eia data/eia-prices         # the ten real EIA series`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "lake directory to write (must be absent or empty unless --overwrite)", Required: true},
			&cli.IntFlag{Name: "series", Value: 2000, Usage: "number of series"},
			&cli.IntFlag{Name: "from-year", Value: lakegen.DefaultFromYear, Usage: "first year partition"},
			&cli.IntFlag{Name: "to-year", Value: lakegen.DefaultToYear, Usage: "last year partition"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "random seed; same options and seed give identical files"},
			&cli.IntFlag{Name: "row-group-rows", Value: lakegen.DefaultRowGroupRows, Usage: "target rows per row group"},
			&cli.IntFlag{Name: "files-per-year", Value: 1, Usage: "files per year partition (part-0, part-1, ...)"},
			&cli.BoolFlag{Name: "period-as-date", Usage: "write period as a Parquet DATE (period start) instead of EIA-style strings"},
			&cli.StringFlag{Name: "eia", Usage: "write the real EIA lake from the CSVs in `DIR` (e.g. data/eia-prices) instead", TakesFile: true},
			&cli.BoolFlag{Name: "overwrite", Usage: "write into a non-empty --out, replacing the year=YYYY directories it writes"},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON: out, files, row_groups, rows, series, bytes, seconds"},
			progressui.Flag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("gen: unexpected arguments %q", c.Args().Slice()), 2)
			}
			out := c.String("out")
			rep, stop, err := progressui.Start(c.String("progress"), c.App.ErrWriter, "gen")
			if err != nil {
				return err
			}
			start := time.Now()
			var sum lakegen.Summary
			if dir := c.String("eia"); dir != "" {
				for _, f := range []string{"series", "from-year", "to-year", "seed", "row-group-rows", "files-per-year"} {
					if c.IsSet(f) {
						stop()
						return cli.Exit(fmt.Sprintf("gen: --%s does not apply to --eia", f), 2)
					}
				}
				sum, err = lakegen.GenerateEIAWith(c.Context, lakegen.EIAOptions{
					CSVDir: dir, Out: out, Overwrite: c.Bool("overwrite"), PeriodAsDate: c.Bool("period-as-date"),
				})
			} else {
				sum, err = lakegen.Generate(c.Context, lakegen.Options{
					Out:          out,
					Series:       c.Int("series"),
					FromYear:     c.Int("from-year"),
					ToYear:       c.Int("to-year"),
					Seed:         c.Int64("seed"),
					RowGroupRows: c.Int("row-group-rows"),
					FilesPerYear: c.Int("files-per-year"),
					PeriodAsDate: c.Bool("period-as-date"),
					Overwrite:    c.Bool("overwrite"),
					Progress:     rep,
				})
			}
			stop()
			if err != nil {
				return err
			}
			secs := time.Since(start).Seconds()
			if c.Bool("json") {
				return printJSON(c, map[string]any{"out": out, "files": sum.Files, "row_groups": sum.RowGroups,
					"rows": sum.Rows, "series": sum.Series, "bytes": sum.Bytes, "seconds": secs})
			}
			fmt.Fprintf(c.App.Writer, "gen: %s: %s files, %s row groups, %s rows, %s series, %s in %.2fs\n",
				out, count(sum.Files), count(sum.RowGroups), count(sum.Rows), count(sum.Series), humanBytes(sum.Bytes), secs)
			return nil
		},
	}
}
