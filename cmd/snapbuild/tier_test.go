package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// TestTierFlagErrors: a bad tier flag is a usage error (exit 2) naming
// the flag and what it wants, and nothing is built.
func TestTierFlagErrors(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	if code, _, e := snapbuild("gen", "--out", lake, "--series", "5"); code != 0 {
		t.Fatal(e)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"hot-rows 0", []string{"--hot-rows", "0"}, "--hot-rows 0: want a positive number of rows"},
		{"hot-rows negative", []string{"--hot-rows", "-3"}, "--hot-rows -3: want a positive number of rows"},
		{"hot-since not a date", []string{"--hot-since", "yesterday"}, `--hot-since "yesterday" is not YYYY-MM-DD`},
		{"hot-since month 13", []string{"--hot-since", "2024-13-01"}, `--hot-since "2024-13-01" is not YYYY-MM-DD`},
		{"hot-since a month", []string{"--hot-since", "2024-05"}, `--hot-since "2024-05" is not YYYY-MM-DD`},
		{"hot-since empty", []string{"--hot-since", ""}, `--hot-since "": want a date YYYY-MM-DD`},
		{"vortex with hot-since", []string{"--format", "vortex", "--hot-since", "2020-01-01"}, "--format vortex puts every row in cold.vortex: it takes no --hot-since or --hot-rows"},
		{"vortex with hot-rows", []string{"--format", "vortex", "--hot-rows", "5"}, "--format vortex puts every row in cold.vortex: it takes no --hot-since or --hot-rows"},
		{"unknown format", []string{"--format", "parquet"}, `--format "parquet": want arrow or vortex`},
		{"format case", []string{"--format", "Vortex"}, `--format "Vortex": want arrow or vortex`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "root", strings.ReplaceAll(tc.name, " ", "_"))
			code, stdout, stderr := snapbuild(append([]string{"build", "--input", lake, "--out", out}, tc.flags...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "snapbuild: ") {
				t.Errorf("want one error line, got %q", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q", stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a refused build created %s", out)
			}
		})
	}
}

// buildJSON runs build --json and decodes its summary.
func buildJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, stdout, stderr := snapbuild(append([]string{"build", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("build %q: exit %d %s", args, code, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	return v
}

func manifestOf(t *testing.T, dir string) *manifest.Manifest {
	t.Helper()
	d, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Current()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTierSummary: the text and JSON summaries of a tiered build show the
// cold file with its tier and rows, data + cold rows being the rows; an
// all-hot build's files show no tier split.
func TestTierSummary(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	if code, _, e := snapbuild("gen", "--out", lake, "--series", "30"); code != 0 {
		t.Fatal(e)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		hot   bool // some rows stay hot
	}{
		{"hot-since", []string{"--hot-since", "2020-01-01"}, true},
		{"hot-rows", []string{"--hot-rows", "4"}, true},
		{"both", []string{"--hot-since", "2023-01-01", "--hot-rows", "4"}, true},
		{"vortex", []string{"--format", "vortex"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "root", tc.name)
			v := buildJSON(t, append([]string{"--input", lake, "--out", out}, tc.flags...)...)
			rows := v["rows"].(float64)
			byRole := map[string]map[string]any{}
			for _, f := range v["files"].([]any) {
				f := f.(map[string]any)
				byRole[f["role"].(string)] = f
			}
			d, c := byRole["data"], byRole["cold"]
			if c == nil || c["path"] != "snapshots/000001/cold.vortex" || c["tier"] != "cold" || d["tier"] != "hot" {
				t.Fatalf("files %v", v["files"])
			}
			if d["rows"].(float64)+c["rows"].(float64) != rows || (d["rows"].(float64) > 0) != tc.hot || c["rows"].(float64) == 0 {
				t.Errorf("data %v + cold %v rows, total %v", d["rows"], c["rows"], rows)
			}
			m := manifestOf(t, out)
			cf, _ := m.FileByRole(manifest.RoleCold)
			xf, _ := m.FileByRole(manifest.RoleIndex)
			df, _ := m.FileByRole(manifest.RoleData)
			if c["size"].(float64) != float64(cf.Size) || c["rows"].(float64) != float64(cf.Rows) {
				t.Errorf("summary %v, manifest %+v", c, cf)
			}
			if r := v["index_data_ratio"].(float64); r != float64(xf.Size)/float64(df.Size+cf.Size) {
				t.Errorf("index_data_ratio %v, want index / (data + cold)", r)
			}

			code, text, stderr := snapbuild(append([]string{"build", "--input", lake, "--out", out, "--max-change", "0"}, tc.flags...)...)
			if code != 0 {
				t.Fatal(stderr)
			}
			if !strings.Contains(text, "  cold        snapshots/000002/cold.vortex (") || !strings.Contains(text, " cold rows)") ||
				!strings.Contains(text, " hot rows)") || !strings.Contains(text, "index/rows") {
				t.Errorf("text summary:\n%s", text)
			}
		})
	}
	v := buildJSON(t, "--input", lake, "--out", filepath.Join(dir, "root", "plain"))
	for _, f := range v["files"].([]any) {
		if f.(map[string]any)["role"] == "cold" {
			t.Errorf("an all-hot build lists a cold file: %v", v["files"])
		}
	}
}

// TestTierShards: build --shards passes the tier policy to every shard.
func TestTierShards(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	if code, _, e := snapbuild("gen", "--out", lake, "--series", "40"); code != 0 {
		t.Fatal(e)
	}
	out := filepath.Join(dir, "root", "SH")
	v := buildJSON(t, "--input", lake, "--out", out, "--shards", "3", "--hot-rows", "5")
	if n := len(v["shards"].([]any)); n != 3 {
		t.Fatalf("%d shards built", n)
	}
	var rows int64
	for i := range 3 {
		m := manifestOf(t, shard.ShardDir(out, i))
		cf, ok := m.FileByRole(manifest.RoleCold)
		df, _ := m.FileByRole(manifest.RoleData)
		if !ok || m.FormatVersion != manifest.Version || m.Build.HotRows != 5 || cf.Rows == 0 || df.Rows == 0 {
			t.Errorf("shard %d: format_version %d, build %+v, files %+v", i, m.FormatVersion, m.Build, m.Files)
		}
		rows += m.Stats.Rows
	}
	plain := filepath.Join(dir, "root", "PLAIN")
	if p := buildJSON(t, "--input", lake, "--out", plain); int64(p["rows"].(float64)) != rows {
		t.Errorf("the shards hold %d rows, the unsharded build %v", rows, p["rows"])
	}
}

// TestTierPortable: the portable copy of a tiered build (written from the
// staged snapshot through the read layer, cold pieces and hot slices) is
// byte-identical to the all-hot build's.
func TestTierPortable(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	if code, _, e := snapbuild("gen", "--out", lake, "--series", "60"); code != 0 {
		t.Fatal(e)
	}
	portable := func(root string, flags ...string) manifest.File {
		out := filepath.Join(dir, root, "PET") // one dataset name: the copy names it
		buildJSON(t, append([]string{"--input", lake, "--out", out, "--portable", "--portable-row-group-rows", "500"}, flags...)...)
		f, ok := manifestOf(t, out).FileByRole(manifest.RolePortable)
		if !ok {
			t.Fatalf("%s: no portable copy", root)
		}
		return f
	}
	want := portable("hot")
	for name, flags := range map[string][]string{
		"hot-since": {"--hot-since", "2021-06-01"},
		"hot-rows":  {"--hot-rows", "3"},
		"vortex":    {"--format", "vortex"},
	} {
		if got := portable(name, flags...); got.Checksum != want.Checksum || got.Size != want.Size || got.Rows != want.Rows || got.Batches != want.Batches {
			t.Errorf("%s: portable copy %+v, all-hot %+v", name, got, want)
		}
	}
}
