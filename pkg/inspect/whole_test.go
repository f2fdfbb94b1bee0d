package inspect_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/inspect"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestWhole: a sharded dataset's summary adds its shards' counts up and its
// history holds every shard's; a shard that is missing stops both, named.
func TestWhole(t *testing.T) {
	root := t.TempDir()
	lake, _ := testsnap.Sample(t, root, "ALL", 20, 4, nil)
	out := filepath.Join(root, "PET")
	m, err := shard.Ensure(out, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	var rows, series int64
	for i := 0; i < 2; i++ {
		testsnap.Build(t, lake, shard.ShardDir(out, i), func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: i, Count: 2} })
		s, err := inspect.Summarize(shard.ShardDir(out, i), 0)
		if err != nil {
			t.Fatal(err)
		}
		rows, series = rows+s.Rows, series+s.Series
	}
	_, dirs, err := shard.Whole(out)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := inspect.SummarizeWhole(m, dirs)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Dataset != "PET" || sum.Count != 2 || sum.Rows != rows || sum.Series != series || len(sum.Shards) != 2 || sum.Shards[1].Shard != 1 || len(sum.Failed()) != 0 {
		t.Errorf("summary %+v, want 2 shards, %d rows, %d series, none failed", sum, rows, series)
	}
	h, err := inspect.LoadWholeHistory(m, dirs)
	if err != nil || h.Count != 2 || len(h.Shards) != 2 || h.Shards[1].Shard != 1 || len(h.Shards[1].Snapshots) == 0 {
		t.Errorf("history %+v, %v", h, err)
	}

	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := inspect.SummarizeWhole(m, dirs); err == nil || !strings.HasPrefix(err.Error(), "shard 1 of PET: ") {
		t.Errorf("summary with shard 1 gone = %v, want it named", err)
	}
}
