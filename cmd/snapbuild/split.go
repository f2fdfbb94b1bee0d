package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/progressui"
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// splitCommand is `snapbuild split`: one part of the two-phase split of an
// unbucketed lake (sortwrite.Split).
func splitCommand() *cli.Command {
	return &cli.Command{
		Name:      "split",
		Usage:     "write each shard's rows of 1/M of a lake's files, for shard builds that then read only their pieces",
		ArgsUsage: " ",
		Description: `The first phase of a sharded build of a lake that is not bucketed by series:
part J of M (--part J/M) reads the J-th of M consecutive ranges of the
input's files (in the order the builder reads them, about equal bytes each)
and writes, for each of the --shards N shards, that shard's rows sorted by
(series id, period) into OUT/shard-000I/part-000J-of-000M.run, with its
manifest (.json, written last) and the part's dictionaries in
OUT/parts/part-000J-of-000M.meta. Run the M parts anywhere that sees OUT
(shared storage), in parallel; then build each shard from its M pieces:

   snapbuild build --from-split OUT --shard I/N --out ROOT/DATASET

which reads no lake file and writes the very bytes a --shard I/N build of
the lake writes. The lake is read once by the parts and the pieces once by
the shards (about twice the lake in all, where N shard builds of the lake
read it N times). Every part also reads the footers of the other parts'
files, for the unified schema. Parquet folders and Delta tables split; an
Iceberg table is refused (bucket it by series id instead:
--shard-function iceberg-bucket). A part run again replaces its pieces.
--shards and --shard-function must be those of the shard builds.

Examples:
   snapbuild split --input lake/ --shards 4 --part 0/2 --out /shared/split
   snapbuild split --input s3://bucket/lake --shards 16 --part $JOB_COMPLETION_INDEX/8 --out /shared/split --json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "the table: a Parquet folder or Delta table `DIR` (or s3://bucket/prefix)"},
			&cli.BoolFlag{Name: "raw-files", Usage: "read a Delta table directory's Parquet files as a plain folder (every file, whatever the log says)"},
			&cli.Int64Flag{Name: "table-version", Usage: "Delta: split version `N` instead of the latest", DefaultText: "latest"},
			&cli.StringFlag{Name: "as-of", Usage: "Delta: split the latest version committed at or before `TIME` (RFC 3339, or YYYY-MM-DD[THH:MM:SS] in UTC)"},
			&cli.StringFlag{Name: "s3-endpoint", EnvVars: []string{"AWS_ENDPOINT_URL_S3"}, Usage: "S3-compatible endpoint `URL` (path-style addressing); default: AWS"},
			&cli.StringFlag{Name: "s3-region", Usage: "S3 `REGION`; default: from the AWS configuration (AWS_REGION, ~/.aws/config)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "split directory `DIR` on storage every shard job sees", Required: true, TakesFile: true},
			&cli.IntFlag{Name: "shards", Usage: "the number of shards `N` the pieces are cut for", Required: true},
			&cli.StringFlag{Name: "part", Usage: "the part `J/M` to write (J may be $JOB_COMPLETION_INDEX)", Required: true},
			&cli.StringFlag{Name: "shard-function", Value: shard.HashXXH64, Usage: "the series' shard is `F`(series id) mod N, F " + shard.HashXXH64 + " or " + shard.HashIcebergBucket + ": the shard builds' --shard-function"},
			&cli.StringFlag{Name: "series-column", Value: "series_id", Usage: "input column holding the series id"},
			&cli.StringFlag{Name: "period-column", Value: "period", Usage: "input column holding the period"},
			&cli.StringFlag{Name: "value-column", Value: "value", Usage: "input column holding the numeric value"},
			&cli.BoolFlag{Name: "mixed-period-types", Usage: "accept a period column that is integer in some files and text or a date in others"},
			&cli.StringFlag{Name: "memory", Usage: "memory budget `SIZE` (512MiB, 6GiB): the part's rows are sorted in runs of that size", DefaultText: "90% of available memory"},
			&cli.IntFlag{Name: "parallel", Usage: "reader goroutines", DefaultText: "number of CPUs"},
			&cli.BoolFlag{Name: "json", Usage: "print the summary as JSON"},
			progressui.Flag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cliutil.Usagef("split: unexpected arguments %q", c.Args().Slice())
			}
			if c.String("input") == "" {
				return cliutil.Usagef("an --input is required")
			}
			part, err := shard.ParseSpec(c.String("part"), nil)
			if err != nil {
				return cliutil.Usagef("--part: %v", err)
			}
			n := c.Int("shards")
			if n < 1 || n > shard.MaxShards {
				return cliutil.Usagef("--shards %d: want a shard count from 1 to %d", n, shard.MaxShards)
			}
			hash := c.String("shard-function")
			if _, err := shard.Func(hash); err != nil {
				return cliutil.Usagef("--%v", err)
			}
			lake, err := lakeOptions(c)
			if err != nil {
				return cliutil.Usagef("%v", err)
			}
			var memory int64
			if m := c.String("memory"); m != "" {
				if memory, err = cliutil.ParseSize(m); err != nil || memory <= 0 {
					return cliutil.Usagef("--memory %q: want a positive size such as 512MiB or 6GiB", m)
				}
			}
			opt := sortwrite.Options{
				Input:            c.String("input"),
				Lake:             lake,
				SeriesColumn:     c.String("series-column"),
				PeriodColumn:     c.String("period-column"),
				ValueColumn:      c.String("value-column"),
				MixedPeriodTypes: c.Bool("mixed-period-types"),
				MemoryLimit:      memory,
				Parallel:         c.Int("parallel"),
				Tool:             "servingsnap " + version,
				Shard:            shard.Spec{Count: n, Hash: hash},
			}
			ctx, stopSignals := interruptible(c.Context)
			defer stopSignals()
			rep, stop, err := progressui.Start(c.String("progress"), c.App.ErrWriter, "split")
			if err != nil {
				return err
			}
			opt.Progress = rep
			sum, err := sortwrite.Split(ctx, opt, part, c.String("out"))
			stop()
			if errors.Is(err, source.ErrUsage) {
				return cliutil.Usagef("%v (see snapbuild split --help)", err)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, sum)
			}
			printSplit(c.App.Writer, sum)
			return nil
		},
	}
}

func printSplit(w io.Writer, s *sortwrite.SplitSummary) {
	fmt.Fprintf(w, "part %d/%d of %s for %d shards (%s) in %s\n", s.Part, s.Parts, s.Lineage.Source, s.Shards, s.ShardFunction, s.Dir)
	fmt.Fprintf(w, "  inputs      %s of %s files, %s (read %s with the other files' footers)\n",
		count(int64(s.Inputs)), count(int64(s.Files)), humanBytes(s.InputBytes), humanBytes(s.BytesRead))
	fmt.Fprintf(w, "  rows        %s in %d runs\n", count(s.Rows), s.Runs)
	fmt.Fprintf(w, "  pieces      %d, %s\n", len(s.Pieces), humanBytes(s.PieceBytes))
	fmt.Fprintf(w, "  seconds     %.2f, peak RSS %s\n", s.Seconds, humanBytes(s.PeakRSS))
}

// checkFromSplit checks build's input flags: --input (or a catalog), or
// --from-split with --shard or --shards and no input.
func checkFromSplit(c *cli.Context) error {
	if !c.IsSet("from-split") {
		if c.String("input") == "" && c.String("catalog-uri") == "" {
			return cli.Exit("an --input (or --catalog-uri with --table) is required", 2)
		}
		return nil
	}
	if c.String("input") != "" || c.String("catalog-uri") != "" {
		return cliutil.Usagef("--from-split reads the pieces instead of the input: drop --input")
	}
	if !c.IsSet("shard") && !c.IsSet("shards") {
		return cliutil.Usagef("--from-split builds shards: give --shard I/N (or --shards N)")
	}
	return nil
}
