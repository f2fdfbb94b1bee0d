package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// Shard map document identity (docs/FORMAT.md §Shard map).
const (
	MapFormat  = "servingsnap-shardmap"
	MapVersion = 1
	// MapFile is the shard map's name inside ROOT/DATASET, the directory
	// that stands for the whole sharded dataset.
	MapFile = "SHARDS.json"
	// HashXXH64 names the function of Of.
	HashXXH64 = "xxhash64"
	// HashIcebergBucket names the function of Bucket.
	HashIcebergBucket = "iceberg-bucket"
)

// ErrNoMap is returned by ReadMap when the directory holds no shard map.
var ErrNoMap = errors.New("no shard map")

// Map says which shards make a dataset. It is written once, by the first
// build of any shard, and every later shard build checks it matches: one
// shard map per dataset (see docs/OPERATIONS.md for rebalancing).
type Map struct {
	Format  string `json:"format"`
	Version int    `json:"format_version"`
	Dataset string `json:"dataset"`
	Hash    string `json:"hash"`
	Key     string `json:"key"` // what is hashed: the series id's UTF-8 bytes
	Count   int    `json:"count"`
	Shards  []Ref  `json:"shards"`
}

// Ref is one shard: its index and its dataset directory's name, a sibling
// of ROOT/DATASET.
type Ref struct {
	Index   int    `json:"index"`
	Dataset string `json:"dataset"`
}

// NewMap is the map of dataset split into n shards by the function hash
// names ("" is xxhash64).
func NewMap(dataset string, n int, hash string) *Map {
	if hash == "" {
		hash = HashXXH64
	}
	m := &Map{Format: MapFormat, Version: MapVersion, Dataset: dataset, Hash: hash, Key: "series_id", Count: n}
	for i := 0; i < n; i++ {
		m.Shards = append(m.Shards, Ref{Index: i, Dataset: DirName(dataset, i)})
	}
	return m
}

// Validate checks a map's fields against each other.
func (m *Map) Validate() error {
	if m.Format != MapFormat {
		return fmt.Errorf("format %q, want %q", m.Format, MapFormat)
	}
	if m.Version != MapVersion {
		return fmt.Errorf("format_version %d not supported (this build reads %d)", m.Version, MapVersion)
	}
	if err := manifest.ValidateDatasetName(m.Dataset); err != nil {
		return err
	}
	if _, err := Func(m.Hash); err != nil || m.Hash == "" {
		return fmt.Errorf("hash %q not supported (want %q or %q)", m.Hash, HashXXH64, HashIcebergBucket)
	}
	if m.Key != "series_id" {
		return fmt.Errorf("key %q not supported (want \"series_id\")", m.Key)
	}
	if m.Count < 1 || m.Count > MaxShards {
		return fmt.Errorf("count %d must be from 1 to %d", m.Count, MaxShards)
	}
	if len(m.Shards) != m.Count {
		return fmt.Errorf("count is %d but %d shards are listed", m.Count, len(m.Shards))
	}
	for i, r := range m.Shards {
		if r.Index != i {
			return fmt.Errorf("shards[%d] has index %d, want %d", i, r.Index, i)
		}
		if want := DirName(m.Dataset, i); r.Dataset != want {
			return fmt.Errorf("shards[%d] is dataset %q, want %q", i, r.Dataset, want)
		}
	}
	return nil
}

// Encode is the map's file content: indented JSON and a newline, the same
// bytes for the same map, so build jobs racing to create it write equal
// files.
func (m *Map) Encode() []byte {
	b, _ := json.MarshalIndent(m, "", "  ")
	return append(b, '\n')
}

// ParseMap decodes and validates a shard map; unknown fields are errors.
func ParseMap(b []byte) (*Map, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Map
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a shard map: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a shard map: trailing data after the JSON object")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// ReadMap reads dir/SHARDS.json; ErrNoMap (wrapped) if there is none. The
// map's dataset must be dir's base name.
func ReadMap(dir string) (*Map, error) {
	p := filepath.Join(dir, MapFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("%s: %w", p, ErrNoMap)
	}
	if err != nil {
		return nil, err
	}
	m, err := ParseMap(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if base := filepath.Base(dir); m.Dataset != base {
		return nil, fmt.Errorf("%s: shard map is for dataset %q, directory is %q", p, m.Dataset, base)
	}
	return m, nil
}

// Of is the shard of series id under the map's function.
func (m *Map) Of(id string) int { return m.Spec(0).Of(id) }

// Spec is shard i of the map.
func (m *Map) Spec(i int) Spec { return Spec{Index: i, Count: m.Count, Hash: m.Hash} }

// Ensure makes sure dir (ROOT/DATASET) holds the map of its dataset in n
// shards by the function hash names: it writes it (atomically) if absent,
// and refuses a different one: neither the number of shards of a dataset
// nor its function changes in place.
func Ensure(dir string, n int, hash string) (*Map, error) {
	name := filepath.Base(dir)
	want := NewMap(name, n, hash)
	if err := want.Validate(); err != nil {
		return nil, err
	}
	have, err := ReadMap(dir)
	switch {
	case err == nil:
		if have.Count != n {
			return nil, fmt.Errorf("%s: dataset %s is split into %d shards, not %d; a shard count never changes in place (build under a new dataset name, see docs/OPERATIONS.md)",
				filepath.Join(dir, MapFile), name, have.Count, n)
		}
		if have.Hash != want.Hash {
			return nil, fmt.Errorf("%s: dataset %s is split by %s, not %s; a shard function never changes in place (build under a new dataset name, see docs/OPERATIONS.md)",
				filepath.Join(dir, MapFile), name, have.Hash, want.Hash)
		}
		return have, nil
	case !errors.Is(err, ErrNoMap):
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := fileutil.WriteFileAtomic(filepath.Join(dir, MapFile), want.Encode(), 0o644); err != nil {
		// Build jobs of other shards may be writing the same bytes under
		// the same temporary name; if one of them published, that is ours.
		if have, rerr := ReadMap(dir); rerr == nil && have.Count == n && have.Hash == want.Hash {
			return have, nil
		}
		return nil, fmt.Errorf("write shard map: %w", err)
	}
	return want, nil
}

// ShardDir is the directory of shard i beside dir (ROOT/DATASET).
func ShardDir(dir string, i int) string {
	return filepath.Join(filepath.Dir(dir), DirName(filepath.Base(dir), i))
}

// Whole reports whether dir is a sharded dataset's directory (it holds a
// shard map): the map and its shard directories, in index order, or nil
// and no error for any other directory. The tools that take ROOT/DATASET
// use it to run over every shard of a whole dataset.
func Whole(dir string) (*Map, []string, error) {
	dir = filepath.Clean(dir)
	m, err := ReadMap(dir)
	if errors.Is(err, ErrNoMap) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	dirs := make([]string, m.Count)
	for i := range dirs {
		dirs[i] = ShardDir(dir, i)
	}
	return m, dirs, nil
}

// EachShard runs fn over every shard of the whole dataset m, whose
// directories are dirs (as Whole returns them), in index order, and
// returns its results in that order. The first error stops it, named by
// its shard ("shard I of DATASET: ..."). The tools that run over a whole
// sharded dataset (its history, summary and verification) run through it.
func EachShard[T any](m *Map, dirs []string, fn func(sp Spec, dir string) (T, error)) ([]T, error) {
	if len(dirs) != m.Count {
		return nil, fmt.Errorf("%s: %d shard directories for a map of %d shards", m.Dataset, len(dirs), m.Count)
	}
	out := make([]T, 0, len(dirs))
	for i, d := range dirs {
		r, err := fn(m.Spec(i), d)
		if err != nil {
			return nil, fmt.Errorf("shard %d of %s: %w", i, m.Dataset, err)
		}
		out = append(out, r)
	}
	return out, nil
}
