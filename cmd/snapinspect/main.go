// Command snapinspect shows what a servingsnap dataset holds: a snapshot's
// manifest and schema, the rows and latest values of series, the vintages
// present, and what changed between two of them.
//
// The main function only wires flags to pkg/inspect, where the logic lives.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/energyscope/servingsnap/internal/cliutil"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/pkg/inspect"
)

// version is set at link time by make build and make install (-ldflags
// "-X main.version=$(git describe)"); without it, init reads the version
// the go command stamped into the binary (cliutil.Version).
var version string

func init() { version = cliutil.Version(version) }

// Exit statuses (docs/CLI.md, Conventions).
const (
	exitNotFound = cliutil.ExitFailure // not found, bad snapshot, any failure
	exitFinding  = cliutil.ExitFailure // diff --exit-code: the snapshots differ
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdout, stderr), "summary", args)
}

// usageErr is a command-line mistake: exit status 2.
func usageErr(format string, a ...any) error { return cliutil.Usagef(format, a...) }

// globalFlags are accepted before or after the command name; each command
// gets its own copies (urfave/cli flags hold parse state). history and
// diff, which name no single snapshot, take only --json.
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Uint64Flag{Name: "snapshot", Aliases: []string{"s"}, Usage: "inspect vintage `N` (a snapshot id) instead of the one CURRENT names", DefaultText: "CURRENT"},
		jsonFlag(),
	}
}

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON (field names are stable; see docs/CLI.md)"}
}

func withGlobal(fs ...cli.Flag) []cli.Flag { return append(globalFlags(), fs...) }

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "snapinspect",
		Usage:   "inspect a servingsnap dataset: summary, series rows, latest values, history, diff",
		Version: version,
		UsageText: `snapinspect [--snapshot N] [--json] ROOT/DATASET            summary of a snapshot
snapinspect [global options] ROOT/DATASET COMMAND [options] [arguments]
snapinspect [global options] COMMAND ROOT/DATASET [options] [arguments]`,
		Description: `Without a command, prints a summary of the snapshot CURRENT names (or of
vintage --snapshot N): ids, creation, statistics, files, schemas, attribute
columns, lineage and build options. Flags may come before or after the
other arguments.

Exit status: 0 ok, 1 not found or bad snapshot (diff --exit-code: the
snapshots differ), 2 usage error or a missing dataset or vintage.
Completion: snapinspect completion bash|zsh|fish.

Examples:
   snapinspect snapshots/EIA
   snapinspect snapshots/EIA --snapshot 3 --json
   snapinspect snapshots/EIA series PET.RBRTE.D --from 2024-01 --to 2024-03
   snapinspect snapshots/EIA latest --category Petroleum
   snapinspect snapshots/EIA history
   snapinspect snapshots/EIA diff 1 2`,
		Flags:     globalFlags(),
		ArgsUsage: "ROOT/DATASET",
		Action:    summaryAction(),
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			summaryCommand(),
			seriesCommand(),
			latestCommand(),
			historyCommand(),
			diffCommand(),
			vortexCommand(),
		},
	}
}

// lookup finds the innermost context where flag name was set (a global
// flag may be given before or after the command), or c itself.
func lookup(c *cli.Context, name string) *cli.Context {
	for _, cc := range c.Lineage() {
		if cc.IsSet(name) {
			return cc
		}
	}
	return c
}

func wantJSON(c *cli.Context) bool { return lookup(c, "json").Bool("json") }

// report is what every command prints: text for people, JSON for machines.
type report interface {
	WriteJSON(io.Writer) error
	WriteText(io.Writer) error
}

// emit prints r in the form --json asks for.
func emit(c *cli.Context, r report) error {
	if wantJSON(c) {
		return r.WriteJSON(c.App.Writer)
	}
	return r.WriteText(c.App.Writer)
}

// snapshotFlag is --snapshot: 0 when unset (CURRENT).
func snapshotFlag(c *cli.Context) (uint64, error) {
	cc := lookup(c, "snapshot")
	if !cc.IsSet("snapshot") {
		return 0, nil
	}
	if id := cc.Uint64("snapshot"); id > 0 {
		return id, nil
	}
	return 0, usageErr("--snapshot: snapshot ids start at 1")
}

// noSnapshotFlag rejects --snapshot for commands that name their
// snapshots otherwise.
func noSnapshotFlag(c *cli.Context, why string) error {
	if lookup(c, "snapshot").IsSet("snapshot") {
		return usageErr("%s: --snapshot does not apply (%s)", c.Command.Name, why)
	}
	return nil
}

// datasetArg splits off the ROOT/DATASET argument.
func datasetArg(c *cli.Context, cmd string) (string, []string, error) {
	if c.NArg() == 0 {
		return "", nil, usageErr("%s: missing ROOT/DATASET (see snapinspect %s --help)", cmd, cmd)
	}
	return c.Args().First(), c.Args().Tail(), nil
}

func summaryCommand() *cli.Command {
	return &cli.Command{
		Name:      "summary",
		Usage:     "describe a snapshot (the default when no command is given)",
		ArgsUsage: "ROOT/DATASET",
		Description: `Prints the snapshot's id, parent, creation time and tool; rows, series and
period bounds; every file with its role, tier, format, size, rows, batches and
checksum; the data and index schemas; the per-series attribute columns (with
distinct values and nulls over series); lineage (source, lake snapshot id and
inputs, the first few in text, all with --json or --all-inputs); build options
and the WAL position. If the snapshot's files fail to open, the summary comes
from the manifest alone, says why, and the exit status is 1.

Examples:
   snapinspect snapshots/EIA
   snapinspect summary snapshots/EIA --snapshot 2
   snapinspect snapshots/EIA --json | jq '.files[] | {path, size}'`,
		Flags:  withGlobal(&cli.BoolFlag{Name: "all-inputs", Usage: "list every lineage input in text (default: the first 8)"}),
		Action: summaryAction(),
	}
}

// summaryAction runs the summary. "snapinspect ROOT/DATASET" arrives here
// as "summary ROOT/DATASET" (see cliutil.NormalizeArgs), so a stray word is
// likely a misspelt command.
func summaryAction() cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() == 0 {
			return usageErr("missing ROOT/DATASET (see snapinspect --help)")
		}
		dir, rest := c.Args().First(), c.Args().Tail()
		if _, err := os.Stat(dir); err != nil && len(rest) == 0 {
			if s := cliutil.Suggest(c.App, dir); s != "" {
				// "snapinspect histroy": a misspelt command, not a dataset.
				return usageErr("unknown command %q; did you mean %q? (see snapinspect --help)", dir, s)
			}
		}
		if len(rest) > 0 {
			for _, a := range c.Args().Slice() {
				if s := cliutil.Suggest(c.App, a); s != "" {
					return usageErr("unknown command %q; did you mean %q? (see snapinspect --help)", a, s)
				}
			}
			return usageErr("summary takes one ROOT/DATASET, got %q; the commands are summary, series, latest, history and diff", c.Args().Slice())
		}
		if m, dirs, err := whole(dir); err != nil || m != nil {
			if err != nil {
				return err
			}
			return wholeSummary(c, m, dirs)
		}
		id, err := snapshotFlag(c)
		if err != nil {
			return err
		}
		s, err := inspect.Summarize(dir, id)
		if err != nil {
			return err
		}
		if wantJSON(c) {
			err = s.WriteJSON(c.App.Writer)
		} else {
			opt := inspect.TextOptions{}
			if c.Bool("all-inputs") {
				opt.MaxInputs = -1
			}
			err = s.WriteText(c.App.Writer, opt)
		}
		if err != nil {
			return err
		}
		if s.Error != "" {
			return fmt.Errorf("snapshot %d of %s: %s", s.SnapshotID, s.Dataset, s.Error)
		}
		return nil
	}
}

func seriesCommand() *cli.Command {
	return &cli.Command{
		Name:      "series",
		Usage:     "print the rows of one or more series",
		ArgsUsage: "ROOT/DATASET ID...",
		Description: `Prints the rows of each series (series_id, period, value and the data file's
other columns), series in the order given, rows by period. --from and --to take
any period form (YYYY, YYYY-MM, YYYYMM, YYYY-MM-DD, YYYYMMDD, YYYY-Qn, YYYY-Www)
and are inclusive of the whole period they name: --to 2024 keeps every row up
to 2024-12-31. An unknown id is an error naming it (exit status 1).

Examples:
   snapinspect snapshots/EIA series PET.RBRTE.D
   snapinspect snapshots/EIA series PET.RBRTE.D PET.RWTC.D --from 2024-03-01 --to 2024-03-31
   snapinspect snapshots/EIA series PET.RBRTE.M --from 2020 --format csv > brent.csv
   snapinspect snapshots/EIA series NG.RNGWHHD.M --to 2001-Q2 --json`,
		Flags: withGlobal(
			&cli.StringFlag{Name: "from", Usage: "first `PERIOD` to include"},
			&cli.StringFlag{Name: "to", Usage: "last `PERIOD` to include (all of it)"},
			&cli.StringFlag{Name: "format", Value: inspect.FormatText, Usage: "output `FORMAT`: text (aligned table), csv or json"},
		),
		Action: func(c *cli.Context) error {
			dir, ids, err := datasetArg(c, "series")
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				return usageErr("series: name at least one series id")
			}
			if m, dirs, err := whole(dir); err != nil || m != nil {
				if err != nil {
					return err
				}
				if dir, err = shardOfIDs("series", m, dirs, ids); err != nil {
					return err
				}
			}
			format := strings.ToLower(c.String("format"))
			switch format {
			case inspect.FormatText, inspect.FormatCSV, inspect.FormatJSON:
			default:
				return usageErr("series: --format %q: want text, csv or json", c.String("format"))
			}
			if wantJSON(c) {
				if c.IsSet("format") && format != inspect.FormatJSON {
					return usageErr("series: --json conflicts with --format %s", format)
				}
				format = inspect.FormatJSON
			}
			r, err := inspect.ParseRange(c.String("from"), c.String("to"))
			if err != nil {
				return usageErr("series: %v", err)
			}
			id, err := snapshotFlag(c)
			if err != nil {
				return err
			}
			s, err := inspect.Open(dir, id)
			if err != nil {
				return err
			}
			defer s.Close()
			return inspect.WriteSeries(c.App.Writer, s, ids, r, format)
		},
	}
}

func latestCommand() *cli.Command {
	return &cli.Command{
		Name:      "latest",
		Usage:     "print the latest value, bounds and attributes of series",
		ArgsUsage: "ROOT/DATASET [ID...]",
		Description: `Prints per series: its id, the period and value of its last non-null row,
its first and last period, its row count and its attribute columns, straight
from the index (no data rows are read). Select series by id, by id prefix
(--prefix), by category (--category), or all (--all); --prefix and --category
combine. --category C matches the attribute column "category" when it equals C
or continues it after a '/': Petroleum matches Petroleum/Prices/Spot, not
PetroleumCoke. Unknown ids, a selection matching nothing, or a snapshot without
a category column are errors (exit status 1).

Examples:
   snapinspect snapshots/EIA latest PET.RBRTE.D NG.RNGWHHD.D
   snapinspect snapshots/EIA latest --prefix PET.RWTC.
   snapinspect snapshots/EIA latest --category Petroleum/Prices
   snapinspect snapshots/EIA latest --all --json`,
		Flags: withGlobal(
			&cli.StringFlag{Name: "prefix", Usage: "series whose id starts with `P`"},
			&cli.StringFlag{Name: "category", Usage: "series whose category is `C` or below it (C/...)"},
			&cli.BoolFlag{Name: "all", Usage: "every series"},
		),
		Action: func(c *cli.Context) error {
			dir, ids, err := datasetArg(c, "latest")
			if err != nil {
				return err
			}
			if m, dirs, err := whole(dir); err != nil || m != nil {
				if err != nil {
					return err
				}
				if len(ids) == 0 {
					return wholeOnly("latest", m, dirs)
				}
				if dir, err = shardOfIDs("latest", m, dirs, ids); err != nil {
					return err
				}
			}
			q := inspect.LatestQuery{
				IDs:         ids,
				All:         c.Bool("all"),
				Prefix:      c.String("prefix"),
				HasPrefix:   c.IsSet("prefix"),
				Category:    c.String("category"),
				HasCategory: c.IsSet("category"),
			}
			if len(ids) > 0 && (q.All || q.HasPrefix || q.HasCategory) {
				return usageErr("latest: name series ids or use --prefix/--category/--all, not both")
			}
			if len(ids) == 0 && !q.All && !q.HasPrefix && !q.HasCategory {
				return usageErr("latest: name series ids, or select with --prefix, --category or --all")
			}
			id, err := snapshotFlag(c)
			if err != nil {
				return err
			}
			s, err := inspect.Open(dir, id)
			if err != nil {
				return err
			}
			defer s.Close()
			rep, err := inspect.Latest(s, q)
			if err != nil {
				return err
			}
			return emit(c, rep)
		},
	}
}

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "list the vintages (manifests) present, newest first",
		ArgsUsage: "ROOT/DATASET",
		Description: `Lists every manifest under ROOT/DATASET/manifests: snapshot id, parent,
creation time, rows, series and period bounds, with the one CURRENT names
marked '*'. A manifest that fails to load is listed with its error; that is
not a failure of the command.

Examples:
   snapinspect snapshots/EIA history
   snapinspect history snapshots/EIA --json | jq '.snapshots[] | select(.error != "")'`,
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			dir, rest, err := datasetArg(c, "history")
			if err != nil {
				return err
			}
			if len(rest) > 0 {
				return usageErr("history: unexpected arguments %q", rest)
			}
			if err := noSnapshotFlag(c, "history lists every snapshot"); err != nil {
				return err
			}
			if m, dirs, err := whole(dir); err != nil || m != nil {
				if err != nil {
					return err
				}
				return wholeHistory(c, m, dirs)
			}
			h, err := inspect.LoadHistory(dir)
			if err != nil {
				return err
			}
			return emit(c, h)
		},
	}
}

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "compare two snapshots of the dataset",
		ArgsUsage: "ROOT/DATASET A [B]",
		Description: `Compares snapshot A with snapshot B (default: the one CURRENT names): the
totals first, then every series added, removed or changed (--stat: the
totals only). Rows of a series present in both are
matched by period; a period only in B is an added row, only in A a removed
row, in both with a different value a changed row (nulls equal nulls, NaN
equals NaN). Only period and value are compared, not the other data columns
or the attributes. The two indexes are merged in series_id order, so memory
does not grow with the dataset.

Examples:
   snapinspect snapshots/EIA diff 1 2
   snapinspect snapshots/EIA diff 1            # 1 against CURRENT
   snapinspect snapshots/EIA diff 41 42 --stat --exit-code || echo "42 changed something"
   snapinspect diff snapshots/EIA 3 4 --json | jq .totals`,
		Flags: []cli.Flag{
			jsonFlag(),
			&cli.BoolFlag{Name: "stat", Usage: "print the totals only, not a line per differing series"},
			&cli.BoolFlag{Name: "exit-code", Usage: "exit 1 when the snapshots differ, 0 when they do not (as git diff --exit-code)"},
		},
		Action: func(c *cli.Context) error {
			dir, ids, err := datasetArg(c, "diff")
			if err != nil {
				return err
			}
			if m, dirs, err := whole(dir); err != nil || m != nil {
				if err != nil {
					return err
				}
				return wholeOnly("diff", m, dirs)
			}
			if len(ids) < 1 || len(ids) > 2 {
				return usageErr("diff: want snapshot ids A [B], got %d arguments", len(ids))
			}
			if err := noSnapshotFlag(c, "diff takes its snapshot ids as arguments"); err != nil {
				return err
			}
			var nums [2]uint64
			for i, s := range ids {
				if nums[i], err = parseID(s); err != nil {
					return usageErr("diff: %v", err)
				}
			}
			a, err := inspect.Open(dir, nums[0])
			if err != nil {
				return err
			}
			defer a.Close()
			b, err := inspect.Open(dir, nums[1])
			if err != nil {
				return err
			}
			defer b.Close()
			var t inspect.DiffTotals
			if wantJSON(c) {
				rep, err := inspect.CollectDiff(a, b, c.Bool("stat"))
				if err != nil {
					return err
				}
				if err := rep.WriteJSON(c.App.Writer); err != nil {
					return err
				}
				t = rep.Totals
			} else if t, err = inspect.WriteDiffText(c.App.Writer, a, b, c.Bool("stat")); err != nil {
				return err
			}
			if c.Bool("exit-code") && t.Differ() {
				return cli.Exit("", exitFinding) // like git diff --exit-code: 1 means "different"
			}
			return nil
		},
	}
}

// parseID reads a snapshot id: decimal, ≥ 1, zero padding allowed.
func parseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%q is not a snapshot id (a positive integer)", s)
	}
	return id, nil
}
