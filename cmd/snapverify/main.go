// Command snapverify proves that a published snapshot is intact: CURRENT,
// the manifest, every file's size and checksum and the Arrow structure
// (default), every row against the sort order, the index and the statistics
// (--deep), and the rows of the input lake (--against).
//
// Exit status: 0 intact, 1 corruption found or (--against) rows that
// differ from the input (reported as DIFFERS, not CORRUPT), 2 usage or I/O
// error (see docs/CLI.md). The logic lives in pkg/verify.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/progressui"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/verify"
	_ "github.com/energyscope/servingsnap/pkg/verify/tables" // --against over Delta and Iceberg tables
)

// version is set at link time by make build and make install (-ldflags
// "-X main.version=$(git describe)"); without it, init reads the version
// the go command stamped into the binary (cliutil.Version).
var version string

func init() { version = cliutil.Version(version) }

// Exit statuses (docs/CLI.md, Conventions).
const (
	exitCorrupt = cliutil.ExitFailure
	exitUsage   = cliutil.ExitUsage
)

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs the command with args (args[0] is the program name) and returns
// the exit status. Tests call it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdout, stderr), "", args)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:            "snapverify",
		Usage:           "prove that a servingsnap snapshot is intact",
		UsageText:       "snapverify ROOT/DATASET [--snapshot N] [--deep] [--against INPUT] [--json]",
		Version:         version,
		HideHelpCommand: true,
		Writer:          stdout,
		ErrWriter:       stderr,
		Description: `Verifies the snapshot CURRENT names in the dataset directory ROOT/DATASET, or
the vintage given with --snapshot, and prints one line per problem found
(file, location, check, message), then a summary line.

Checks:
   fast (default)  CURRENT parses and names a manifest; the manifest parses, has a
                   supported version and follows docs/FORMAT.md; every file exists
                   with the recorded size and checksum (the data file included);
                   Arrow footers, schemas, batch and row counts agree with the
                   manifest (snapshot.Open with data verification); every Arrow
                   buffer, string offset and dictionary index of the index and
                   data batches in bounds (before any value is read); attributes
                   and period statistics agree with the index. A tiered snapshot's
                   cold.vortex: its chunks against the manifest, and the index's
                   tier columns (cold_start, cold_rows, cold_*_period) tiling it
                   in series order, in bounds, before each series' hot rows.
   --deep          also reads every row: sorted by (series, period) without
                   repeats, series_code valid and contiguous, every index row
                   (offsets, batch, bounds, latest value) equal to the data,
                   series ids strictly increasing, batches cut at series
                   boundaries and within build.batch_rows, statistics equal;
                   a tiered snapshot's cold rows decoded chunk by chunk against
                   the index, bounds and latest values over both tiers.
   --against DIR   also re-reads the input (a Parquet folder, a Delta or an
                   Iceberg table, as snapbuild build reads it) with the manifest's
                   build options and proves the snapshot holds exactly its rows
                   (row count and a per-series, order-independent hash) and the
                   index's attribute values, naming series missing, extra or
                   different. A difference is not damage (the lake moved on, or
                   a compaction folded live writes in): the snapshot is then
                   reported intact but DIFFERS, with exit status 1.

Exit status: 0 intact, 1 corruption found or DIFFERS from --against, 2 usage or I/O error
(no such dataset directory, unreadable root, unknown --snapshot, unreadable
input lake). A missing or dangling CURRENT, or a missing snapshot file, is
corruption (1); so is any malformed file: snapverify never panics on one. Completion: snapverify completion bash|zsh|fish.

Examples:
   snapverify snapshots/PET
   snapverify snapshots/PET --deep
   snapverify snapshots/PET --snapshot 41 --deep --json
   snapverify snapshots/PET --deep --against lake/PET
   snapverify snapshots/PET --deep            # a sharded PET: every shard, and that each holds only its own series
   snapverify snapshots/PET --json | jq '.findings[] | .file + ": " + .message'`,
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "snapshot", Aliases: []string{"s"}, Usage: "verify snapshot `N` instead of the one CURRENT names", DefaultText: "CURRENT"},
			&cli.BoolFlag{Name: "deep", Aliases: []string{"d"}, Usage: "also check every row against the sort order, the index and the statistics"},
			&cli.StringFlag{Name: "against", Aliases: []string{"a"}, Usage: "also compare the rows with the input `INPUT` (a Parquet folder, a Delta or an Iceberg table)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON (fields: docs/CLI.md)"},
			&cli.IntFlag{Name: "max-findings", Value: verify.DefaultMaxFindings, Usage: "stop after `N` findings (0: no limit)"},
			progressui.Flag(),
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile to `FILE`", Hidden: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit(fmt.Sprintf("want exactly one dataset directory ROOT/DATASET, got %d arguments (see --help)", c.NArg()), exitUsage)
			}
			if p := c.String("cpuprofile"); p != "" {
				f, err := os.Create(p)
				if err != nil {
					return cli.Exit(err.Error(), exitUsage)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return cli.Exit(err.Error(), exitUsage)
				}
				defer pprof.StopCPUProfile()
			}
			max := c.Int("max-findings")
			switch {
			case max < 0:
				return cli.Exit("--max-findings must be ≥ 0", exitUsage)
			case max == 0:
				max = -1
			}
			opt := verify.Options{
				SnapshotID:  c.Uint64("snapshot"),
				Deep:        c.Bool("deep"),
				Against:     c.String("against"),
				MaxFindings: max,
			}
			if m, dirs, err := shard.Whole(c.Args().First()); err != nil || m != nil {
				if err != nil {
					return cli.Exit(err.Error(), exitUsage)
				}
				return verifyWhole(c, m, dirs, opt)
			}
			prog, stop, err := progressui.Start(c.String("progress"), c.App.ErrWriter, "verify")
			if err != nil {
				return err
			}
			opt.Progress = prog
			rep, err := verify.Verify(c.Args().First(), opt)
			stop()
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			if c.Bool("json") {
				if err := cliutil.PrintJSON(stdout, rep); err != nil {
					return cli.Exit(err.Error(), exitUsage)
				}
			} else {
				printReport(stdout, rep)
			}
			if !rep.OK {
				return cli.Exit("", exitCorrupt)
			}
			return nil
		},
	}
}

// printReport writes one line per finding, the notes, and a summary line.
func printReport(w io.Writer, r *verify.Report) {
	for _, f := range r.Findings {
		fmt.Fprintln(w, f.String())
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	var b strings.Builder
	b.WriteString(r.Dataset)
	if r.SnapshotID != 0 {
		fmt.Fprintf(&b, " snapshot %d", r.SnapshotID)
	}
	switch r.Status {
	case verify.StatusIntact:
		b.WriteString(": intact")
	case verify.StatusDiffers:
		fmt.Fprintf(&b, ": intact, DIFFERS from the input: %s difference%s", count(len(r.Findings)), plural(len(r.Findings)))
	default:
		fmt.Fprintf(&b, ": CORRUPT: %s finding%s", count(len(r.Findings)), plural(len(r.Findings)))
	}
	if !r.OK {
		if r.Truncated {
			b.WriteString(" (stopped early)")
		}
	}
	fmt.Fprintf(&b, "; %s check%s (%s", count(r.Checks), plural(r.Checks), r.Level)
	if r.Against != "" {
		b.WriteString(", against " + r.Against)
	}
	b.WriteString(")")
	if r.Manifest != "" {
		fmt.Fprintf(&b, "; %s rows, %s series, %s batches", count(r.Rows), count(r.Series), count(r.Batches))
		if r.ColdChunks > 0 || r.ColdRows > 0 {
			fmt.Fprintf(&b, " (%s rows cold in %s chunks)", count(r.ColdRows), count(r.ColdChunks))
		}
	}
	if r.Against != "" && r.InputFiles > 0 {
		fmt.Fprintf(&b, "; input %s files, %s rows, %s series", count(r.InputFiles), count(r.InputRows), count(r.InputSeries))
	}
	fmt.Fprintf(&b, "; %.2fs", r.Seconds)
	fmt.Fprintln(w, b.String())
}

// count is the one number format for people (docs/CLI.md, Conventions).
func count[T ~int | ~int64](n T) string { return cliutil.Count(int64(n)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
