package inspect

import (
	"fmt"

	"github.com/energyscope/servingsnap/pkg/shard"
)

// ShardSummary is one shard's summary within a sharded dataset's.
type ShardSummary struct {
	Shard int `json:"shard"`
	*Summary
}

// WholeSummary is a sharded dataset's summary: the totals and every
// shard's current snapshot, in shard order. Field names are stable
// (docs/CLI.md).
type WholeSummary struct {
	Dataset string         `json:"dataset"`
	Count   int            `json:"count"`
	Rows    int64          `json:"rows"`
	Series  int64          `json:"series"`
	Shards  []ShardSummary `json:"shards"`
}

// SummarizeWhole summarizes the current snapshot of every shard of the
// sharded dataset m, whose shard directories are dirs (shard.Whole). A
// shard whose files do not open is summarized with its Error set (see
// Failed); one whose manifest cannot be read stops it.
func SummarizeWhole(m *shard.Map, dirs []string) (*WholeSummary, error) {
	shards, err := shard.EachShard(m, dirs, func(sp shard.Spec, dir string) (ShardSummary, error) {
		s, err := Summarize(dir, 0)
		return ShardSummary{Shard: sp.Index, Summary: s}, err
	})
	if err != nil {
		return nil, err
	}
	out := &WholeSummary{Dataset: m.Dataset, Count: m.Count, Shards: shards}
	for _, s := range shards {
		out.Rows += s.Rows
		out.Series += s.Series
	}
	return out, nil
}

// Failed says, per shard whose files did not open, why ("shard I: ...").
func (w *WholeSummary) Failed() []string {
	var out []string
	for _, s := range w.Shards {
		if s.Error != "" {
			out = append(out, fmt.Sprintf("shard %d: %s", s.Shard, s.Error))
		}
	}
	return out
}
