package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestWholeSharded: a sharded dataset's directory summarizes every shard,
// sends series to the shard of its ids, and refuses what needs one lineage.
func TestWholeSharded(t *testing.T) {
	root := t.TempDir()
	lake, all := testsnap.Sample(t, root, "ALL", 30, 9, nil)
	out := filepath.Join(root, "PET")
	if _, err := shard.Ensure(out, 2, ""); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		testsnap.Build(t, lake, shard.ShardDir(out, i), func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: i, Count: 2} })
	}
	s, err := snapshot.Open(all, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows, series := s.Manifest.Stats.Rows, s.Manifest.Stats.Series
	var a, b string // a series of shard 0 and one of shard 1
	for k := 0; k < s.Index().Len(); k++ {
		switch id := s.Index().SeriesID(k); shard.Of(id, 2) {
		case 0:
			a = id
		case 1:
			b = id
		}
	}
	s.Close()

	inspect := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := run(append([]string{"snapinspect"}, args...), &o, &e)
		return code, o.String(), e.String()
	}
	code, stdout, errOut := inspect(out, "--json")
	var sum struct {
		Count        int
		Rows, Series int64
		Shards       []struct{ Shard int }
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &sum) != nil || sum.Count != 2 || sum.Rows != rows || sum.Series != series || len(sum.Shards) != 2 {
		t.Fatalf("summary of the whole: exit %d %+v (want %d rows, %d series) %s", code, sum, rows, series, errOut)
	}
	if code, stdout, errOut := inspect(out, "series", b); code != 0 || !strings.Contains(stdout, b) {
		t.Errorf("series %s of the whole: exit %d %s", b, code, errOut)
	}
	if code, _, errOut := inspect(out, "series", a, b); code != 2 || !strings.Contains(errOut, "live in 2 shards") {
		t.Errorf("series of two shards: exit %d %q", code, errOut)
	}
	if code, stdout, _ := inspect(out, "history", "--json"); code != 0 || strings.Count(stdout, `"shard":`) != 2 {
		t.Errorf("history of the whole: exit %d %s", code, stdout)
	}
	for _, args := range [][]string{{"latest", "--all"}, {"diff", "1", "1"}, {"--snapshot", "1"}} {
		if code, _, errOut := inspect(append([]string{out}, args...)...); code != 2 || !strings.Contains(errOut, "shard") {
			t.Errorf("%v of the whole: exit %d %q", args, code, errOut)
		}
	}
}

// TestWholeShardedHeader: the text summary of a whole sharded dataset names
// the shard function its map records.
func TestWholeShardedHeader(t *testing.T) {
	root := t.TempDir()
	lake, _ := testsnap.Sample(t, root, "ALL", 12, 5, nil)
	for _, hash := range []string{shard.HashXXH64, shard.HashIcebergBucket} {
		out := filepath.Join(root, "PET-"+hash)
		if _, err := shard.Ensure(out, 2, hash); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			testsnap.Build(t, lake, shard.ShardDir(out, i), func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: i, Count: 2, Hash: hash} })
		}
		var o, e bytes.Buffer
		code := run([]string{"snapinspect", out}, &o, &e)
		if want := "2 shards (" + hash + " of series_id mod 2)"; code != 0 || !strings.Contains(o.String(), want) {
			t.Errorf("%s: exit %d, want %q in\n%s%s", hash, code, want, o.String(), e.String())
		}
	}
}
