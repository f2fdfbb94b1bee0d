package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestVerifyWhole: every shard verified, in order, with the membership
// check on top of its own; a shard holding another's series is corrupt,
// and a missing shard directory stops the walk, named.
func TestVerifyWhole(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(t.Context(), lakegen.Options{Out: lake, Series: 20, FromYear: 2020, ToYear: 2021, Seed: 6, RowGroupRows: 4096}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "PET")
	m, err := shard.Ensure(out, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	build := func(dirIndex, shardIndex int) {
		testsnap.Build(t, lake, shard.ShardDir(out, dirIndex), func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: shardIndex, Count: 2} })
	}
	build(0, 0)
	build(1, 1)
	_, dirs, err := shard.Whole(out)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyWhole(m, dirs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Dataset != "PET" || rep.Count != 2 || len(rep.Shards) != 2 {
		t.Fatalf("whole report %+v, want 2 shards intact", rep)
	}
	alone, err := Verify(dirs[1], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Shards[1].Dir != dirs[1] || rep.Shards[1].Checks != alone.Checks+1 {
		t.Errorf("shard 1: %s, %d checks; want %s with one check more than its own %d", rep.Shards[1].Dir, rep.Shards[1].Checks, dirs[1], alone.Checks)
	}

	build(1, 0) // shard 1's directory now holds shard 0's series
	rep, err = VerifyWhole(m, dirs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s1 := rep.Shards[1]
	if rep.OK || !rep.Shards[0].OK || s1.OK || s1.Status != StatusCorrupt || len(s1.Findings) == 0 ||
		s1.Findings[len(s1.Findings)-1].Check != CheckShardMembership || !strings.Contains(s1.Findings[len(s1.Findings)-1].Message, "makes this shard 1 of 2") {
		t.Errorf("wrong shard: ok %v, shard 1 %s %+v", rep.OK, s1.Status, s1.Findings)
	}

	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWhole(m, dirs, Options{}); err == nil || !strings.HasPrefix(err.Error(), "shard 1 of PET: ") {
		t.Errorf("VerifyWhole with shard 1 gone = %v, want it named", err)
	}
}
