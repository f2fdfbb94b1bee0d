package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/inspect"
)

func datasetArg(c *cli.Context) (*dataset.Dir, error) {
	if c.NArg() != 1 {
		return nil, cliutil.Usagef("%s takes one argument, the dataset directory ROOT/DATASET (see snapbuild %s --help)", c.Command.Name, c.Command.Name)
	}
	return dataset.Open(c.Args().First())
}

// lockDataset opens the dataset argument and takes its write lock.
func lockDataset(c *cli.Context) (*dataset.Dir, *dataset.Writer, error) {
	if err := refuseWhole(c); err != nil {
		return nil, nil, err
	}
	d, err := datasetArg(c)
	if err != nil {
		return nil, nil, err
	}
	if err := d.CheckExists(); err != nil {
		return nil, nil, err // do not create the directory of a mistyped path
	}
	w, err := d.LockForWriteWith(c.Context, lockOptions(c, d.Dir))
	if err != nil {
		return nil, nil, err
	}
	return d, w, nil
}

// lockTimeoutFlag is --lock-timeout of the commands that write a dataset.
func lockTimeoutFlag() cli.Flag {
	return &cli.DurationFlag{Name: "lock-timeout", Usage: "give up after `D` when another build, rollback or gc of the dataset holds its lock", DefaultText: "wait as long as it takes"}
}

// lockOptions says on stderr why a writer is waiting, and bounds the wait
// by --lock-timeout.
func lockOptions(c *cli.Context, dir string) dataset.LockOptions {
	return lockOptionsTo(c, dir, c.App.ErrWriter)
}

// lockOptionsTo is lockOptions saying it on w (progressui.Writer while
// bars are drawn).
func lockOptionsTo(c *cli.Context, dir string, w io.Writer) dataset.LockOptions {
	return dataset.LockOptions{
		Timeout: c.Duration("lock-timeout"),
		Waiting: func(pid int) {
			by := "another build, rollback or gc"
			if pid != 0 {
				by = fmt.Sprintf("process %d (a build, rollback or gc)", pid)
			}
			bound := "waiting until it finishes (--lock-timeout bounds the wait)"
			if t := c.Duration("lock-timeout"); t > 0 {
				bound = "waiting up to " + t.String()
			}
			fmt.Fprintf(w, "%s: %s holds the write lock of %s; %s\n", c.App.Name, by, dir, bound)
		},
	}
}

// expectCurrentFlag is --expect-current of the commands that move CURRENT
// from what their caller saw (rollback, publish): the compare-and-swap
// guard of docs/OPERATIONS.md "One truth for a dataset".
func expectCurrentFlag() cli.Flag {
	return &cli.Uint64Flag{Name: "expect-current", Usage: "change CURRENT only if it still names snapshot `M` (else exit 1 naming what moved it)", DefaultText: "no check"}
}

// printJSON prints the one JSON document of --json.
func printJSON(c *cli.Context, v any) error { return cliutil.PrintJSON(c.App.Writer, v) }

func historyCommand() *cli.Command {
	return &cli.Command{
		Name:      "history",
		Usage:     "list a dataset's vintages and the flips of its CURRENT pointer",
		ArgsUsage: "ROOT/DATASET",
		Description: `Every manifest still present is a vintage that can be served or rolled back to.
HISTORY records every CURRENT flip (publish and rollback) with its time. The
same view as "snapinspect ROOT/DATASET history"; --json fields in docs/CLI.md.

Example:
   snapbuild history snapshots/PET`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: func(c *cli.Context) error {
			if m, dirs, err := wholeDataset(c); err != nil || m != nil {
				if err != nil {
					return err
				}
				return wholeHistory(c, m, dirs)
			}
			d, err := datasetArg(c)
			if err != nil {
				return err
			}
			h, err := inspect.LoadHistory(d.Dir)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return h.WriteJSON(c.App.Writer)
			}
			return h.WriteText(c.App.Writer)
		},
	}
}

func rollbackCommand() *cli.Command {
	return &cli.Command{
		Name:      "rollback",
		Usage:     "point CURRENT at an older vintage (atomically) and record it in HISTORY",
		ArgsUsage: "ROOT/DATASET",
		Description: `A running server picks the flip up like any publish. The vintage must still
exist (not garbage-collected) and its manifest must load. --expect-current M
rolls back only if CURRENT still names M (the snapshot you decided to roll
away from): a build or compaction that landed meanwhile fails it, exit 1.

Live writes: the writes no compaction folded yet keep shadowing the vintage
rolled back to; writes that a compaction newer than it folded are not served
(they belong to that compaction's vintage, and come back with a roll forward
to it), now and after any restart (docs/OPERATIONS.md "One truth for a
dataset").

Example:
   snapbuild rollback --to 41 --expect-current 42 --reason "bad nightly input" snapshots/PET`,
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "to", Usage: "snapshot `ID` to make current", Required: true},
			&cli.StringFlag{Name: "reason", Usage: "recorded in HISTORY"},
			expectCurrentFlag(),
			lockTimeoutFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON: dataset, from, to"},
		},
		Action: func(c *cli.Context) error {
			d, w, err := lockDataset(c)
			if err != nil {
				return err
			}
			defer w.Close()
			from, err := w.Rollback(c.Uint64("to"), dataset.Change{Tool: "servingsnap " + version, Reason: c.String("reason"), Expect: c.Uint64("expect-current")})
			if err != nil {
				return err
			}
			if err := followFlip(c.Context, c, d); err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, map[string]any{"dataset": d.Name, "from": from, "to": c.Uint64("to")})
			}
			fmt.Fprintf(c.App.Writer, "%s: CURRENT %d -> %d\n", d.Name, from, c.Uint64("to"))
			return nil
		},
	}
}

func gcCommand() *cli.Command {
	return &cli.Command{
		Name:      "gc",
		Usage:     "delete old vintages: keep CURRENT and the --keep newest others",
		ArgsUsage: "ROOT/DATASET",
		Description: `Keeps CURRENT and the K newest other vintages (--keep 1: one to roll back
to; --keep 0: CURRENT alone) and deletes the rest. A vintage that a running server (or any reader) still has open is never
deleted: readers hold a shared lock on leases/NNNNNN while a snapshot is open,
and gc skips any vintage whose lease it cannot lock exclusively ("in use").
The kernel drops a dead reader's locks, so a crashed server pins nothing.

Examples:
   snapbuild gc --keep 7 snapshots/PET
   snapbuild gc --keep 7 --dry-run --json snapshots/PET`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "keep", Usage: "newest vintages to keep besides CURRENT", Required: true},
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would be removed, remove nothing"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON"},
			lockTimeoutFlag(),
		},
		Action: func(c *cli.Context) error {
			d, w, err := lockDataset(c)
			if err != nil {
				return err
			}
			defer w.Close()
			res, err := w.GC(c.Int("keep"), c.Bool("dry-run"))
			if err != nil {
				return err
			}
			if !res.DryRun && len(res.Removed) > 0 {
				if err := followFlip(c.Context, c, d); err != nil {
					return err
				}
			}
			if c.Bool("json") {
				return printJSON(c, res)
			}
			verb := "removed"
			if res.DryRun {
				verb = "would remove"
			}
			fmt.Fprintf(c.App.Writer, "%s: %s %v (%s), kept %v, in use by a reader %v\n", d.Name, verb, res.Removed, humanBytes(res.FreedBytes), res.Kept, res.InUse)
			return nil
		},
	}
}
