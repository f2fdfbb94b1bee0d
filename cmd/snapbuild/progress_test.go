package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestProgress: --progress=json writes one JSON line per update on stderr
// for gen, build (every phase; the external ones under --memory) and
// convert; without the flag, off a terminal, stderr stays empty.
func TestProgress(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	phases := func(t *testing.T, stderr string) []string {
		t.Helper()
		var ps []string
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			var u struct {
				Task, Phase string
				Done        bool
			}
			if err := json.Unmarshal([]byte(line), &u); err != nil {
				t.Fatalf("not a JSON line: %q", line)
			}
			if u.Done {
				ps = append(ps, u.Task+":"+u.Phase)
			}
		}
		return ps
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gen", "--out", lake, "--series", "60", "--progress=json"}, "gen:write"},
		{[]string{"build", "--input", lake, "--out", filepath.Join(dir, "MEM"), "--progress=json"}, "build:scan build:read build:sort build:write build:publish"},
		{[]string{"build", "--input", lake, "--out", filepath.Join(dir, "EXT"), "--memory", "64KiB", "--progress", "json"}, "build:scan build:read and sort runs build:merge and write build:publish"},
		{[]string{"convert", filepath.Join(lake, "year=2024", "part-0.parquet"), filepath.Join(dir, "x.arrow"), "--progress=json"}, "convert:convert"},
	} {
		code, _, stderr := snapbuild(c.args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", c.args, code, stderr)
		}
		if got := strings.Join(phases(t, stderr), " "); got != c.want {
			t.Errorf("%q: phases done %q, want %q", c.args, got, c.want)
		}
	}
	if code, _, stderr := snapbuild("build", "--input", lake, "--out", filepath.Join(dir, "QUIET")); code != 0 || stderr != "" {
		t.Errorf("build without --progress off a terminal: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := snapbuild("build", "--input", lake, "--out", filepath.Join(dir, "BAD"), "--progress=loud"); code != 2 || !strings.Contains(stderr, "--progress") {
		t.Errorf("bad --progress: exit %d, %q", code, stderr)
	}
	if code, _, stderr := snapbuild("build", "--input", lake, "--out", filepath.Join(dir, "BAD"), "--memory=lots"); code != 2 || !strings.Contains(stderr, "--memory") {
		t.Errorf("bad --memory: exit %d, %q", code, stderr)
	}
}
