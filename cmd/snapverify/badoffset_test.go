package main

import (
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
)

// TestBadIndexOffset: an index with one bad string offset and resealed
// checksums is a finding (exit 1) at every level, never a panic (exit 2).
func TestBadIndexOffset(t *testing.T) {
	lake, ds := testsnap.Sample(t, t.TempDir(), "SYN", 40, 5, nil)
	inspecttest.BreakIndexOffset(t, ds)
	for _, args := range [][]string{{ds}, {ds, "--deep"}, {ds, "--deep", "--against", lake}, {ds, "--json"}} {
		code, out, errOut := snapverify(t, args...)
		// Open's own index checks (VerifyData) or the structure check
		// find it, whichever runs first; either way a finding naming the
		// file and the offset.
		found := strings.Contains(out, "structure") && strings.Contains(out, "outside the value buffer") ||
			strings.Contains(out, "open") && strings.Contains(out, "offset")
		if code != 1 || !strings.Contains(out, "index.arrow") || !found {
			t.Errorf("%q: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}
