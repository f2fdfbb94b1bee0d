package serve

// A small runner of golden scripts in the style of pebble's datadriven
// package (STYLE.md §5), without the dependency. A script is a sequence of
// directives:
//
//	# comments and blank lines between directives are kept
//	command arg key=value key=v1,v2
//	input lines (optional)
//	----
//	expected output
//	<blank line or end of file>
//
// The output ends at the first blank line, so an output never holds one.
// go test -run TestX -rewrite writes what the commands print into the
// scripts instead of comparing.

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the golden scripts under testdata/")

// directive is one command of a script.
type directive struct {
	pos   string // file:line of the command
	cmd   string
	args  []ddArg
	input string // lines between the command and ----, joined by \n
}

type ddArg struct {
	key  string
	vals []string // nil: a bare key
}

// arg returns the values of key and whether it was given.
func (d *directive) arg(key string) ([]string, bool) {
	for _, a := range d.args {
		if a.key == key {
			return a.vals, true
		}
	}
	return nil, false
}

// argOne is the single value of key ("" and false when absent).
func (d *directive) argOne(key string) (string, bool) {
	v, ok := d.arg(key)
	if !ok || len(v) == 0 {
		return "", ok
	}
	return v[0], true
}

// ddChunk is one directive with the text around it, for rewriting.
type ddChunk struct {
	pre    string // comments and blank lines before the command
	header string // the command line and its input, verbatim, ending in \n
	d      directive
	want   string
}

func parseScript(t *testing.T, path string) ([]ddChunk, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	var chunks []ddChunk
	var pre strings.Builder
	i := 0
	trim := func(s string) string { return strings.TrimRight(s, "\r\n") }
	for i < len(lines) {
		l := trim(lines[i])
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre.WriteString(lines[i])
			i++
			continue
		}
		c := ddChunk{pre: pre.String()}
		pre.Reset()
		c.d.pos = fmt.Sprintf("%s:%d", path, i+1)
		fields := strings.Fields(l)
		c.d.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			a := ddArg{key: k}
			if ok {
				a.vals = strings.Split(v, ",")
			}
			c.d.args = append(c.d.args, a)
		}
		var header strings.Builder
		header.WriteString(lines[i])
		i++
		var input []string
		for ; i < len(lines) && trim(lines[i]) != "----"; i++ {
			header.WriteString(lines[i])
			input = append(input, trim(lines[i]))
		}
		if i == len(lines) {
			t.Fatalf("%s: %s has no ---- line", c.d.pos, c.d.cmd)
		}
		i++ // ----
		c.header = header.String()
		c.d.input = strings.Join(input, "\n")
		var out []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			out = append(out, trim(lines[i]))
		}
		c.want = strings.Join(out, "\n")
		chunks = append(chunks, c)
	}
	return chunks, pre.String()
}

// runScript runs every directive of the script at path through run and
// compares (or, with -rewrite, records) what it prints.
func runScript(t *testing.T, path string, run func(d *directive) string) {
	t.Helper()
	chunks, tail := parseScript(t, path)
	var out strings.Builder
	for _, c := range chunks {
		got := strings.TrimRight(run(&c.d), "\n")
		if strings.Contains(got, "\n\n") {
			t.Fatalf("%s: %s printed a blank line, which ends an output:\n%s", c.d.pos, c.d.cmd, got)
		}
		if !*rewrite && got != c.want {
			t.Errorf("%s: %s\n%s\n----\ngot:\n%s\nwant:\n%s", c.d.pos, c.d.cmd, strings.TrimRight(c.header, "\n"), got, c.want)
		}
		out.WriteString(c.pre)
		out.WriteString(c.header)
		out.WriteString("----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
	}
	out.WriteString(tail)
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
