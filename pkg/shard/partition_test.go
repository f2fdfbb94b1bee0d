package shard

import (
	"strings"
	"testing"
)

func TestParsePartition(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Partition
		err  string
	}{
		{in: "sid_bucket:16", want: Partition{Column: "sid_bucket", Buckets: 16}},
		{in: "a:b:4", want: Partition{Column: "a:b", Buckets: 4}},
		{in: "b:1", want: Partition{Column: "b", Buckets: 1}},
		{in: "sid_bucket", err: "want COLUMN:BUCKETS"},
		{in: ":16", err: "column name is empty"},
		{in: "b:0", err: "bucket count \"0\""},
		{in: "b:-4", err: "bucket count \"-4\""},
		{in: "b:x", err: "bucket count \"x\""},
		{in: "b:", err: "bucket count \"\""},
		{in: "b:2147483648", err: "from 1 to 2147483647"},
	} {
		got, err := ParsePartition(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePartition(%q) error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParsePartition(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestPartitionFitsAndBucket(t *testing.T) {
	p := Partition{Column: "b", Buckets: 16}
	for _, tc := range []struct {
		spec Spec
		err  string
	}{
		{spec: Spec{Index: 0, Count: 4}},
		{spec: Spec{Index: 3, Count: 16}},
		{spec: Spec{Index: 0, Count: 1}},
		{spec: Spec{Index: 0, Count: 3}, err: "shard count 3 does not divide the 16 buckets"},
		{spec: Spec{Index: 0, Count: 32}, err: "shard count 32 does not divide"},
		{spec: Spec{}, err: "needs a shard count"},
	} {
		err := p.Fits(tc.spec)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Fits(%v) = %v, want %q", tc.spec, err, tc.err)
		}
	}
	for _, tc := range []struct {
		value string
		want  int
		err   string
	}{
		{value: "0", want: 0},
		{value: "15", want: 15},
		{value: " 7", want: 7},
		{value: "16", err: "bucket 16, outside the 16 buckets [0, 16)"},
		{value: "-1", err: "bucket -1, outside"},
		{value: "x", err: "holds \"x\", not an integer bucket"},
		{value: "", err: "not an integer bucket"},
		{value: "1.0", err: "not an integer bucket"},
	} {
		got, err := p.Bucket(tc.value)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Bucket(%q) error %v, want one containing %q", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Bucket(%q) = %d, %v; want %d", tc.value, got, err, tc.want)
		}
	}
}

// TestPartitionOf: a series' bucket among B under the spec's function, and
// its shard among N dividing B is that bucket mod N (what lets a shard
// job read only its buckets' files).
func TestPartitionOf(t *testing.T) {
	p := Partition{Column: "b", Buckets: 16}
	for _, hash := range []string{HashXXH64, HashIcebergBucket} {
		for _, n := range []int{1, 2, 4, 8, 16} {
			s := Spec{Count: n, Hash: hash}
			for i := 0; i < 500; i++ {
				id := "PET.S" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('0'+i%10))
				if b, sh := p.Of(s, id), s.Of(id); b%n != sh {
					t.Fatalf("%s: %q has bucket %d of 16 but shard %d of %d", hash, id, b, sh, n)
				}
			}
		}
	}
	// The spec's value for "iceberg" (Appendix B: murmur3 1210000089).
	if got := p.Of(Spec{Count: 4, Hash: HashIcebergBucket}, "iceberg"); got != 1210000089%16 {
		t.Errorf("bucket(16, \"iceberg\") = %d, want %d", got, 1210000089%16)
	}
}
