package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strconv"
)

// Cluster is the file of `snapbuild serve --cluster`: where each shard is
// served. Its top-level "shards" applies to every sharded dataset under the
// root; "datasets" overrides it for one dataset:
//
//	{"shards": {"0": ["grpc://a:8815"], "1": ["grpc://b:8815"]},
//	 "datasets": {"NG": {"shards": {"0": ["grpc://c:8815"]}}}}
type Cluster struct {
	Shards   Locations            `json:"shards"`
	Datasets map[string]Locations `json:"-"`
}

// Locations maps a shard index to the Flight URIs that serve it.
type Locations map[int][]string

// For returns the locations of shard i of dataset (nil if none).
func (c *Cluster) For(dataset string, i int) []string {
	if c == nil {
		return nil
	}
	if l, ok := c.Datasets[dataset]; ok {
		return l[i]
	}
	return c.Shards[i]
}

// ReadCluster reads and parses a cluster file.
func ReadCluster(path string) (*Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCluster(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseCluster decodes a cluster file strictly: unknown fields, shard keys
// that are not indexes and locations that are not grpc://, grpc+tcp:// or
// grpc+tls:// URIs with a host and port are errors.
func ParseCluster(b []byte) (*Cluster, error) {
	var raw struct {
		Shards   map[string][]string `json:"shards"`
		Datasets map[string]struct {
			Shards map[string][]string `json:"shards"`
		} `json:"datasets"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a cluster file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a cluster file: trailing data after the JSON object")
	}
	if raw.Shards == nil && raw.Datasets == nil {
		return nil, errors.New(`cluster file: want {"shards": {"0": ["grpc://host:port"], ...}}`)
	}
	c := &Cluster{Datasets: map[string]Locations{}}
	var err error
	if c.Shards, err = parseLocations(raw.Shards, "shards"); err != nil {
		return nil, err
	}
	for name, d := range raw.Datasets {
		if c.Datasets[name], err = parseLocations(d.Shards, "datasets."+name+".shards"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func parseLocations(m map[string][]string, where string) (Locations, error) {
	out := Locations{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= MaxShards || strconv.Itoa(i) != k {
			return nil, fmt.Errorf("cluster file: %s: key %q is not a shard index (0 to %d)", where, k, MaxShards-1)
		}
		if len(m[k]) == 0 {
			return nil, fmt.Errorf("cluster file: %s[%q]: no locations", where, k)
		}
		for _, loc := range m[k] {
			if err := validLocation(loc); err != nil {
				return nil, fmt.Errorf("cluster file: %s[%q]: %w", where, k, err)
			}
		}
		out[i] = m[k]
	}
	return out, nil
}

func validLocation(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("location %q: %w", s, err)
	}
	switch u.Scheme {
	case "grpc", "grpc+tcp", "grpc+tls":
	default:
		return fmt.Errorf("location %q: scheme must be grpc, grpc+tcp or grpc+tls", s)
	}
	if u.Hostname() == "" || u.Port() == "" {
		return fmt.Errorf("location %q: want SCHEME://HOST:PORT", s)
	}
	return nil
}
