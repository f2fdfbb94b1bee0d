package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "cook a serving snapshot from a folder of Parquet files",
		ArgsUsage: " ",
		Description: `Reads every Parquet file under --input (hive year=N folders or flat), sorts all
rows by (series id, period), and publishes a new snapshot of the dataset at
--out (ROOT/DATASET): data.arrow, index.arrow and a manifest, made visible by
an atomic flip of ROOT/DATASET/CURRENT. A second build makes the next
snapshot, with the previous one as its parent.

Examples:
   snapbuild build --input lake/ --out snapshots/PET
   snapbuild build --input lake/ --out snapshots/PET --period-column date --on-duplicate=last --json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "lake `DIR` of Parquet files", Required: true},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "dataset directory `ROOT/DATASET`", Required: true},
			&cli.StringFlag{Name: "series-column", Value: "series_id", Usage: "input column holding the series id"},
			&cli.StringFlag{Name: "period-column", Value: "period", Usage: "input column holding the period (date, timestamp or YYYY[-MM[-DD]], YYYY-Qn, YYYY-Www strings)"},
			&cli.StringFlag{Name: "value-column", Value: "value", Usage: "input column holding the numeric value"},
			&cli.StringFlag{Name: "on-duplicate", Value: "error", Usage: "what to do with two rows of one (series, period): `error` or last (keep the later input's row)"},
			&cli.IntFlag{Name: "batch-rows", Value: datafile.DefaultBatchRows, Usage: "target rows per data record batch (cut at series boundaries)"},
			&cli.IntFlag{Name: "parallel", Usage: "reader goroutines", DefaultText: "number of CPUs"},
			&cli.BoolFlag{Name: "json", Usage: "print the summary as JSON"},
			lockTimeoutFlag(),
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile to `FILE`", Hidden: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("build takes no arguments, got %q (use --input and --out)", c.Args().Slice()), 2)
			}
			if p := c.String("cpuprofile"); p != "" {
				f, err := os.Create(p)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			sum, err := sortwrite.Build(c.Context, sortwrite.Options{
				Input:        c.String("input"),
				Out:          c.String("out"),
				SeriesColumn: c.String("series-column"),
				PeriodColumn: c.String("period-column"),
				ValueColumn:  c.String("value-column"),
				OnDuplicate:  c.String("on-duplicate"),
				BatchRows:    c.Int("batch-rows"),
				Parallel:     c.Int("parallel"),
				Tool:         "servingsnap " + version,
				Lock:         lockOptions(c, c.String("out")),
			})
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, sum)
			}
			printSummary(c.App.Writer, sum)
			return nil
		},
	}
}

func printSummary(w io.Writer, s *sortwrite.Summary) {
	fmt.Fprintf(w, "snapshot %d of %s (parent %d): %s\n", s.SnapshotID, s.Dataset, s.ParentID, s.Manifest)
	fmt.Fprintf(w, "  rows        %s in %s series (%s duplicates dropped)\n", count(s.Rows), count(s.Series), count(s.DuplicatesDropped))
	fmt.Fprintf(w, "  inputs      %s files, %s\n", count(s.Inputs), humanBytes(s.InputBytes))
	fmt.Fprintf(w, "  data cols   %s\n", strings.Join(s.DataColumns, ", "))
	fmt.Fprintf(w, "  attributes  %s\n", strings.Join(s.Attributes, ", "))
	for _, f := range s.Files {
		fmt.Fprintf(w, "  %-11s %s (%s)\n", f.Role, f.Path, humanBytes(f.Size))
	}
	fmt.Fprintf(w, "  index/data  %.2f%%\n", 100*s.IndexDataRatio)
	p := s.Phases
	fmt.Fprintf(w, "  time        %.2fs (scan %.2fs, read %.2fs, sort %.2fs, write %.2fs, publish %.2fs)\n",
		s.Seconds, p.Scan, p.Read, p.Sort, p.Write, p.Publish)
}

// The one number format for people (docs/CLI.md, Conventions).
func humanBytes(n int64) string { return cliutil.Bytes(n) }

func count[T ~int | ~int64](n T) string { return cliutil.Count(int64(n)) }
