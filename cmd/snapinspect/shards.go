package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/inspect"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// A sharded dataset's directory (ROOT/DATASET holding SHARDS.json) stands
// for the whole: summary and history run over every shard, series goes to
// the shard its ids live in, and the rest name the shard directories.

// whole is the shard map of dir, or nil for an ordinary dataset.
func whole(dir string) (*shard.Map, []string, error) { return shard.Whole(dir) }

func wholeSummary(c *cli.Context, m *shard.Map, dirs []string) error {
	if err := noSnapshotFlag(c, "each shard of "+m.Dataset+" has its own snapshot ids; give one shard directory"); err != nil {
		return err
	}
	out, err := inspect.SummarizeWhole(m, dirs)
	if err != nil {
		return err
	}
	if wantJSON(c) {
		if err := cliutil.PrintJSON(c.App.Writer, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.App.Writer, "%s: %d shards (%s of %s mod %d), %s rows in %s series\n\n",
			m.Dataset, m.Count, m.Hash, m.Key, m.Count, cliutil.Count(out.Rows), cliutil.Count(out.Series))
		for _, s := range out.Shards {
			fmt.Fprintf(c.App.Writer, "shard %d/%d:\n", s.Shard, m.Count)
			if err := s.WriteText(c.App.Writer, inspect.TextOptions{}); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer)
		}
	}
	if failed := out.Failed(); len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return nil
}

func wholeHistory(c *cli.Context, m *shard.Map, dirs []string) error {
	out, err := inspect.LoadWholeHistory(m, dirs)
	if err != nil {
		return err
	}
	if wantJSON(c) {
		return cliutil.PrintJSON(c.App.Writer, out)
	}
	return out.WriteText(c.App.Writer)
}

// shardOfIDs is the one shard directory that holds every id, or a usage
// error naming where each lives.
func shardOfIDs(cmd string, m *shard.Map, dirs []string, ids []string) (string, error) {
	by := map[int][]string{}
	for _, id := range ids {
		i := m.Of(id)
		by[i] = append(by[i], id)
	}
	if len(by) == 1 {
		for i := range by {
			return dirs[i], nil
		}
	}
	var parts []string
	for i := 0; i < m.Count; i++ {
		if l := by[i]; len(l) > 0 {
			parts = append(parts, fmt.Sprintf("%s in %s", strings.Join(l, " "), dirs[i]))
		}
	}
	return "", usageErr("%s: %s is sharded and these ids live in %d shards (%s): run %s once per shard directory", cmd, m.Dataset, len(by), strings.Join(parts, "; "), cmd)
}

// wholeOnly refuses commands that need one lineage on a whole dataset.
func wholeOnly(cmd string, m *shard.Map, dirs []string) error {
	return usageErr("%s: %s is a dataset of %d shards; give one shard directory (%s ... %s)", cmd, m.Dataset, m.Count, dirs[0], dirs[len(dirs)-1])
}
