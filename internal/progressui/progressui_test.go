package progressui

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/progress"
)

// TestStart: auto shows nothing off a terminal, json writes lines, bar
// draws even off a terminal, none shows nothing, anything else is refused.
func TestStart(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		mode string
		want string // substring of the output; "" for none
	}{
		{"auto", ""},
		{"", ""},
		{"none", ""},
		{"json", `"phase":"read"`},
		{"bar", "read"},
	} {
		var buf bytes.Buffer
		r, stop, err := Start(c.mode, &buf, "build")
		if err != nil {
			t.Fatalf("%q: %v", c.mode, err)
		}
		p := r.Phase("read", 10, 100)
		p.Add(10, 100)
		p.Done()
		stop()
		out := buf.String()
		if c.want == "" && out != "" {
			t.Errorf("%q: wrote %q, want nothing", c.mode, out)
		}
		if c.want != "" && !strings.Contains(out, c.want) {
			t.Errorf("%q: wrote %q, want %q in it", c.mode, out, c.want)
		}
		if c.mode == "auto" {
			if r2, _, _ := Start("auto", f, "build"); r2 != progress.Nop {
				t.Error("auto on a regular file is not Nop")
			}
		}
	}
	if _, _, err := Start("fancy", &bytes.Buffer{}, "build"); err == nil {
		t.Error("an unknown mode was accepted")
	}
}
