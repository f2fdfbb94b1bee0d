package verify

import (
	"fmt"
	"os"

	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// WholeReport is the verification of a whole sharded dataset: every
// shard's report, in shard order (`snapverify ROOT/DATASET --json`).
type WholeReport struct {
	Dataset string    `json:"dataset"`
	Count   int       `json:"count"`
	OK      bool      `json:"ok"`
	Shards  []*Report `json:"shards"`
}

// VerifyWhole verifies every shard of the sharded dataset m, whose shard
// directories are dirs (shard.Whole), with opt, and checks that each
// holds only its own series (CheckShardMembership). An error (a shard
// directory missing, or one Verify cannot report on) stops it, named by
// its shard.
func VerifyWhole(m *shard.Map, dirs []string, opt Options) (*WholeReport, error) {
	reps, err := shard.EachShard(m, dirs, func(sp shard.Spec, dir string) (*Report, error) {
		if _, err := os.Stat(dir); err != nil {
			return nil, err
		}
		r, err := Verify(dir, opt)
		if err != nil {
			return nil, err
		}
		if r.Opens {
			r.Checks++
			if f := membership(dir, sp); f != nil {
				r.Findings = append(r.Findings, *f)
				r.OK, r.Status = false, StatusCorrupt
			}
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	rep := &WholeReport{Dataset: m.Dataset, Count: m.Count, OK: true, Shards: reps}
	for _, r := range reps {
		rep.OK = rep.OK && r.OK
	}
	return rep, nil
}

// membership finds the first series of shard sp's current snapshot (in
// dir) that belongs to another shard; nil if there is none.
func membership(dir string, sp shard.Spec) *Finding {
	i, n := sp.Index, sp.Count
	s, err := snapshot.Open(dir, snapshot.Options{})
	if err != nil {
		return nil // Verify has reported why
	}
	defer s.Close()
	if sh := s.Manifest.Shard; sh == nil || sh.Index != i || sh.Count != n || sh.Hash != sp.HashName() {
		return &Finding{Check: CheckShardMembership, File: "manifest", Location: "shard",
			Message: fmt.Sprintf("the shard map makes this shard %d of %d (%s), the manifest says %+v", i, n, sp.HashName(), sh)}
	}
	x := s.Index()
	for k := 0; k < x.Len(); k++ {
		if id := x.SeriesID(k); sp.Of(id) != i {
			return &Finding{Check: CheckShardMembership, File: "index.arrow", Location: fmt.Sprintf("series %d", k),
				Message: fmt.Sprintf("series %q belongs to shard %d of %d (%s mod %d), not to shard %d", id, sp.Of(id), n, sp.HashName(), n, i)}
		}
	}
	return nil
}
