package sortwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testiceberg"
	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// bucketLake is a lake partitioned by a column holding each series'
// bucket, one data file per bucket: a Delta table (the value in the log's
// add actions) or a Parquet folder (hive-style b=K directories).
type bucketLake struct {
	kind    string // source.KindDelta or source.KindParquet
	buckets int
	hash    string // the function the writer bucketed by
	series  int
	// value, when set, is file k's partition value instead of k (nil: null).
	value func(k int) *string
	// move puts a series' rows in the file of another bucket.
	move map[string]int
}

const partCol = "b"

func (l bucketLake) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	f, err := shard.Func(l.hash)
	if err != nil {
		t.Fatal(err)
	}
	byBucket := map[int][]string{}
	for i := 0; i < l.series; i++ {
		id := fmt.Sprintf("PET.S%03d.M", i)
		b := f(id, l.buckets)
		if m, ok := l.move[id]; ok {
			b = m
		}
		byBucket[b] = append(byBucket[b], id)
	}
	var ks []int
	for k := range byBucket {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	type add struct {
		Path             string             `json:"path"`
		PartitionValues  map[string]*string `json:"partitionValues"`
		Size             int64              `json:"size"`
		ModificationTime int64              `json:"modificationTime"`
		DataChange       bool               `json:"dataChange"`
	}
	var adds []add
	for _, k := range ks {
		v := strconv.Itoa(k)
		pv := &v
		if l.value != nil {
			pv = l.value(k)
		}
		dirVal := "__HIVE_DEFAULT_PARTITION__"
		if pv != nil {
			dirVal = *pv
		}
		rel := fmt.Sprintf("%s=%s/part-%02d.parquet", partCol, dirVal, k)
		var ids, periods []any
		var values []any
		for _, id := range byBucket[k] {
			for m := 1; m <= 3; m++ {
				ids = append(ids, id)
				periods = append(periods, fmt.Sprintf("2020-%02d", m))
				values = append(values, float64(len(id)*10+m))
			}
		}
		testlake.WriteParquet(t, dir, rel, 0,
			testlake.Col{Name: "series_id", Vals: ids},
			testlake.Col{Name: "period", Vals: periods},
			testlake.Col{Name: "value", Vals: values})
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, add{Path: rel, PartitionValues: map[string]*string{partCol: pv}, Size: st.Size(), ModificationTime: 1, DataChange: true})
	}
	if l.kind == source.KindDelta {
		schema := `{"type":"struct","fields":[` +
			`{"name":"series_id","type":"string","nullable":true,"metadata":{}},` +
			`{"name":"period","type":"string","nullable":true,"metadata":{}},` +
			`{"name":"value","type":"double","nullable":true,"metadata":{}},` +
			`{"name":"b","type":"integer","nullable":true,"metadata":{}}]}`
		lines := []any{
			map[string]any{"protocol": map[string]any{"minReaderVersion": 1, "minWriterVersion": 2}},
			map[string]any{"metaData": map[string]any{"id": "t", "format": map[string]any{"provider": "parquet"},
				"schemaString": schema, "partitionColumns": []string{partCol}, "configuration": map[string]string{}}},
		}
		for _, a := range adds {
			lines = append(lines, map[string]any{"add": a})
		}
		var sb strings.Builder
		for _, ln := range lines {
			b, _ := json.Marshal(ln)
			sb.Write(b)
			sb.WriteByte('\n')
		}
		if err := os.MkdirAll(filepath.Join(dir, "_delta_log"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "_delta_log", "00000000000000000000.json"), []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// withoutCol drops a column from every row (the Delta partition column
// becomes a per-series attribute; the Parquet folder has none).
func withoutCol(rows []map[string]any, col string) []map[string]any {
	for _, r := range rows {
		delete(r, col)
	}
	return rows
}

// TestShardByPartition: N shard builds of a lake partitioned by each
// series' bucket of 16 each read only the files of their buckets (the
// summary counts the rest as pruned), and together hold exactly the
// unsharded build's rows.
func TestShardByPartition(t *testing.T) {
	for _, tc := range []struct {
		kind string
		hash string
		n    int
	}{
		{source.KindDelta, shard.HashIcebergBucket, 4},
		{source.KindDelta, shard.HashIcebergBucket, 16},
		{source.KindDelta, shard.HashXXH64, 2},
		{source.KindParquet, shard.HashIcebergBucket, 4},
		{source.KindParquet, shard.HashIcebergBucket, 1},
		{source.KindParquet, shard.HashXXH64, 8},
	} {
		t.Run(fmt.Sprintf("%s %s %d", tc.kind, tc.hash, tc.n), func(t *testing.T) {
			lake := bucketLake{kind: tc.kind, buckets: 16, hash: tc.hash, series: 120}.write(t)
			root := t.TempDir()
			whole, err := build(t, lake, filepath.Join(root, "WHOLE"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if whole.Inputs != 16 {
				t.Fatalf("the lake has %d files, want one per bucket (16)", whole.Inputs)
			}
			var union []map[string]any
			for i := 0; i < tc.n; i++ {
				dir := filepath.Join(root, shard.DirName("PET", i))
				spec := shard.Spec{Index: i, Count: tc.n, Hash: tc.hash}
				sum, err := build(t, lake, dir, func(o *Options) {
					o.Shard = spec
					o.ShardPartition = shard.Partition{Column: partCol, Buckets: 16}
				})
				if err != nil {
					t.Fatalf("shard %d: %v", i, err)
				}
				if sum.Inputs != 16/tc.n || sum.InputsPruned != 16-16/tc.n {
					t.Fatalf("shard %d: read %d files, pruned %d; want %d and %d", i, sum.Inputs, sum.InputsPruned, 16/tc.n, 16-16/tc.n)
				}
				if sum.InputsPruned > 0 && (sum.InputBytesPruned <= 0 || sum.InputBytesPruned+sum.InputBytes != whole.InputBytes) {
					t.Fatalf("shard %d: %d bytes read + %d pruned, the lake has %d", i, sum.InputBytes, sum.InputBytesPruned, whole.InputBytes)
				}
				rows := tableRows(t, dir)
				for _, r := range rows {
					if s := spec.Of(r["series_id"].(string)); s != i {
						t.Fatalf("series %v is in shard %d, built into %d", r["series_id"], s, i)
					}
				}
				union = append(union, rows...)
			}
			want := withoutCol(tableRows(t, filepath.Join(root, "WHOLE")), partCol)
			union = withoutCol(union, partCol)
			sortTableRows(union, "series_id", "period")
			if len(want) != 360 || !reflect.DeepEqual(union, want) {
				t.Fatalf("the shards hold %d rows, the unsharded build %d; they differ", len(union), len(want))
			}
		})
	}
}

// TestShardByPartitionErrors: a partition column that is missing, null,
// not an integer or out of range is an error naming the file; a file whose
// rows are not in its bucket (the partition lied) is an error naming the
// row, whether or not the row's series is of the shard reading the file.
func TestShardByPartitionErrors(t *testing.T) {
	str := func(s string) *string { return &s }
	ib := func(id string, n int) int { return shard.Bucket(id, n) }
	// A series of shard 1 of 4 (bucket 1 or 5 or 9 or 13) moved into
	// another bucket of shard 1, and one moved into a bucket of shard 0.
	var sameShard, otherShard string
	var sameTo, otherTo int
	for i := 0; i < 120 && (sameShard == "" || otherShard == ""); i++ {
		id := fmt.Sprintf("PET.S%03d.M", i)
		b := ib(id, 16)
		if b%4 != 1 {
			continue
		}
		if sameShard == "" {
			sameShard, sameTo = id, (b+4)%16
		} else if otherShard == "" {
			otherShard, otherTo = id, 0
		}
	}
	for _, tc := range []struct {
		name string
		lake bucketLake
		part shard.Partition
		spec shard.Spec
		err  []string
	}{
		{name: "not a partition column (delta)", lake: bucketLake{kind: source.KindDelta},
			part: shard.Partition{Column: "region", Buckets: 16}, err: []string{"part-", `"region" is not a partition column`, "partition columns: b"}},
		{name: "no directory (parquet)", lake: bucketLake{kind: source.KindParquet},
			part: shard.Partition{Column: "region", Buckets: 16}, err: []string{"b=", "part-", "no region=VALUE directory"}},
		{name: "null (delta)", lake: bucketLake{kind: source.KindDelta, value: func(k int) *string {
			if k == 3 {
				return nil
			}
			return str(strconv.Itoa(k))
		}}, err: []string{"part-03.parquet", `partition column "b" is null`}},
		{name: "null (parquet)", lake: bucketLake{kind: source.KindParquet, value: func(k int) *string {
			if k == 3 {
				return nil
			}
			return str(strconv.Itoa(k))
		}}, err: []string{"b=__HIVE_DEFAULT_PARTITION__/part-03.parquet", "is null"}},
		{name: "not an integer", lake: bucketLake{kind: source.KindDelta, value: func(k int) *string { return str(fmt.Sprintf("k%d", k)) }},
			err: []string{"part-", `holds "k`, "not an integer bucket"}},
		{name: "out of range", lake: bucketLake{kind: source.KindParquet, value: func(k int) *string { return str(strconv.Itoa(k + 16)) }},
			err: []string{"b=16/part-00.parquet", "bucket 16, outside the 16 buckets"}},
		{name: "fewer buckets than written", lake: bucketLake{kind: source.KindDelta},
			part: shard.Partition{Column: partCol, Buckets: 8}, err: []string{"outside the 8 buckets"}},
		{name: "lie within the shard", lake: bucketLake{kind: source.KindDelta, move: map[string]int{sameShard: sameTo}},
			err: []string{fmt.Sprintf("part-%02d.parquet row group 0 row", sameTo), fmt.Sprintf("series %q has bucket %d of 16", sameShard, (sameTo+12)%16), fmt.Sprintf(`partition column "b" says %d`, sameTo)}},
		{name: "lie across shards", lake: bucketLake{kind: source.KindParquet, move: map[string]int{otherShard: otherTo}},
			spec: shard.Spec{Index: 0, Count: 4, Hash: shard.HashIcebergBucket},
			err:  []string{"b=0/part-00.parquet row group 0 row", fmt.Sprintf("series %q", otherShard), "belong to shard 1 of 4, whose job skips this file"}},
		{name: "wrong function", lake: bucketLake{kind: source.KindDelta},
			spec: shard.Spec{Index: 1, Count: 4, Hash: shard.HashXXH64}, err: []string{"under xxhash64", "needs --shard-function iceberg-bucket"}},
		{name: "shards do not divide buckets", lake: bucketLake{kind: source.KindDelta},
			spec: shard.Spec{Index: 1, Count: 3, Hash: shard.HashIcebergBucket}, err: []string{"shard count 3 does not divide the 16 buckets"}},
		{name: "not sharded", lake: bucketLake{kind: source.KindDelta},
			spec: shard.Spec{}, err: []string{"needs a shard count"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.lake
			l.buckets, l.hash, l.series = 16, shard.HashIcebergBucket, 120
			lake := l.write(t)
			if tc.part == (shard.Partition{}) {
				tc.part = shard.Partition{Column: partCol, Buckets: 16}
			}
			if tc.spec == (shard.Spec{}) && tc.name != "not sharded" {
				tc.spec = shard.Spec{Index: 1, Count: 4, Hash: shard.HashIcebergBucket}
			}
			out := filepath.Join(t.TempDir(), "PET.shard-0001")
			_, err := build(t, lake, out, func(o *Options) { o.Shard, o.ShardPartition = tc.spec, tc.part })
			if err == nil {
				t.Fatal("built, want an error")
			}
			for _, s := range tc.err {
				if !strings.Contains(err.Error(), s) {
					t.Fatalf("error %q does not say %q", err, s)
				}
			}
			if _, err := os.Stat(filepath.Join(out, "CURRENT")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("something was published: %v", err)
			}
		})
	}
}

// TestShardByPartitionIceberg: an Iceberg table's partition values are
// transforms read through its spec, not a column: --shard-by-partition on
// one is a usage error pointing at iceberg-bucket.
func TestShardByPartitionIceberg(t *testing.T) {
	wh := t.TempDir()
	tables, err := testiceberg.Write(context.Background(), wh)
	if err != nil {
		t.Fatal(err)
	}
	_, err = build(t, testiceberg.TableDir(wh, tables[0].Name), filepath.Join(t.TempDir(), "PET.shard-0000"), func(o *Options) {
		o.Shard = shard.Spec{Index: 0, Count: 2, Hash: shard.HashIcebergBucket}
		o.ShardPartition = shard.Partition{Column: "region", Buckets: 2}
	})
	if !errors.Is(err, source.ErrUsage) || !strings.Contains(err.Error(), "is an Iceberg table") || !strings.Contains(err.Error(), "iceberg-bucket") {
		t.Fatalf("err %v, want a usage error naming the Iceberg table and iceberg-bucket", err)
	}
}
