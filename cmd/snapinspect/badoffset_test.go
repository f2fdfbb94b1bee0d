package main

import (
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
)

// TestBadIndexOffset: an index with one bad string offset and resealed
// checksums makes every command that reads the snapshot fail with exit 1
// and a message naming the index, never panic.
func TestBadIndexOffset(t *testing.T) {
	_, ds := testsnap.Sample(t, t.TempDir(), "SYN", 40, 5, nil)
	inspecttest.BreakIndexOffset(t, ds)
	for _, args := range [][]string{{ds}, {ds, "--json"}, {ds, "latest", "--all"}, {ds, "series", "X"}, {ds, "diff", "1"}} {
		_, stderr, code := runCmd(t, args...)
		if code != 1 || !strings.Contains(stderr, "index.arrow") || !strings.Contains(stderr, "malformed index") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}
