// Package datadriven runs golden scripts (STYLE.md §5): files under a
// package's testdata/ that hold commands, each followed by the output it
// must print. A script is a sequence of directives:
//
//	# comments and blank lines between directives are kept
//	command arg key=value key=v1,v2
//	input lines (optional)
//	----
//	expected output
//	<blank line or end of file>
//
// The output ends at the first blank line, so an output never holds one. A
// test hands each directive to a function that runs it and returns what it
// printed; the runner compares that with the expected output and reports a
// difference by file:line. go test -run TestX -rewrite writes what the
// commands print into the scripts instead of comparing.
//
// It is a test helper: only tests import it.
package datadriven

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the golden scripts under testdata/")

// Directive is one command of a script.
type Directive struct {
	Pos   string // file:line of the command line
	Cmd   string // the command: the line's first word
	Args  []Arg  // the line's other words, in order
	Input string // the lines between the command and ----, joined by \n
}

// Arg is one word after the command: key, or key=v1,v2.
type Arg struct {
	Key  string
	Vals []string // nil: a bare key
}

// Arg returns the values of key and whether it was given.
func (d *Directive) Arg(key string) ([]string, bool) {
	for _, a := range d.Args {
		if a.Key == key {
			return a.Vals, true
		}
	}
	return nil, false
}

// ArgOne returns the first value of key ("" when it has none) and whether
// key was given.
func (d *Directive) ArgOne(key string) (string, bool) {
	v, ok := d.Arg(key)
	if !ok || len(v) == 0 {
		return "", ok
	}
	return v[0], true
}

// Fatalf stops the test with a message that names the directive's file,
// line and command.
func (d *Directive) Fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("%s: %s: %s", d.Pos, d.Cmd, fmt.Sprintf(format, args...))
}

// chunk is one directive with the text around it, for rewriting.
type chunk struct {
	pre    string // comments and blank lines before the command
	header string // the command line and its input, verbatim, ending in \n
	d      Directive
	want   string
}

// script is a parsed file: its directives and the text after the last.
type script struct {
	chunks []chunk
	tail   string
}

// parse reads a script's text; name is the file it came from, for the
// positions of directives and errors.
func parse(name, text string) (*script, error) {
	lines := strings.SplitAfter(text, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	trim := func(s string) string { return strings.TrimRight(s, "\r\n") }
	s := &script{}
	var pre strings.Builder
	for i := 0; i < len(lines); {
		l := trim(lines[i])
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			pre.WriteString(lines[i])
			i++
			continue
		}
		c := chunk{pre: pre.String()}
		pre.Reset()
		c.d.Pos = fmt.Sprintf("%s:%d", name, i+1)
		if l == "----" {
			return nil, fmt.Errorf("%s: ---- with no command before it", c.d.Pos)
		}
		fields := strings.Fields(l)
		c.d.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if k == "" {
				return nil, fmt.Errorf("%s: argument %q has no key", c.d.Pos, f)
			}
			a := Arg{Key: k}
			if ok {
				a.Vals = strings.Split(v, ",")
			}
			c.d.Args = append(c.d.Args, a)
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
			return nil, fmt.Errorf("%s: %s has no ---- line after it", c.d.Pos, c.d.Cmd)
		}
		i++ // ----
		c.header = header.String()
		c.d.Input = strings.Join(input, "\n")
		var out []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			out = append(out, trim(lines[i]))
		}
		c.want = strings.Join(out, "\n")
		s.chunks = append(s.chunks, c)
	}
	s.tail = pre.String()
	return s, nil
}

// result is what running a script found.
type result struct {
	diffs []string // one message per directive whose output differs
	text  string   // the script with every output as printed
}

// run runs every directive through fn and compares what it prints with the
// expected output. An output that holds a blank line is an error: it could
// not be written back.
func (s *script) run(fn func(d *Directive) string) (result, error) {
	var r result
	var out strings.Builder
	for i := range s.chunks {
		c := &s.chunks[i]
		got := strings.TrimRight(fn(&c.d), "\n")
		if strings.Contains(got, "\n\n") {
			return r, fmt.Errorf("%s: %s printed a blank line, which would end its output:\n%s", c.d.Pos, c.d.Cmd, got)
		}
		if got != c.want {
			r.diffs = append(r.diffs, fmt.Sprintf("%s: %s\n%s\n----\ngot:\n%s\nwant:\n%s", c.d.Pos, c.d.Cmd, strings.TrimRight(c.header, "\n"), got, c.want))
		}
		out.WriteString(c.pre)
		out.WriteString(c.header)
		out.WriteString("----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
	}
	out.WriteString(s.tail)
	r.text = out.String()
	return r, nil
}

// RunFile runs the script at path: fn runs one directive and returns what
// it printed. Each difference from the expected output is a test error
// naming the directive's file and line; with -rewrite the script is
// rewritten with what was printed instead.
func RunFile(t *testing.T, path string, fn func(d *Directive) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := parse(path, string(b))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.run(fn)
	if err != nil {
		t.Fatal(err)
	}
	if *rewrite {
		if r.text != string(b) {
			if err := os.WriteFile(path, []byte(r.text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, d := range r.diffs {
		t.Error(d)
	}
}

// Walk runs f as a subtest, named by the file without its .txt, for every
// file that pattern (a filepath.Glob pattern such as "testdata/*.txt")
// matches; it fails when none does.
func Walk(t *testing.T, pattern string, f func(t *testing.T, path string)) {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatalf("scripts %s: %v", pattern, err)
	}
	if len(paths) == 0 {
		t.Fatalf("no script matches %s", pattern)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txt"), func(t *testing.T) { f(t, p) })
	}
}
