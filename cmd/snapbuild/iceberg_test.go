package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/icebergtable"
)

// TestIcebergCommands: --iceberg needs --portable and no shards; the
// first build with it records the table, later builds, publish, rollback
// and gc follow their flips without the flag; iceberg sync then finds
// nothing to do; a stale table (ICEBERG.json hidden during a build, as if
// the process had died after the flip) is repaired by iceberg sync.
func TestIcebergCommands(t *testing.T) {
	root := t.TempDir()
	lake, ds := testsnap.Sample(t, root, "ICE", 20, 1, nil) // vintage 1, no portable copy
	for _, args := range [][]string{
		{"build", "--input", lake, "--out", ds, "--iceberg"},
		{"build", "--input", lake, "--out", ds, "--portable", "--iceberg", "--shards", "2"},
		{"build", "--input", lake, "--out", ds, "--portable", "--iceberg-catalog-uri", "http://127.0.0.1:1"},
		{"build", "--input", lake, "--out", ds, "--portable", "--iceberg", "--iceberg-table", "a.b"},
		{"iceberg", ds},
		{"iceberg", "sync"},
	} {
		if code, _, errOut := snapbuild(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage): %s", args, code, errOut)
		}
	}
	sync := func() icebergtable.Result {
		t.Helper()
		code, out, errOut := snapbuild("iceberg", "sync", ds, "--json")
		if code != 0 {
			t.Fatalf("iceberg sync: exit %d: %s", code, errOut)
		}
		var r icebergtable.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	build := func(extra ...string) {
		t.Helper()
		if code, _, errOut := snapbuild(append([]string{"build", "--input", lake, "--out", ds, "--max-change", "0"}, extra...)...); code != 0 {
			t.Fatalf("build %v: exit %d: %s", extra, code, errOut)
		}
	}
	build("--portable", "--iceberg") // 2
	build("--portable")              // 3: follows without the flag
	if r := sync(); r.Changed || r.Main != 3 || len(r.NoPortable) != 1 || r.NoPortable[0] != 1 {
		t.Fatalf("after two builds: %+v", r)
	}
	if code, _, errOut := snapbuild("rollback", "--to", "2", ds); code != 0 {
		t.Fatalf("rollback: %d %s", code, errOut)
	}
	if r := sync(); r.Changed || r.Main != 2 {
		t.Fatalf("after rollback: %+v", r)
	}
	build("--portable", "--no-publish") // 4, staged
	if code, _, errOut := snapbuild("publish", ds, "--id", "4"); code != 0 {
		t.Fatalf("publish: %d %s", code, errOut)
	}
	if code, _, errOut := snapbuild("gc", "--keep", "1", ds); code != 0 {
		t.Fatalf("gc: %d %s", code, errOut)
	}
	if r := sync(); r.Changed || r.Main != 4 {
		t.Fatalf("after publish and gc: %+v", r)
	}
	// A flip the table missed.
	cfg := filepath.Join(ds, icebergtable.ConfigFile)
	hidden := filepath.Join(root, "hidden.json")
	if err := os.Rename(cfg, hidden); err != nil {
		t.Fatal(err)
	}
	build("--portable") // 5
	if err := os.Rename(hidden, cfg); err != nil {
		t.Fatal(err)
	}
	if r := sync(); !r.Changed || r.Main != 5 || len(r.Added) != 1 || r.Added[0] != 5 {
		t.Fatalf("repair: %+v", r)
	}
	// A build without the copy leaves main and says why.
	code, _, errOut := snapbuild("build", "--input", lake, "--out", ds, "--max-change", "0")
	if code != 0 || !strings.Contains(errOut, "no portable copy") {
		t.Fatalf("build without --portable: exit %d, stderr %q", code, errOut)
	}
}
