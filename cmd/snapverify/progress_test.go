package main

import (
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
)

// TestProgress: --against with --progress=json reports the lake re-read
// on stderr; without the flag, off a terminal, stderr stays empty.
func TestProgress(t *testing.T) {
	lake, ds := testsnap.Sample(t, t.TempDir(), "SYN", 30, 2, nil)
	code, _, stderr := snapverify(t, ds, "--against", lake, "--progress=json")
	if code != 0 || !strings.Contains(stderr, `"task":"verify","phase":"read lake"`) || !strings.Contains(stderr, `"done":true`) {
		t.Errorf("--progress=json: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := snapverify(t, ds, "--against", lake); code != 0 || stderr != "" {
		t.Errorf("no --progress: exit %d, stderr %q", code, stderr)
	}
}
