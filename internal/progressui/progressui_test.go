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

// TestBarsFinish: a finished phase reads "done" whatever it counted (a
// phase may count nothing, or less than its estimate), a phase the work
// abandoned reads "stopped", and none is left at "0 %".
func TestBarsFinish(t *testing.T) {
	for _, c := range []struct {
		name        string
		rows, bytes int64 // the estimate
		add         int64 // rows counted
		done        bool
		want        string
	}{
		{"scan", 0, 0, 0, true, "scan                 done"},
		{"sort", 300, 0, 0, true, "sort                 done"},
		{"read", 300, 100, 120, true, "read                 done"},
		{"write", 300, 0, 300, true, "write                done"},
		{"write", 300, 0, 150, false, "write                stopped"},
	} {
		var buf bytes.Buffer
		r, stop, err := Start(ModeBar, &buf, "build")
		if err != nil {
			t.Fatal(err)
		}
		p := r.Phase(c.name, c.rows, c.bytes)
		p.Add(c.add, 0)
		if c.done {
			p.Done()
		}
		stop()
		lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(strings.TrimLeft(last, "\x1b[0123456789AJ"), c.want) {
			t.Errorf("%s %d/%d done=%v: last line %q, want it to start %q", c.name, c.add, c.rows, c.done, last, c.want)
		}
		if strings.Contains(last, "0 %") {
			t.Errorf("%s: last line %q still shows 0 %%", c.name, last)
		}
	}
}
