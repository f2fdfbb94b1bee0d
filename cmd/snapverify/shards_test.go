package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestWholeSharded: a whole sharded dataset verifies shard by shard, and a
// shard directory holding another shard's series is a finding (exit 1).
func TestWholeSharded(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(t.Context(), lakegen.Options{Out: lake, Series: 40, FromYear: 2020, ToYear: 2022, Seed: 4, RowGroupRows: 4096}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "PET")
	if _, err := shard.Ensure(out, 2, ""); err != nil {
		t.Fatal(err)
	}
	build := func(dirIndex, shardIndex int) {
		testsnap.Build(t, lake, shard.ShardDir(out, dirIndex), func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: shardIndex, Count: 2} })
	}
	build(0, 0)
	build(1, 1)
	if code, stdout, errOut := snapverify(t, out, "--deep"); code != 0 || !strings.Contains(stdout, "PET: 2 shards intact") {
		t.Fatalf("whole: exit %d\n%s%s", code, stdout, errOut)
	}
	if code, _, errOut := snapverify(t, out, "--snapshot", "1"); code != 2 || !strings.Contains(errOut, "each with its own snapshot ids") {
		t.Errorf("--snapshot of a whole: exit %d %q", code, errOut)
	}
	if code, _, errOut := snapverify(t, out, "--against", lake); code != 2 || !strings.Contains(errOut, "--against") {
		t.Errorf("--against of a whole: exit %d %q", code, errOut)
	}
	build(1, 0) // shard 1's directory now holds shard 0's series
	code, stdout, _ := snapverify(t, out)
	if code != 1 || !strings.Contains(stdout, "the shard map makes this shard 1 of 2") || !strings.Contains(stdout, "PET: 2 shards CORRUPT") {
		t.Errorf("wrong shard: exit %d\n%s", code, stdout)
	}
}

// TestWholeShardedIcebergBucket: membership is checked with the function
// the shard map records: shards built by iceberg-bucket verify, and a
// shard built by xxhash64 under an iceberg-bucket map is a finding.
func TestWholeShardedIcebergBucket(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(t.Context(), lakegen.Options{Out: lake, Series: 40, FromYear: 2020, ToYear: 2022, Seed: 5, RowGroupRows: 4096}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "PET")
	if _, err := shard.Ensure(out, 2, shard.HashIcebergBucket); err != nil {
		t.Fatal(err)
	}
	build := func(i int, hash string) {
		testsnap.Build(t, lake, shard.ShardDir(out, i), func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: i, Count: 2, Hash: hash} })
	}
	build(0, shard.HashIcebergBucket)
	build(1, shard.HashIcebergBucket)
	if code, stdout, errOut := snapverify(t, out, "--deep"); code != 0 || !strings.Contains(stdout, "PET: 2 shards intact") {
		t.Fatalf("whole: exit %d\n%s%s", code, stdout, errOut)
	}
	build(1, shard.HashXXH64)
	if code, stdout, _ := snapverify(t, out); code != 1 || !strings.Contains(stdout, "(iceberg-bucket)") {
		t.Errorf("a shard split by another function: exit %d\n%s", code, stdout)
	}
}
