package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
	"github.com/energyscope/servingsnap/pkg/verify"
)

// TestTiered: a tiered snapshot verifies intact at every level, the
// summary line and the JSON count its cold rows, and a damaged cold file
// exits 1 naming it.
func TestTiered(t *testing.T) {
	root := t.TempDir()
	lake, ds := testsnap.Sample(t, root, "SYN", 60, 5, func(o *sortwrite.Options) {
		o.BatchRows = 2000
		o.Tiers = coldfile.Policy{HotRows: 4}
	})
	for _, args := range [][]string{{ds}, {ds, "--deep"}, {ds, "--deep", "--against", lake}} {
		code, out, errOut := snapverify(t, args...)
		if code != 0 || !strings.Contains(out, "intact") || !strings.Contains(out, "rows cold in") {
			t.Fatalf("%q: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	code, out, _ := snapverify(t, ds, "--deep", "--json")
	var r verify.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if r.ColdRows == 0 || r.ColdChunks == 0 || r.ColdRows >= r.Rows {
		t.Errorf("cold_rows %d cold_chunks %d rows %d", r.ColdRows, r.ColdChunks, r.Rows)
	}
	cold := filepath.Join(ds, "snapshots", "000001", coldfile.FileName)
	b, err := os.ReadFile(cold)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(cold, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = snapverify(t, ds)
	if code != 1 || !strings.Contains(out, "snapshots/000001/cold.vortex: [checksum]") {
		t.Errorf("damaged cold file: exit %d\n%s", code, out)
	}
}
