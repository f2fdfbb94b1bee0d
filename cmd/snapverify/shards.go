package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/verify"
)

// verifyWhole verifies every shard of a sharded dataset, then checks that
// each holds only its own series.
func verifyWhole(c *cli.Context, m *shard.Map, dirs []string, opt verify.Options) error {
	if c.IsSet("snapshot") {
		return cli.Exit(fmt.Sprintf("%s is a dataset of %d shards, each with its own snapshot ids: give --snapshot with one shard directory (%s ...)", c.Args().First(), m.Count, dirs[0]), exitUsage)
	}
	if c.IsSet("against") {
		return cli.Exit("--against compares one snapshot with a whole input; a sharded dataset's shards each hold part of it (not supported yet)", exitUsage)
	}
	rep, err := verify.VerifyWhole(m, dirs, opt)
	if err != nil {
		return cli.Exit(err.Error(), exitUsage)
	}
	if c.Bool("json") {
		if err := cliutil.PrintJSON(c.App.Writer, rep); err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
	} else {
		for _, r := range rep.Shards {
			printReport(c.App.Writer, r)
		}
		state := "intact"
		if !rep.OK {
			state = "CORRUPT"
		}
		fmt.Fprintf(c.App.Writer, "%s: %d shards %s\n", m.Dataset, m.Count, state)
	}
	if !rep.OK {
		return cli.Exit("", exitCorrupt)
	}
	return nil
}
