package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/cliutil/clitest"
)

// TestConventions walks the command line (docs/CLI.md, Conventions).
func TestConventions(t *testing.T) {
	clitest.Check(t, newApp, run, map[string]string{
		"snapserve":  "its stdout is already JSON (the listening line); logs take --log-format json",
		"completion": "it prints a shell script",
	})
}

// TestLinksNoLakeReaders: the reason this binary exists. Linking iceberg-go
// (or the lake readers under pkg/lake/) would bring its package
// initialisation back into every server start. pkg/lake/parquetdir, which
// lists a folder's Parquet files with the standard library alone, comes
// with pkg/verify (a compaction runs its fast checks) and costs nothing at
// start.
func TestLinksNoLakeReaders(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/apache/iceberg-go") || (strings.Contains(dep, "/pkg/lake/") && !strings.HasSuffix(dep, "/pkg/lake/parquetdir")) || strings.Contains(dep, "substrait") {
			t.Errorf("snapserve links %s", dep)
		}
	}
	if !strings.Contains(string(out), "github.com/energyscope/servingsnap/pkg/serve") {
		t.Fatalf("go list -deps does not list pkg/serve: %q", out)
	}
}
