package sortwrite

import "github.com/energyscope/servingsnap/pkg/shard"

// keepRanks says, per id rank, whether the series belongs to the selected
// shard; nil when the build is not sharded. ids are the dictionary's
// values and byID the codes in rank order.
func keepRanks(s shard.Spec, ids []string, byID []uint32) []bool {
	if s.Count <= 0 {
		return nil
	}
	keep := make([]bool, len(byID))
	for r, c := range byID {
		keep[r] = s.Of(ids[c]) == s.Index
	}
	return keep
}
