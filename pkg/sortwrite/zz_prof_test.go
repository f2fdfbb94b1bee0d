package sortwrite

import (
	"context"
	"os"
	"testing"

	"github.com/energyscope/servingsnap/pkg/shard"
)

func TestZZSplitProf(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	dir := t.TempDir()
	opt := Options{Input: "/tmp/h40s/lake", Shard: shard.Spec{Count: 4}}
	c0 := cpuTime()
	s, err := Split(context.Background(), opt, SplitPart{Index: 0, Count: 1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	c1 := cpuTime()
	t.Logf("split %.2fs cpu %v", s.Seconds, c1-c0)
	for i := range 4 {
		if _, err := Build(context.Background(), Options{Out: dir + "/OUT", FromSplit: dir, Shard: shard.Spec{Index: i, Count: 4}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("builds cpu %v", cpuTime()-c1)
}
