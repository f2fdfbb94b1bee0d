package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/pkg/compact"
)

// compactCommand is "snapbuild compact": fold a dataset's live writes (its
// WAL) into the next snapshot when no server runs on it.
func compactCommand() *cli.Command {
	return &cli.Command{
		Name:      "compact",
		Usage:     "fold a dataset's live writes (its WAL) into the next snapshot, with no server running",
		ArgsUsage: "ROOT/DATASET",
		Description: `Replays the WAL records after the position CURRENT's manifest folded in,
writes the snapshot's rows merged with them (the newest write wins for a
series and period) as the next snapshot, flips CURRENT to it, and deletes
the WAL segments it folded in. A running server holds the WAL's lock: then
use its compact action (DoAction "compact"); builds and compactions queue on
the dataset's lock. Nothing to fold in exits 0 with result "nothing".

--discard sets the live writes aside instead (wal/ is renamed to
wal.discarded-TIME/, never deleted, and the new log's checkpoint lies past
it; HISTORY records a discard): the way to drop delta rows that a lake
build made obsolete with the server stopped. A running server discards with
DoAction "discard", or a build can retire them with --supersede-writes
(docs/OPERATIONS.md "One truth for a dataset").

Examples:
   snapbuild compact snapshots/PET
   snapbuild compact --discard snapshots/PET`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the result as one JSON object"},
			&cli.BoolFlag{Name: "discard", Usage: "set the live writes aside (rename wal/) instead of folding them in"},
			&cli.StringFlag{Name: "reason", Usage: "with --discard: recorded in HISTORY"},
		},
		Action: func(c *cli.Context) error {
			d, err := datasetArg(c)
			if err != nil {
				return err
			}
			if err := d.CheckExists(); err != nil {
				return err // a mistyped path: exit 2, naming it
			}
			if c.Bool("discard") {
				to, err := compact.Discard(c.Args().First(), "servingsnap "+version, c.String("reason"), time.Now())
				if err != nil {
					return fmt.Errorf("compact --discard: %w", err)
				}
				fmt.Fprintf(c.App.Writer, "compact: live writes set aside in %s\n", to)
				return nil
			}
			res, err := compact.Offline(c.Context, c.Args().First(), compact.Options{Tool: "servingsnap " + version})
			result := "compacted"
			if errors.Is(err, compact.ErrNothing) {
				result, err = "nothing", nil
			}
			if err != nil {
				return fmt.Errorf("compact: %w", err)
			}
			if c.Bool("json") {
				b, _ := json.Marshal(map[string]any{"result": result, "snapshot_id": res.SnapshotID, "parent_id": res.ParentID,
					"rows": res.Rows, "series": res.Series, "wal_position": res.WALPosition, "seconds": res.Duration.Seconds()})
				fmt.Fprintln(c.App.Writer, string(b))
				return nil
			}
			if result == "nothing" {
				fmt.Fprintf(c.App.Writer, "compact: nothing to fold in; CURRENT stays %d\n", res.SnapshotID)
				return nil
			}
			fmt.Fprintf(c.App.Writer, "compact: snapshot %d (from %d + wal through %d): %d rows, %d series in %.2f s\n",
				res.SnapshotID, res.ParentID, res.WALPosition, res.Rows, res.Series, res.Duration.Seconds())
			return nil
		},
	}
}
