// Package shard says which shard of a sharded dataset a series belongs to,
// and reads and writes the dataset's shard map (docs/FORMAT.md §Shard map)
// and a server cluster's shard locations (docs/OPERATIONS.md §Sharding).
//
// A series belongs to shard hash(series_id bytes) mod N, with the hash the
// shard map records: xxhash64 (the default), or iceberg-bucket, Iceberg's
// bucket transform (murmur3_x86_32, as Spark, Trino, pyiceberg and
// iceberg-go compute it), so a lake partitioned by bucket(B, series_id)
// already holds each shard's rows in its own files. A hash, rather than id
// ranges, needs no global knowledge: each build job decides from the id
// alone, without first reading every id to cut balanced ranges, and
// prefix-heavy ids (EIA's "PET.", "NG.") still spread evenly. The price is
// that a prefix query touches every shard.
package shard

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/twmb/murmur3"
)

// MaxShards bounds N: shard directories are numbered with four digits.
const MaxShards = 9999

// Of returns the shard of series id among n shards (n ≥ 1): xxhash64 (seed
// 0) of the id's UTF-8 bytes, mod n. The function is part of the on-disk
// contract (a shard map records "xxhash64"): changing it would move series
// between shards of datasets already built.
func Of(id string, n int) int {
	return int(xxhash.Sum64String(id) % uint64(n))
}

// Bucket is Iceberg's bucket transform of a string (the Iceberg table
// spec, Appendix B): murmur3_x86_32 (seed 0) of the UTF-8 bytes, its sign
// bit cleared, mod n. A table partitioned by bucket(B, series_id) with n
// dividing B puts the rows of shard i in buckets i, i+n, i+2n, ….
func Bucket(id string, n int) int {
	return int(int64(murmur3.StringSum32(id)&0x7fffffff) % int64(n))
}

// Func returns the shard function a shard map's hash names.
func Func(hash string) (func(id string, n int) int, error) {
	switch hash {
	case HashXXH64, "":
		return Of, nil
	case HashIcebergBucket:
		return Bucket, nil
	}
	return nil, fmt.Errorf("shard function %q not supported (want %q or %q)", hash, HashXXH64, HashIcebergBucket)
}

// DirName is the directory name of shard i of dataset: "PET.shard-0001".
// A shard is an ordinary dataset directory beside the others under the
// root, so every per-dataset tool (snapverify, snapinspect, history,
// rollback, gc, serve) works on it unchanged.
func DirName(dataset string, i int) string {
	return fmt.Sprintf("%s.shard-%04d", dataset, i)
}

// Spec is one shard of N: what `snapbuild build --shard i/N` builds, and
// the shard function (Hash, a shard map's hash; "" is xxhash64).
type Spec struct {
	Index, Count int
	Hash         string
}

// Of is the shard of id under the spec's function (Hash must be valid:
// a Spec is built from a map or a checked flag).
func (s Spec) Of(id string) int {
	f, err := Func(s.Hash)
	if err != nil {
		panic(err)
	}
	return f(id, s.Count)
}

// HashName is the spec's function as a shard map names it.
func (s Spec) HashName() string {
	if s.Hash == "" {
		return HashXXH64
	}
	return s.Hash
}

func (s Spec) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// JobIndexEnv is the variable a Kubernetes Indexed Job sets in each pod.
const JobIndexEnv = "JOB_COMPLETION_INDEX"

// ParseSpec reads "i/N". The index may be given as "$JOB_COMPLETION_INDEX"
// (or "${JOB_COMPLETION_INDEX}") when no shell expanded it, and is then
// read from the environment through getenv (os.Getenv if nil).
func ParseSpec(s string, getenv func(string) string) (Spec, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	is, ns, ok := strings.Cut(s, "/")
	if !ok {
		return Spec{}, fmt.Errorf("shard %q: want INDEX/COUNT such as 0/3 or $%s/3", s, JobIndexEnv)
	}
	if is == "$"+JobIndexEnv || is == "${"+JobIndexEnv+"}" {
		v := getenv(JobIndexEnv)
		if v == "" {
			return Spec{}, fmt.Errorf("shard %q: %s is not set", s, JobIndexEnv)
		}
		is = v
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 || n > MaxShards {
		return Spec{}, fmt.Errorf("shard %q: count %q must be an integer from 1 to %d", s, ns, MaxShards)
	}
	i, err := strconv.Atoi(is)
	if err != nil || i < 0 || i >= n {
		return Spec{}, fmt.Errorf("shard %q: index %q must be an integer from 0 to %d", s, is, n-1)
	}
	return Spec{Index: i, Count: n}, nil
}

// ParseList reads `serve --shards`: comma-separated indexes and inclusive
// ranges, "0,2,4-7". The result is sorted and without repeats.
func ParseList(s string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	add := func(i int) {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= MaxShards {
			return nil, fmt.Errorf("shards %q: %q is not a shard index (0 to %d) or a range such as 2-5", s, part, MaxShards-1)
		}
		if !isRange {
			add(a)
			continue
		}
		b, err := strconv.Atoi(hi)
		if err != nil || b < a || b >= MaxShards {
			return nil, fmt.Errorf("shards %q: range %q must be LOW-HIGH with LOW ≤ HIGH < %d", s, part, MaxShards)
		}
		for i := a; i <= b; i++ {
			add(i)
		}
	}
	slices.Sort(out)
	return out, nil
}
