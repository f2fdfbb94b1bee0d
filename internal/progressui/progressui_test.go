package progressui

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
		counts      string // the counts the line ends with, before the time
	}{
		{"scan", 0, 0, 0, true, "scan                 done", "]   "},
		{"sort", 300, 0, 0, true, "sort                 done", "] 300 rows  "},
		{"read", 300, 100, 120, true, "read                 done", "] 120 rows of 300, 0 B of 100 B  "},
		{"write", 300, 0, 300, true, "write                done", "] 300 rows of 300  "},
		{"write", 300, 0, 150, false, "write                stopped", "] 150 rows of 300  "},
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
		if !regexp.MustCompile(regexp.QuoteMeta(c.counts) + `\d+\.\d\ds$`).MatchString(last) {
			t.Errorf("%s %d/%d done=%v: last line %q, want it to end %q and the seconds", c.name, c.add, c.rows, c.done, last, c.counts)
		}
		if strings.Contains(last, "0 %") {
			t.Errorf("%s: last line %q still shows 0 %%", c.name, last)
		}
	}
}

// TestWriter: a message written while bars are drawn comes out (above
// them); without bars it goes to the writer given.
func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	r, stop, err := Start(ModeBar, &buf, "build")
	if err != nil {
		t.Fatal(err)
	}
	p := r.Phase("read", 10, 0)
	fmt.Fprintln(Writer(r, &buf), "snapbuild: process 7 holds the write lock")
	p.Add(10, 0)
	p.Done()
	stop()
	if out := buf.String(); !strings.Contains(out, "snapbuild: process 7 holds the write lock\n") || !strings.Contains(out, "read") {
		t.Errorf("bars and message: %q", out)
	}
	var plain bytes.Buffer
	if w := Writer(progress.Nop, &plain); w != &plain {
		t.Errorf("Writer(Nop) = %v, want the writer given", w)
	}
}
