package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/inspect"
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// shardedSummary is `build --shards/--shard --json`: the shard map and one
// build summary per shard built.
type shardedSummary struct {
	Dataset  string              `json:"dataset"`
	ShardMap string              `json:"shard_map"`
	Count    int                 `json:"count"`
	Shards   []shardBuildSummary `json:"shards"`
}

type shardBuildSummary struct {
	Index int `json:"index"`
	*sortwrite.Summary
}

// buildShards runs `build --shards N` (every shard, one after another, each
// reading the whole input) or `build --shard I/N` (one). The shard map is
// written first (or checked, if an earlier job wrote it), so a dataset
// directory never holds shards of two different splits.
func buildShards(ctx context.Context, c *cli.Context, opt sortwrite.Options) error {
	if c.IsSet("shards") && c.IsSet("shard") {
		return cli.Exit("give --shards N (all shards) or --shard I/N (one), not both", 2)
	}
	var specs []shard.Spec
	if c.IsSet("shards") {
		n := c.Int("shards")
		if n < 1 || n > shard.MaxShards {
			return cli.Exit(fmt.Sprintf("--shards %d: want a shard count from 1 to %d", n, shard.MaxShards), 2)
		}
		for i := 0; i < n; i++ {
			specs = append(specs, shard.Spec{Index: i, Count: n})
		}
	} else {
		s, err := shard.ParseSpec(c.String("shard"), nil)
		if err != nil {
			return cli.Exit("--"+err.Error(), 2)
		}
		specs = []shard.Spec{s}
	}
	hash := c.String("shard-function")
	if _, err := shard.Func(hash); err != nil {
		return cli.Exit("--"+err.Error(), 2)
	}
	for i := range specs {
		specs[i].Hash = hash
	}
	if c.IsSet("shard-by-partition") {
		p, err := shard.ParsePartition(c.String("shard-by-partition"))
		if err != nil {
			return cli.Exit("--"+err.Error(), 2)
		}
		if err := p.Fits(specs[0]); err != nil {
			return cli.Exit("--"+err.Error(), 2)
		}
		opt.ShardPartition = p
	}
	out := filepath.Clean(opt.Out)
	if err := refuseUnsharded(out); err != nil {
		return err
	}
	m, err := shard.Ensure(out, specs[0].Count, hash)
	if err != nil {
		return err
	}
	res := shardedSummary{Dataset: m.Dataset, ShardMap: filepath.Join(out, shard.MapFile), Count: m.Count}
	unchanged := 0
	for _, s := range specs {
		o := opt
		o.Out = shard.ShardDir(out, s.Index)
		o.Shard = s
		o.Lock = lockOptions(c, o.Out)
		sum, err := sortwrite.Build(ctx, o)
		switch {
		case errors.Is(err, sortwrite.ErrUnchanged):
			unchanged++
		case errors.Is(err, source.ErrUsage):
			return cliutil.Usagef("%v (see snapbuild build --help)", err)
		case err != nil:
			return fmt.Errorf("shard %s: %w", s, err)
		}
		res.Shards = append(res.Shards, shardBuildSummary{Index: s.Index, Summary: sum})
		if !c.Bool("json") {
			fmt.Fprintf(c.App.Writer, "shard %s of %s:\n", s, m.Dataset)
			if sum.Unchanged {
				fmt.Fprintf(c.App.Writer, "unchanged: snapshot %d was built from this table snapshot; nothing built\n", sum.SnapshotID)
			} else {
				printSummary(c.App.Writer, sum)
			}
		}
	}
	if c.Bool("json") {
		if err := printJSON(c, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.App.Writer, "shard map %s: %d shards\n", res.ShardMap, m.Count)
	}
	if unchanged == len(specs) {
		return cli.Exit("", exitUnchanged)
	}
	return nil
}

// refuseUnsharded stops a sharded build over a dataset directory that is
// an ordinary (unsharded) dataset: its CURRENT would sit beside a shard map.
func refuseUnsharded(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, dataset.CurrentFile)); err == nil {
		return fmt.Errorf("%s is an unsharded dataset (it has a CURRENT); build the shards under a new dataset name", dir)
	}
	return nil
}

// refuseSharded stops an unsharded build over a sharded dataset's
// directory (one holding a shard map).
func refuseSharded(dir string) error {
	m, err := shard.ReadMap(filepath.Clean(dir))
	if errors.Is(err, shard.ErrNoMap) {
		return nil
	}
	if err != nil {
		return err
	}
	return cli.Exit(fmt.Sprintf("%s is a dataset of %d shards (%s); build it with --shards %d or --shard I/%d",
		dir, m.Count, shard.MapFile, m.Count, m.Count), 2)
}

// wholeDataset is the shard map of a sharded dataset directory given as
// the command's one argument, and its shard directories; nil if the
// argument is an ordinary dataset.
func wholeDataset(c *cli.Context) (*shard.Map, []string, error) {
	if c.NArg() != 1 {
		return nil, nil, nil // datasetArg says what is wrong
	}
	return shard.Whole(c.Args().First())
}

// wholeHistory is `history` of a sharded dataset: every shard's, in order.
func wholeHistory(c *cli.Context, m *shard.Map, dirs []string) error {
	out, err := inspect.LoadWholeHistory(m, dirs)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c, out)
	}
	return out.WriteText(c.App.Writer)
}

// refuseWhole stops a command that acts on one lineage (rollback, gc) from
// being given a whole sharded dataset: each shard has its own snapshot ids.
func refuseWhole(c *cli.Context) error {
	m, dirs, err := wholeDataset(c)
	if err != nil || m == nil {
		return err
	}
	return cliutil.Usagef("%s is a dataset of %d shards, each with its own snapshot ids: %s one shard directory (%s ...)",
		c.Args().First(), m.Count, c.Command.Name, dirs[0])
}
