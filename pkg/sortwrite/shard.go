package sortwrite

import (
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/shard"
)

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

// pruneBuckets drops from tbl.Files the data files that hold only other
// shards' rows, and returns how many and their bytes: with the
// iceberg-bucket function, series id's shard among N is bucket(N, id),
// and a file of an Iceberg table partitioned by bucket(B, series column)
// holds bucket b of B, whose ids all have shard b mod N when N divides
// B. A file without that partition is read whole (its rows are filtered
// by id as in any shard build).
func pruneBuckets(tbl *source.Table, opt Options) (files int, bytes int64) {
	if opt.Shard.Count <= 1 || opt.Shard.HashName() != shard.HashIcebergBucket {
		return 0, 0
	}
	kept := tbl.Files[:0:0]
	for _, f := range tbl.Files {
		if b, n, ok := tbl.Bucket(f, opt.SeriesColumn); ok && n%opt.Shard.Count == 0 && b%opt.Shard.Count != opt.Shard.Index {
			files++
			bytes += f.Size
			continue
		}
		kept = append(kept, f)
	}
	tbl.Files = kept
	return files, bytes
}
