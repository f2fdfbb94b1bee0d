package shard

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestOfStable pins the hash: these assignments are on disk in every
// sharded dataset, so a change of Of must fail here first.
func TestOfStable(t *testing.T) {
	for _, tc := range []struct {
		id   string
		n    int
		want int
	}{
		{"", 3, Of("", 3)}, // defined for the empty id too
		{"PET.A", 1, 0},
	} {
		if got := Of(tc.id, tc.n); got != tc.want {
			t.Errorf("Of(%q, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
	// xxhash64 of "PET.RWTC.D" etc., computed independently (Python's
	// xxhash.xxh64_intdigest) and recorded here.
	golden, err := os.ReadFile(filepath.Join("testdata", "of.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for n, line := range strings.Split(strings.TrimSpace(string(golden)), "\n") {
		var id string
		var count, want int
		if _, err := fmt.Sscanf(line, "%s %d %d", &id, &count, &want); err != nil {
			t.Fatalf("of.golden line %d: %v", n+1, err)
		}
		if got := Of(id, count); got != want {
			t.Errorf("Of(%q, %d) = %d, want %d (of.golden line %d)", id, count, got, want, n+1)
		}
	}
}

// TestOfBalances: 30,000 EIA-like ids spread within 5% of even over 3 and
// 7 shards, although they share long prefixes.
func TestOfBalances(t *testing.T) {
	for _, n := range []int{3, 7} {
		counts := make([]int, n)
		const ids = 30000
		for i := 0; i < ids; i++ {
			counts[Of(fmt.Sprintf("PET.EMM_EPM0_PTE_NUS_DPG.W%05d", i), n)]++
		}
		for s, c := range counts {
			if d := float64(c)/float64(ids/n) - 1; d > 0.05 || d < -0.05 {
				t.Errorf("n=%d shard %d holds %d of %d ids (%.1f%% off even)", n, s, c, ids, 100*d)
			}
		}
	}
}

func TestParseSpec(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == JobIndexEnv {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		in, env string
		want    Spec
		err     string
	}{
		{in: "0/3", want: Spec{Index: 0, Count: 3}},
		{in: "2/3", want: Spec{Index: 2, Count: 3}},
		{in: "0/1", want: Spec{Index: 0, Count: 1}},
		{in: "$JOB_COMPLETION_INDEX/4", env: "3", want: Spec{Index: 3, Count: 4}},
		{in: "${JOB_COMPLETION_INDEX}/4", env: "1", want: Spec{Index: 1, Count: 4}},
		{in: "$JOB_COMPLETION_INDEX/4", err: "JOB_COMPLETION_INDEX is not set"},
		{in: "$JOB_COMPLETION_INDEX/4", env: "4", err: "index \"4\" must be an integer from 0 to 3"},
		{in: "3/3", err: "from 0 to 2"},
		{in: "-1/3", err: "from 0 to 2"},
		{in: "1/0", err: "count \"0\""},
		{in: "1/x", err: "count \"x\""},
		{in: "3", err: "want INDEX/COUNT"},
		{in: "a/3", err: "index \"a\""},
		{in: "0/10000", err: "from 1 to 9999"},
	} {
		got, err := ParseSpec(tc.in, env(tc.env))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSpec(%q) error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSpec(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "0", want: []int{0}},
		{in: "2,0,1", want: []int{0, 1, 2}},
		{in: "0,2-4,3", want: []int{0, 2, 3, 4}},
		{in: " 1 , 2 ", want: []int{1, 2}},
		{in: "", err: "not a shard index"},
		{in: "a", err: "not a shard index"},
		{in: "3-1", err: "LOW ≤ HIGH"},
		{in: "1,", err: "not a shard index"},
		{in: "-1", err: "not a shard index"},
	} {
		got, err := ParseList(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseList(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestMapRoundTripAndGolden(t *testing.T) {
	m := NewMap("PET", 3, "")
	golden := filepath.Join("testdata", "SHARDS.json")
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Encode(); string(got) != string(want) {
		t.Errorf("NewMap(PET, 3).Encode() =\n%s\nwant (%s)\n%s", got, golden, want)
	}
	back, err := ParseMap(want)
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Errorf("ParseMap(golden) = %+v, %v; want %+v", back, err, m)
	}
}

func TestParseMapErrors(t *testing.T) {
	good := string(NewMap("PET", 2, "").Encode())
	for _, tc := range []struct {
		name, doc, err string
	}{
		{"not json", "{", "not a shard map"},
		{"unknown field", strings.Replace(good, `"hash"`, `"extra": 1, "hash"`, 1), "unknown field"},
		{"trailing", good + "{}", "trailing data"},
		{"format", strings.Replace(good, MapFormat, "other", 1), `format "other"`},
		{"version", strings.Replace(good, `"format_version": 1`, `"format_version": 2`, 1), "format_version 2 not supported"},
		{"hash", strings.Replace(good, HashXXH64, "crc32", 1), `hash "crc32"`},
		{"count", strings.Replace(good, `"count": 2`, `"count": 3`, 1), "count is 3 but 2 shards"},
		{"dir", strings.Replace(good, "PET.shard-0001", "PET.shard-9", 1), `want "PET.shard-0001"`},
		{"index", strings.Replace(good, `"index": 1`, `"index": 5`, 1), "has index 5"},
		{"dataset", strings.Replace(good, `"dataset": "PET"`, `"dataset": "../x"`, 1), "not allowed"},
	} {
		_, err := ParseMap([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: ParseMap error %v, want one containing %q", tc.name, err, tc.err)
		}
	}
}

func TestEnsure(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "PET")
	if _, err := ReadMap(dir); !errors.Is(err, ErrNoMap) {
		t.Fatalf("ReadMap of nothing: %v, want ErrNoMap", err)
	}
	m, err := Ensure(dir, 3, "")
	if err != nil || m.Count != 3 {
		t.Fatalf("Ensure: %v, %v", m, err)
	}
	if _, err := Ensure(dir, 3, ""); err != nil {
		t.Fatalf("Ensure again: %v", err)
	}
	if _, err := Ensure(dir, 4, ""); err == nil || !strings.Contains(err.Error(), "split into 3 shards, not 4") {
		t.Fatalf("Ensure with another count: %v", err)
	}
	if got, want := ShardDir(dir, 2), filepath.Join(root, "PET.shard-0002"); got != want {
		t.Errorf("ShardDir = %s, want %s", got, want)
	}
	// A map copied under another dataset's name is refused.
	other := filepath.Join(root, "NG")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, MapFile), m.Encode(), 0o644)
	if _, err := ReadMap(other); err == nil || !strings.Contains(err.Error(), `for dataset "PET", directory is "NG"`) {
		t.Errorf("ReadMap of a copied map: %v", err)
	}
}

func TestParseCluster(t *testing.T) {
	c, err := ParseCluster([]byte(`{"shards": {"0": ["grpc://127.0.0.1:1"], "1": ["grpc://a:2", "grpc+tls://b:3"]},
		"datasets": {"NG": {"shards": {"0": ["grpc+tcp://c:4"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.For("PET", 1); !reflect.DeepEqual(got, []string{"grpc://a:2", "grpc+tls://b:3"}) {
		t.Errorf("For(PET, 1) = %v", got)
	}
	if got := c.For("NG", 0); !reflect.DeepEqual(got, []string{"grpc+tcp://c:4"}) {
		t.Errorf("For(NG, 0) = %v", got)
	}
	if got := c.For("NG", 1); got != nil {
		t.Errorf("For(NG, 1) = %v; a dataset's own map replaces the default", got)
	}
	var nilc *Cluster
	if nilc.For("PET", 0) != nil {
		t.Error("nil cluster has locations")
	}
	for _, tc := range []struct{ doc, err string }{
		{`[]`, "not a cluster file"},
		{`{}`, `want {"shards"`},
		{`{"shard": {}}`, "unknown field"},
		{`{"shards": {"x": ["grpc://a:1"]}}`, `key "x" is not a shard index`},
		{`{"shards": {"01": ["grpc://a:1"]}}`, `key "01"`},
		{`{"shards": {"0": []}}`, "no locations"},
		{`{"shards": {"0": ["http://a:1"]}}`, "scheme must be grpc"},
		{`{"shards": {"0": ["grpc://a"]}}`, "want SCHEME://HOST:PORT"},
		{`{"shards": {"0": ["grpc://a:1"]}} x`, "trailing data"},
		{`{"datasets": {"NG": {"shards": {"0": ["ftp://a:1"]}}}}`, "datasets.NG.shards"},
	} {
		_, err := ParseCluster([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ParseCluster(%s) error %v, want %q", tc.doc, err, tc.err)
		}
	}
}

func FuzzParseMap(f *testing.F) {
	f.Add(NewMap("PET", 3, "").Encode())
	f.Add([]byte(`{"format":"servingsnap-shardmap"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMap(b)
		if err != nil {
			return
		}
		if m.Validate() != nil {
			t.Fatal("ParseMap returned an invalid map")
		}
		if _, err := ParseMap(m.Encode()); err != nil {
			t.Fatalf("re-encoded map does not parse: %v", err)
		}
	})
}

func FuzzParseCluster(f *testing.F) {
	f.Add([]byte(`{"shards": {"0": ["grpc://127.0.0.1:1"]}}`))
	f.Add([]byte(`{"datasets": {"NG": {"shards": {"1": ["grpc+tls://h:2"]}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCluster(b)
		if err != nil {
			return
		}
		for i, l := range c.Shards {
			if i < 0 || len(l) == 0 {
				t.Fatalf("shard %d: %v", i, l)
			}
		}
	})
}

func TestWhole(t *testing.T) {
	root := t.TempDir()
	if m, dirs, err := Whole(filepath.Join(root, "PET")); m != nil || dirs != nil || err != nil {
		t.Fatalf("Whole of a plain directory = %v, %v, %v", m, dirs, err)
	}
	if _, err := Ensure(filepath.Join(root, "PET"), 2, ""); err != nil {
		t.Fatal(err)
	}
	m, dirs, err := Whole(filepath.Join(root, "PET") + "/")
	if err != nil || m.Count != 2 || !reflect.DeepEqual(dirs, []string{filepath.Join(root, "PET.shard-0000"), filepath.Join(root, "PET.shard-0001")}) {
		t.Fatalf("Whole = %v, %v, %v", m, dirs, err)
	}
	os.WriteFile(filepath.Join(root, "PET", MapFile), []byte("{}"), 0o644)
	if _, _, err := Whole(filepath.Join(root, "PET")); err == nil {
		t.Fatal("Whole of a broken map: no error")
	}
}

// TestEachShard: every shard in index order with its spec and
// directory; the first error stops the walk and names its shard.
func TestEachShard(t *testing.T) {
	m := &Map{Dataset: "PET", Count: 3, Hash: HashIcebergBucket}
	dirs := []string{"a", "b", "c"}
	got, err := EachShard(m, dirs, func(sp Spec, dir string) (string, error) {
		return fmt.Sprintf("%d/%d %s %s", sp.Index, sp.Count, sp.HashName(), dir), nil
	})
	want := []string{"0/3 iceberg-bucket a", "1/3 iceberg-bucket b", "2/3 iceberg-bucket c"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("EachShard = %q, %v; want %q", got, err, want)
	}
	var seen []int
	_, err = EachShard(m, dirs, func(sp Spec, _ string) (int, error) {
		seen = append(seen, sp.Index)
		if sp.Index == 1 {
			return 0, os.ErrNotExist
		}
		return sp.Index, nil
	})
	if !errors.Is(err, os.ErrNotExist) || err.Error() != "shard 1 of PET: file does not exist" || !reflect.DeepEqual(seen, []int{0, 1}) {
		t.Errorf("EachShard stopping = %v after %v", err, seen)
	}
	if _, err := EachShard(m, dirs[:2], func(Spec, string) (int, error) { return 0, nil }); err == nil {
		t.Error("EachShard ran with fewer directories than shards")
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"0/3", "$JOB_COMPLETION_INDEX/4", "9/10", "a/b", "/"} {
		f.Add(s, "2")
	}
	f.Fuzz(func(t *testing.T, s, env string) {
		sp, err := ParseSpec(s, func(string) string { return env })
		if err != nil {
			return
		}
		if sp.Count < 1 || sp.Count > MaxShards || sp.Index < 0 || sp.Index >= sp.Count {
			t.Fatalf("ParseSpec(%q) = %v", s, sp)
		}
	})
}

func FuzzParseList(f *testing.F) {
	for _, s := range []string{"0", "0,2-4", "3-1", "1,,2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseList(s)
		if err != nil {
			return
		}
		for i := range l {
			if l[i] < 0 || l[i] >= MaxShards || i > 0 && l[i] <= l[i-1] {
				t.Fatalf("ParseList(%q) = %v: not sorted unique indexes", s, l)
			}
		}
	})
}

// TestBucket: Iceberg's bucket transform of strings, checked against the
// table spec's values (Appendix B: murmur3_x86_32 of "iceberg" is
// 1210000089) and pyiceberg's bucket(16) of a few ids.
func TestBucket(t *testing.T) {
	if got := Bucket("iceberg", math.MaxInt32); got != 1210000089 {
		t.Errorf("Bucket(iceberg) = %d, want the spec's hash 1210000089", got)
	}
	// a hash whose sign bit is set: cleared before the mod
	for _, id := range []string{"", "a", "PET.RWTC.D", "ELEC.GEN.ALL-US-99.M", "ümlaut"} {
		b := Bucket(id, 16)
		if b < 0 || b >= 16 {
			t.Errorf("Bucket(%q, 16) = %d", id, b)
		}
		if Bucket(id, 4) != b%4 {
			t.Errorf("Bucket(%q, 4) = %d, want bucket(16) mod 4 = %d: shard i of 4 holds buckets i, i+4, …", id, Bucket(id, 4), b%4)
		}
	}
	f, err := Func(HashIcebergBucket)
	if err != nil || f("iceberg", 7) != Bucket("iceberg", 7) {
		t.Errorf("Func(%s): %v", HashIcebergBucket, err)
	}
	if _, err := Func("md5"); err == nil {
		t.Error("Func accepted an unknown function")
	}
	// a map records its function, and Ensure refuses another one
	dir := filepath.Join(t.TempDir(), "PET")
	m, err := Ensure(dir, 4, HashIcebergBucket)
	if err != nil || m.Hash != HashIcebergBucket || m.Of("iceberg") != Bucket("iceberg", 4) {
		t.Fatalf("Ensure with iceberg-bucket: %+v %v", m, err)
	}
	if _, err := Ensure(dir, 4, HashXXH64); err == nil || !strings.Contains(err.Error(), "split by iceberg-bucket, not xxhash64") {
		t.Errorf("Ensure with another function: %v", err)
	}
	if _, err := ParseMap(m.Encode()); err != nil {
		t.Errorf("an iceberg-bucket map does not parse: %v", err)
	}
}
