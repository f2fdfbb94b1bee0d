package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/verify"
)

// publishCommand flips CURRENT to a snapshot `build --no-publish` staged,
// once it verifies: the nightly cycle's last step (docs/OPERATIONS.md).
func publishCommand() *cli.Command {
	return &cli.Command{
		Name:      "publish",
		Usage:     "make a snapshot staged by build --no-publish current, after verifying it",
		ArgsUsage: "ROOT/DATASET",
		Description: `build --no-publish writes a complete snapshot (files fsynced, manifest
written) without flipping CURRENT, so no server sees it. Check it with
snapverify --snapshot N (add --deep or --against as the cycle allows), then
publish it: CURRENT flips atomically, HISTORY records a publish, and a
running server picks it up like any build's.

publish re-runs snapverify's fast checks (manifest, sizes, every file's
checksum, Arrow structure) on snapshot N under the dataset's write lock and
refuses, exit 1, when they find anything. N must be newer than CURRENT
(going back is rollback); publishing the snapshot CURRENT already names
changes nothing. --expect-current M publishes only if CURRENT still names
M (what the cycle saw when it started): a rollback or another publish that
landed meanwhile fails it, exit 1, instead of being replaced silently.

Example:
   snapbuild build --input lake/ --out snapshots/PET --no-publish --json   # snapshot_id N
   snapverify snapshots/PET --snapshot N --deep
   snapbuild publish snapshots/PET --id N`,
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "id", Usage: "snapshot `N` to make current (build --no-publish's snapshot_id)", Required: true},
			expectCurrentFlag(),
			lockTimeoutFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print JSON: dataset, from, to, checks"},
		},
		Action: func(c *cli.Context) error {
			id := c.Uint64("id")
			if id == 0 {
				return cliutil.Usagef("--id 0: snapshot ids start at 1")
			}
			d, w, err := lockDataset(c)
			if err != nil {
				return err
			}
			defer w.Close()
			if err := d.CheckVintage(id); err != nil {
				return err
			}
			rep, err := verify.Verify(d.Dir, verify.Options{SnapshotID: id})
			if err != nil {
				return err
			}
			if !rep.OK {
				for _, f := range rep.Findings {
					fmt.Fprintln(c.App.ErrWriter, f.String())
				}
				return cli.Exit(fmt.Sprintf("snapshot %d of %s does not verify (%d findings above): not published; CURRENT is unchanged", id, d.Name, len(rep.Findings)), cliutil.ExitFailure)
			}
			from, err := w.PublishInstalled(id, dataset.Change{Tool: "servingsnap " + version, Expect: c.Uint64("expect-current")})
			if err != nil {
				return err
			}
			if err := followFlip(c.Context, c, d); err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, map[string]any{"dataset": d.Name, "from": from, "to": id, "checks": rep.Checks})
			}
			if from == id {
				fmt.Fprintf(c.App.Writer, "%s: snapshot %d is already CURRENT\n", d.Name, id)
				return nil
			}
			fmt.Fprintf(c.App.Writer, "%s: CURRENT %d -> %d (verified: %s checks)\n", d.Name, from, id, count(rep.Checks))
			return nil
		},
	}
}
