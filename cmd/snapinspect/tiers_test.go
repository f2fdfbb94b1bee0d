package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
)

// TestVortexOperands: vortex describes a tiered snapshot's cold file
// named by its dataset (with --snapshot), its snapshot directory or its
// path, and refuses what has none, with the CLI's exit statuses.
func TestVortexOperands(t *testing.T) {
	tiered := inspecttest.BuildTiered(t, filepath.Join(t.TempDir(), "t"), coldfile.Policy{HotRows: 1})
	cold1 := filepath.Join(tiered, "snapshots", "000001", coldfile.FileName)
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout (code 0) or stderr
	}{
		{[]string{"vortex", tiered}, 0, "cold file of snapshot 2 of PRICES"},
		{[]string{"vortex", tiered, "--snapshot", "1"}, 0, "cold file of snapshot 1 of PRICES"},
		{[]string{tiered, "vortex", "-s", "1"}, 0, "cold file of snapshot 1 of PRICES"},
		{[]string{"vortex", filepath.Dir(cold1)}, 0, "layout:"},
		{[]string{"vortex", cold1}, 0, "series_code: vortex."},
		{[]string{"vortex", "ROOT/PRICES"}, 1, "has no cold file: it is not tiered"},
		{[]string{"vortex", cold1, "--snapshot", "1"}, 2, "--snapshot needs a dataset directory"},
		{[]string{"vortex", tiered, "--snapshot", "9"}, 2, "does not exist"},
		{[]string{"vortex", filepath.Join(tiered, "nope")}, 2, "no such file"},
		{[]string{"vortex", filepath.Join(tiered, "snapshots", "000001", "data.arrow")}, 1, "magic"},
	} {
		out, errOut, code := runCmd(t, tc.args...)
		got := out
		if tc.code != 0 {
			got = errOut
		}
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("%q: exit %d (want %d), want %q in:\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
	out, errOut, code := runCmd(t, "vortex", tiered, "--json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s%s", code, err, out, errOut)
	}
	for _, k := range []string{"file", "rows", "dtype", "columns", "encodings", "describe", "dataset", "snapshot_id"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("vortex --json lacks %q", k)
		}
	}
	if doc["dataset"] != "PRICES" || doc["snapshot_id"] != float64(2) {
		t.Errorf("dataset %v snapshot_id %v", doc["dataset"], doc["snapshot_id"])
	}
	out, _, code = runCmd(t, tiered)
	if code != 0 || !strings.Contains(out, "tiers (the last 1 rows of each series hot") || !strings.Contains(out, "cold  vortex") {
		t.Errorf("summary of a tiered snapshot: exit %d\n%s", code, out)
	}
}
