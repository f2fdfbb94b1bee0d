package shard

import (
	"fmt"
	"strconv"
	"strings"
)

// Partition names a lake partition column that holds, for every row, the
// bucket of the row's series among Buckets under the shard function: the
// column a lake writer fills with bucket(B, series_id) (Spark's, Trino's or
// pyiceberg's bucket transform for iceberg-bucket). With N dividing B, the
// rows of bucket b all belong to shard b mod N, so shard I of N needs only
// the files of buckets I, I+N, I+2N, …
type Partition struct {
	Column  string
	Buckets int
}

// MaxBuckets bounds a partition's bucket count (Iceberg's bucket transform
// takes an int32 count).
const MaxBuckets = 1<<31 - 1

// ParsePartition reads `--shard-by-partition COL:B`: the column and its
// bucket count. The count follows the last colon, so a column name may
// hold one.
func ParsePartition(s string) (Partition, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return Partition{}, fmt.Errorf("shard-by-partition %q: want COLUMN:BUCKETS such as series_bucket:16", s)
	}
	col, bs := s[:i], s[i+1:]
	if col == "" {
		return Partition{}, fmt.Errorf("shard-by-partition %q: the column name is empty", s)
	}
	b, err := strconv.Atoi(bs)
	if err != nil || b < 1 || b > MaxBuckets {
		return Partition{}, fmt.Errorf("shard-by-partition %q: bucket count %q must be an integer from 1 to %d", s, bs, MaxBuckets)
	}
	return Partition{Column: col, Buckets: b}, nil
}

func (p Partition) String() string { return fmt.Sprintf("%s:%d", p.Column, p.Buckets) }

// Fits says whether shard spec s can be read by partition: its count must
// divide the bucket count, or a bucket would hold series of several shards.
func (p Partition) Fits(s Spec) error {
	if s.Count < 1 {
		return fmt.Errorf("shard-by-partition %s needs a shard count (--shard I/N or --shards N)", p)
	}
	if p.Buckets%s.Count != 0 {
		return fmt.Errorf("shard-by-partition %s: the shard count %d does not divide the %d buckets, so a bucket would hold series of several shards", p, s.Count, p.Buckets)
	}
	return nil
}

// Bucket reads a partition value as written in the lake (a Delta add
// action's partitionValues entry, a hive-style COL=value directory) as a
// bucket in [0, Buckets).
func (p Partition) Bucket(value string) (int, error) {
	b, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("partition column %q holds %q, not an integer bucket", p.Column, value)
	}
	if b < 0 || b >= int64(p.Buckets) {
		return 0, fmt.Errorf("partition column %q holds bucket %d, outside the %d buckets [0, %d)", p.Column, b, p.Buckets, p.Buckets)
	}
	return int(b), nil
}

// Of is series id's bucket among the partition's buckets under spec s's
// shard function: the value the partition column must hold for its rows.
func (p Partition) Of(s Spec, id string) int {
	f, err := Func(s.Hash)
	if err != nil {
		panic(err)
	}
	return f(id, p.Buckets)
}
