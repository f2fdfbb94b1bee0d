package sortwrite

import (
	"errors"
	"fmt"

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

// prunePartitions keeps in tbl.Files the data files of the shard's buckets
// as the partition column of opt.ShardPartition gives them, and returns
// every kept file's bucket and how many files (and bytes) it dropped. A
// file without a value for the column, or with one that is not a bucket
// in [0, B), is an error naming the file: reading it whole would put rows
// of other shards in this one (or lose this shard's), and guessing is
// worse than refusing.
func prunePartitions(tbl *source.Table, opt Options) (buckets map[*source.File]int, files int, bytes int64, err error) {
	p, s := opt.ShardPartition, opt.Shard
	buckets = map[*source.File]int{}
	kept := tbl.Files[:0:0]
	for _, f := range tbl.Files {
		v, null, err := tbl.PartitionValue(f, p.Column)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("shard-by-partition %s: %w", p, err)
		}
		if null {
			return nil, 0, 0, fmt.Errorf("shard-by-partition %s: %s: partition column %q is null, not a bucket", p, f.Rel, p.Column)
		}
		b, err := p.Bucket(v)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("shard-by-partition %s: %s: %w", p, f.Rel, err)
		}
		if b%s.Count != s.Index {
			files++
			bytes += f.Size
			continue
		}
		buckets[f] = b
		kept = append(kept, f)
	}
	tbl.Files = kept
	return buckets, files, bytes, nil
}

// checkBuckets proves the partition column told the truth about the files
// read: every row's series has, under the shard function, the bucket its
// file's partition value names. A row that does not is an error naming
// it: its series belongs elsewhere (another shard, whose job skipped this
// file), so building on would leave it out of every shard or put it in
// the wrong one. Each file is read by exactly one shard job, so across the
// N jobs every row of the table is checked. buckets is nil when the build
// reads no partition column.
func (t *table) checkBuckets(buckets map[*source.File]int, opt Options) error {
	if buckets == nil {
		return nil
	}
	p, s := opt.ShardPartition, opt.Shard
	ids := t.series.dict.values
	of := make([]int, len(ids)) // bucket+1 per dictionary code; 0: not yet computed
	for _, in := range t.inputs {
		want, ok := buckets[in.src]
		if !ok {
			return fmt.Errorf("%s: no partition bucket was read for it", in.Rel)
		}
		lo := int(in.FirstRow) - t.base
		for r, c := range t.series.codes[lo : lo+int(in.Rows)] {
			if of[c] == 0 {
				of[c] = p.Of(s, ids[c]) + 1
			}
			if got := of[c] - 1; got != want {
				return bucketMismatch(t.location(in.FirstRow+int64(r)), ids[c], got, want, opt)
			}
		}
	}
	return nil
}

// bucketMismatch says that a row's series is not in its file's bucket.
func bucketMismatch(at, id string, got, want int, opt Options) error {
	p, s := opt.ShardPartition, opt.Shard
	msg := fmt.Sprintf("%s: series %q has bucket %d of %d under %s, but its file's partition column %q says %d",
		at, id, got, p.Buckets, s.HashName(), p.Column, want)
	if got%s.Count != s.Index {
		msg += fmt.Sprintf(" (its rows belong to shard %d of %d, whose job skips this file)", got%s.Count, s.Count)
	}
	msg += fmt.Sprintf(": the table is not partitioned by %s(%q) mod %d", s.HashName(), opt.SeriesColumn, p.Buckets)
	if s.HashName() != shard.HashIcebergBucket {
		msg += fmt.Sprintf(" (a column written by a lake engine's bucket transform needs --shard-function %s)", shard.HashIcebergBucket)
	}
	return errors.New(msg)
}
