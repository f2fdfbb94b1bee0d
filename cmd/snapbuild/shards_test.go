package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestBuildShards: --shards 3 splits the rows of one lake into three
// lineages by shard.Of, none lost or repeated; --shard I/N builds one and
// checks the shard map; the usage errors exit 2.
func TestBuildShards(t *testing.T) {
	root := t.TempDir()
	lake, all := testsnap.Sample(t, root, "ALL", 60, 2, nil)
	out := filepath.Join(root, "PET")
	code, stdout, errOut := snapbuild("build", "--input", lake, "--out", out, "--shards", "3", "--json")
	if code != 0 {
		t.Fatalf("build --shards 3: exit %d: %s", code, errOut)
	}
	var rep shardedSummary
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Count != 3 || len(rep.Shards) != 3 {
		t.Fatalf("--json: %v %s", err, stdout)
	}
	whole, err := snapshot.Open(all, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	var rows, series int64
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		s, err := snapshot.Open(shard.ShardDir(out, i), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sh := s.Manifest.Shard; sh == nil || sh.Index != i || sh.Count != 3 || sh.OtherShardRows != whole.Manifest.Stats.Rows-s.Manifest.Stats.Rows {
			t.Errorf("shard %d manifest: %+v", i, sh)
		}
		if got, want := s.Manifest.Schema.Attributes, whole.Manifest.Schema.Attributes; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("shard %d attributes %v, the whole's %v", i, got, want)
		}
		x := s.Index()
		for k := 0; k < x.Len(); k++ {
			id := x.SeriesID(k)
			if shard.Of(id, 3) != i || seen[id] {
				t.Errorf("series %q in shard %d (belongs to %d, seen before: %v)", id, i, shard.Of(id, 3), seen[id])
			}
			seen[id] = true
			wc, ok := whole.Lookup(id)
			if !ok || whole.Index().Entry(wc).RowCount != x.Entry(k).RowCount {
				t.Errorf("series %q: %d rows in shard %d, not the whole's", id, x.Entry(k).RowCount, i)
			}
		}
		rows += s.Manifest.Stats.Rows
		series += s.Manifest.Stats.Series
		s.Close()
	}
	if rows != whole.Manifest.Stats.Rows || series != whole.Manifest.Stats.Series {
		t.Errorf("shards hold %d rows in %d series, the whole %d in %d", rows, series, whole.Manifest.Stats.Rows, whole.Manifest.Stats.Series)
	}

	// One more vintage of shard 1 alone, the index from the environment.
	t.Setenv(shard.JobIndexEnv, "1")
	if code, _, errOut := snapbuild("build", "--input", lake, "--out", out, "--shard", "$JOB_COMPLETION_INDEX/3"); code != 0 {
		t.Fatalf("--shard $JOB_COMPLETION_INDEX/3: exit %d: %s", code, errOut)
	}
	if code, stdout, _ := snapbuild("history", out, "--json"); code != 0 || strings.Count(stdout, `"snapshot_id": 2`) != 1 {
		t.Errorf("history of the whole: exit %d\n%s", code, stdout)
	}

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--out", out, "--shards", "3", "--shard", "0/3"}, 2, "not both"},
		{[]string{"--out", out, "--shard", "3/3"}, 2, "from 0 to 2"},
		{[]string{"--out", out, "--shards", "0"}, 2, "from 1 to 9999"},
		{[]string{"--out", out, "--shards", "4"}, 1, "split into 3 shards, not 4"},
		{[]string{"--out", out}, 2, "a dataset of 3 shards"},
		{[]string{"--out", all, "--shards", "2"}, 1, "unsharded dataset"},
	} {
		code, _, errOut := snapbuild(append([]string{"build", "--input", lake}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("build %v: exit %d %q; want %d with %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
	if code, _, errOut := snapbuild("rollback", "--to", "1", out); code != 2 || !strings.Contains(errOut, "each with its own snapshot ids") {
		t.Errorf("rollback of a whole sharded dataset: exit %d %q", code, errOut)
	}
}

// TestBuildShardsIcebergBucket: --shard-function iceberg-bucket splits by
// Iceberg's bucket transform, records it in SHARDS.json and the manifests,
// and snapverify checks membership with it; a later build with another
// function is refused.
func TestBuildShardsIcebergBucket(t *testing.T) {
	root := t.TempDir()
	lake, _ := testsnap.Sample(t, root, "ALL", 40, 3, nil)
	out := filepath.Join(root, "PET")
	for i := 0; i < 2; i++ {
		code, _, errOut := snapbuild("build", "--input", lake, "--out", out, "--shard", fmt.Sprintf("%d/2", i), "--shard-function", "iceberg-bucket")
		if code != 0 {
			t.Fatalf("build --shard %d/2 --shard-function iceberg-bucket: exit %d: %s", i, code, errOut)
		}
	}
	m, err := shard.ReadMap(out)
	if err != nil || m.Hash != shard.HashIcebergBucket {
		t.Fatalf("SHARDS.json: %+v %v", m, err)
	}
	total := 0
	for i := 0; i < 2; i++ {
		s, err := snapshot.Open(shard.ShardDir(out, i), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if sh := s.Manifest.Shard; sh == nil || sh.Hash != shard.HashIcebergBucket {
			t.Errorf("shard %d manifest: %+v", i, sh)
		}
		x := s.Index()
		for k := 0; k < x.Len(); k++ {
			if id := x.SeriesID(k); shard.Bucket(id, 2) != i {
				t.Errorf("series %q in shard %d, its bucket is %d", id, i, shard.Bucket(id, 2))
			}
		}
		total += x.Len()
		s.Close()
	}
	if total != 40 {
		t.Errorf("%d series in the shards, want 40", total)
	}
	if code, _, errOut := snapbuild("build", "--input", lake, "--out", out, "--shard", "0/2"); code == 0 || !strings.Contains(errOut, "split by iceberg-bucket, not xxhash64") {
		t.Errorf("a build with another function: exit %d %s", code, errOut)
	}
	if code, _, errOut := snapbuild("build", "--input", lake, "--out", out, "--shard", "0/2", "--shard-function", "md5"); code != 2 {
		t.Errorf("an unknown function: exit %d %s", code, errOut)
	}
}

// TestBuildShardByPartitionUsage: --shard-by-partition's value and its
// fit with the shard count are checked before anything is read (exit 2),
// and a column the input does not partition by fails naming the file.
func TestBuildShardByPartitionUsage(t *testing.T) {
	root := t.TempDir()
	lake, _ := testsnap.Sample(t, root, "ALL", 10, 3, nil)
	out := filepath.Join(root, "PET")
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--shard-by-partition", "b:16"}, 2, "goes with --shard I/N or --shards N"},
		{[]string{"--shard", "0/4", "--shard-by-partition", "b"}, 2, "want COLUMN:BUCKETS"},
		{[]string{"--shard", "0/4", "--shard-by-partition", "b:0"}, 2, "bucket count \"0\""},
		{[]string{"--shard", "0/3", "--shard-by-partition", "b:16"}, 2, "shard count 3 does not divide the 16 buckets"},
		{[]string{"--shards", "32", "--shard-by-partition", "b:16"}, 2, "shard count 32 does not divide"},
		{[]string{"--shard", "0/4", "--shard-by-partition", "b:16"}, 1, "no b=VALUE directory"},
	} {
		args := append([]string{"build", "--input", lake, "--out", out}, tc.args...)
		code, _, errOut := snapbuild(args...)
		if code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Errorf("%v: exit %d %q; want exit %d saying %q", tc.args, code, errOut, tc.code, tc.err)
		}
	}
}

// TestSplitThenBuildShards: snapbuild split of two parts, then build
// --from-split of each of three shards writes the data and index files a
// build --shard of the lake writes; the usage errors exit 2.
func TestSplitThenBuildShards(t *testing.T) {
	root := t.TempDir()
	lake, _ := testsnap.Sample(t, root, "ALL", 60, 4, nil)
	split := filepath.Join(root, "split")
	var read int64
	for j := 0; j < 2; j++ {
		code, stdout, errOut := snapbuild("split", "--input", lake, "--shards", "3", "--part", fmt.Sprintf("%d/2", j), "--out", split, "--json")
		if code != 0 {
			t.Fatalf("split --part %d/2: exit %d: %s", j, code, errOut)
		}
		var sum sortwrite.SplitSummary
		if err := json.Unmarshal([]byte(stdout), &sum); err != nil || sum.Part != j || len(sum.Pieces) != 3 || sum.BytesRead <= 0 {
			t.Fatalf("split --json: %v %s", err, stdout)
		}
		read += sum.BytesRead
	}
	viaSplit, viaLake := filepath.Join(root, "SPLIT"), filepath.Join(root, "LAKE")
	for i := 0; i < 3; i++ {
		if code, _, errOut := snapbuild("build", "--from-split", split, "--out", viaSplit, "--shard", fmt.Sprintf("%d/3", i)); code != 0 {
			t.Fatalf("build --from-split --shard %d/3: exit %d: %s", i, code, errOut)
		}
		if code, _, errOut := snapbuild("build", "--input", lake, "--out", viaLake, "--shard", fmt.Sprintf("%d/3", i)); code != 0 {
			t.Fatalf("build --shard %d/3: exit %d: %s", i, code, errOut)
		}
		a, err := snapshot.Open(shard.ShardDir(viaSplit, i), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := snapshot.Open(shard.ShardDir(viaLake, i), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, role := range []string{manifest.RoleData, manifest.RoleIndex} {
			fa, _ := a.Manifest.FileByRole(role)
			fb, _ := b.Manifest.FileByRole(role)
			if fa.Checksum != fb.Checksum || fa.Size != fb.Size {
				t.Errorf("shard %d: %s from the split %+v, from the lake %+v", i, role, fa, fb)
			}
		}
		a.Close()
		b.Close()
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"build", "--from-split", split, "--out", viaSplit}, 2, "give --shard I/N"},
		{[]string{"build", "--from-split", split, "--input", lake, "--out", viaSplit, "--shard", "0/3"}, 2, "drop --input"},
		{[]string{"build", "--from-split", split, "--out", filepath.Join(root, "FOUR"), "--shard", "0/4"}, 1, "holds shard 0/3, not 0/4"},
		{[]string{"split", "--input", lake, "--shards", "3", "--part", "2/2", "--out", split}, 2, "from 0 to 1"},
		{[]string{"split", "--input", lake, "--shards", "0", "--part", "0/2", "--out", split}, 2, "from 1 to"},
	} {
		code, _, errOut := snapbuild(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d %q; want %d with %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}
