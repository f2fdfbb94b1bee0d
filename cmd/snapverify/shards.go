package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/verify"
)

// checkShardMembership is the one check a whole sharded dataset adds to
// its shards' own: every series of shard i hashes to i (docs/FORMAT.md,
// Shard map), so no series is served by two shards or looked for in the
// wrong one.
const checkShardMembership = "shard-membership"

// wholeReport is `snapverify ROOT/DATASET --json` of a sharded dataset.
type wholeReport struct {
	Dataset string           `json:"dataset"`
	Count   int              `json:"count"`
	OK      bool             `json:"ok"`
	Shards  []*verify.Report `json:"shards"`
}

// verifyWhole verifies every shard of a sharded dataset, then checks that
// each holds only its own series.
func verifyWhole(c *cli.Context, m *shard.Map, dirs []string, opt verify.Options) error {
	if c.IsSet("snapshot") {
		return cli.Exit(fmt.Sprintf("%s is a dataset of %d shards, each with its own snapshot ids: give --snapshot with one shard directory (%s ...)", c.Args().First(), m.Count, dirs[0]), exitUsage)
	}
	if c.IsSet("against") {
		return cli.Exit("--against compares one snapshot with a whole input; a sharded dataset's shards each hold part of it (not supported yet)", exitUsage)
	}
	rep := wholeReport{Dataset: m.Dataset, Count: m.Count, OK: true}
	for i, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			return cli.Exit(fmt.Sprintf("shard %d of %s: %v", i, m.Dataset, err), exitUsage)
		}
		r, err := verify.Verify(d, opt)
		if err != nil {
			return cli.Exit(fmt.Sprintf("shard %d: %v", i, err), exitUsage)
		}
		if r.Opens {
			r.Checks++
			if f := membership(d, m.Spec(i)); f != nil {
				r.Findings = append(r.Findings, *f)
				r.OK, r.Status = false, verify.StatusCorrupt
			}
		}
		rep.OK = rep.OK && r.OK
		rep.Shards = append(rep.Shards, r)
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

// membership finds the first series of shard i's current snapshot that
// belongs to another shard; nil if there is none.
func membership(dir string, sp shard.Spec) *verify.Finding {
	i, n := sp.Index, sp.Count
	s, err := snapshot.Open(dir, snapshot.Options{})
	if err != nil {
		return nil // verify has reported why
	}
	defer s.Close()
	if sh := s.Manifest.Shard; sh == nil || sh.Index != i || sh.Count != n || sh.Hash != sp.HashName() {
		return &verify.Finding{Check: checkShardMembership, File: "manifest", Location: "shard",
			Message: fmt.Sprintf("the shard map makes this shard %d of %d (%s), the manifest says %+v", i, n, sp.HashName(), sh)}
	}
	x := s.Index()
	for k := 0; k < x.Len(); k++ {
		if id := x.SeriesID(k); sp.Of(id) != i {
			return &verify.Finding{Check: checkShardMembership, File: "index.arrow", Location: fmt.Sprintf("series %d", k),
				Message: fmt.Sprintf("series %q belongs to shard %d of %d (%s mod %d), not to shard %d", id, sp.Of(id), n, sp.HashName(), n, i)}
		}
	}
	return nil
}
