package datadriven

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := "# a comment\n\nput a=1 b=x,y bare\nline one\nline two\n----\nok\n\nget\n----\n1\n2\n\n# trailing\n"
	s, err := parse("s.txt", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.chunks) != 2 {
		t.Fatalf("%d directives, want 2", len(s.chunks))
	}
	d := s.chunks[0].d
	if d.Pos != "s.txt:3" || d.Cmd != "put" || d.Input != "line one\nline two" {
		t.Errorf("first directive: %+v", d)
	}
	if v, ok := d.ArgOne("a"); !ok || v != "1" {
		t.Errorf("a = %q, %v", v, ok)
	}
	if v, ok := d.Arg("b"); !ok || strings.Join(v, "|") != "x|y" {
		t.Errorf("b = %q, %v", v, ok)
	}
	if v, ok := d.Arg("bare"); !ok || v != nil {
		t.Errorf("bare = %q, %v", v, ok)
	}
	if _, ok := d.Arg("absent"); ok {
		t.Error("absent argument found")
	}
	if s.chunks[1].d.Pos != "s.txt:9" || s.chunks[1].want != "1\n2" {
		t.Errorf("second directive: %+v", s.chunks[1])
	}
	if s.tail != "\n# trailing\n" {
		t.Errorf("tail %q", s.tail)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"put a=1\nno separator\n", "s.txt:1: put has no ---- line after it"},
		{"\n----\nout\n", "s.txt:2: ---- with no command before it"},
		{"ok\n----\n\nput =1\n----\n", `s.txt:4: argument "=1" has no key`},
	} {
		_, err := parse("s.txt", tc.text)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}

func TestRunComparesAndRewrites(t *testing.T) {
	text := "# keep me\necho x\n----\nold\n\necho y\nin\n----\ny\n"
	s, err := parse("s.txt", text)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.run(func(d *Directive) string {
		v, _ := d.ArgOne("x")
		return d.Args[0].Key + v + "\n"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.diffs) != 1 || !strings.HasPrefix(r.diffs[0], "s.txt:2: echo\n") || !strings.Contains(r.diffs[0], "got:\nx\nwant:\nold") {
		t.Errorf("diffs %q", r.diffs)
	}
	want := "# keep me\necho x\n----\nx\n\necho y\nin\n----\ny\n"
	if r.text != want {
		t.Errorf("rewritten:\n%s\nwant:\n%s", r.text, want)
	}
}

func TestRunRefusesBlankLine(t *testing.T) {
	s, err := parse("s.txt", "a\n----\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.run(func(*Directive) string { return "one\n\ntwo" })
	if err == nil || !strings.HasPrefix(err.Error(), "s.txt:1: a printed a blank line") {
		t.Errorf("error %v", err)
	}
}

func TestRunFileAndWalk(t *testing.T) {
	dir := t.TempDir()
	body := "upper abc\n----\nABC\n"
	if err := os.WriteFile(filepath.Join(dir, "one.txt"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var ran []string
	Walk(t, filepath.Join(dir, "*.txt"), func(t *testing.T, path string) {
		ran = append(ran, t.Name())
		RunFile(t, path, func(d *Directive) string { return strings.ToUpper(d.Args[0].Key) })
	})
	if len(ran) != 1 || ran[0] != "TestRunFileAndWalk/one" {
		t.Errorf("ran %q", ran)
	}
}
