package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/internal/cliutil/clitest"
	"github.com/energyscope/servingsnap/internal/testsnap"
)

func snapbuild(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(append([]string{"snapbuild"}, args...), &o, &e)
	return code, o.String(), e.String()
}

// TestConventions walks every command (docs/CLI.md, Conventions).
func TestConventions(t *testing.T) {
	clitest.Check(t, newApp, run, map[string]string{
		"serve":      "its stdout is already JSON (the listening line); logs take --log-format json",
		"completion": "it prints a shell script",
	})
}

// TestInputErrors: each kind of bad input has its exit status
// (docs/CLI.md, Conventions): an operand that does not exist or a format
// no command reads is 2, an input that exists but is not what a build
// reads is 1; the message names the path.
func TestInputErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.parquet")
	os.WriteFile(file, []byte("x"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	out := filepath.Join(dir, "root", "DS")
	lake := filepath.Join(dir, "lake")
	if code, _, stderr := snapbuild("gen", "--out", lake, "--series", "5"); code != 0 {
		t.Fatal(stderr)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"build", "--input", filepath.Join(dir, "nope"), "--out", out}, 2, "input " + filepath.Join(dir, "nope") + " does not exist"},
		{[]string{"build", "--input", file, "--out", out}, 1, "input " + file + " is not a directory"},
		{[]string{"build", "--input", empty, "--out", out}, 1, "holds no .parquet files"},
		{[]string{"build", "--input", lake, "--out", out, "--table-version", "3"}, 2, "is a folder of Parquet files, not a Delta or Iceberg table: it has no versions to select (see snapbuild build --help)"},
		{[]string{"convert", filepath.Join(dir, "a.xyz"), filepath.Join(dir, "b.parquet")}, 2, `unknown extension ".xyz"`},
		{[]string{"convert", filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.parquet")}, 2, "CSV is an output format only"},
		{[]string{"convert", file, filepath.Join(dir, "b.tsv")}, 2, `unknown extension ".tsv"`},
		{[]string{"convert", filepath.Join(dir, "nope.parquet"), filepath.Join(dir, "b.arrow")}, 2, "nope.parquet"},
		{[]string{"convert", file, filepath.Join(dir, "b.arrow")}, 1, "file.parquet"},
	}
	for _, tc := range cases {
		code, stdout, stderr := snapbuild(tc.args...)
		if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("snapbuild %q: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", tc.args, code, stdout, stderr, tc.code, tc.want)
		}
	}
}

// TestVintageCommands: gc keeps K besides CURRENT, rollback names a
// missing vintage, both wait for the lock with a message and give up
// after --lock-timeout, and none creates the directory of a mistyped path.
func TestVintageCommands(t *testing.T) {
	root := t.TempDir()
	lake, ds := testsnap.Sample(t, root, "SYN", 20, 1, nil)
	for i := 0; i < 3; i++ {
		testsnap.Build(t, lake, ds, nil)
	} // vintages 1..4, CURRENT 4

	code, out, errOut := snapbuild("rollback", "--to", "9", ds)
	if code != 2 || !strings.Contains(errOut, "snapshot 9 of SYN does not exist (vintages: 1, 2, 3, 4; CURRENT is 4)") {
		t.Errorf("rollback to a missing vintage: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = snapbuild("gc", "--keep", "1", "--json", ds)
	if code != 0 || !strings.Contains(out, `"removed": [
    2,
    1
  ]`) {
		t.Errorf("gc --keep 1: exit %d, %s %s", code, out, errOut)
	}

	missing := filepath.Join(root, "TYPO")
	if code, _, errOut := snapbuild("gc", "--keep", "1", missing); code != 2 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("gc of a missing dataset: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("gc created the directory of a mistyped dataset path")
	}

	// Another process holds the lock: flock(1) if present, else skip.
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("no flock(1) to hold the lock from another process")
	}
	hold := exec.Command(flock, filepath.Join(ds, "LOCK"), "sleep", "30")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { hold.Process.Kill(); hold.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _, errOut := snapbuild("gc", "--keep", "1", "--lock-timeout", "200ms", ds); code == 1 {
			if !strings.Contains(errOut, "holds the write lock of "+ds+"; waiting up to 200ms") ||
				!strings.Contains(errOut, "still held the write lock") || !strings.Contains(errOut, "process ") {
				t.Errorf("lock timeout: %q", errOut)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("flock never held the lock")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNumbersForPeople: text output writes counts with thousands
// separators (docs/CLI.md, Conventions), never a bare 15064982.
func TestNumbersForPeople(t *testing.T) {
	dir := t.TempDir()
	lake, ds, out := filepath.Join(dir, "lake"), filepath.Join(dir, "root", "SYN"), filepath.Join(dir, "x.csv")
	var texts []string
	for _, args := range [][]string{
		{"gen", "--out", lake, "--series", "40"},
		{"build", "--input", lake, "--out", ds},
		{"export", ds, out},
		{"convert", filepath.Join(ds, "snapshots", "000001", "data.arrow"), filepath.Join(dir, "d.parquet")},
	} {
		code, stdout, stderr := snapbuild(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d %s", args, code, stderr)
		}
		texts = append(texts, strings.ReplaceAll(stdout, dir, "DIR"))
	}
	all := strings.Join(texts, "")
	if !strings.Contains(all, ",") {
		t.Fatalf("no thousands separator anywhere:\n%s", all)
	}
	for _, tok := range strings.Fields(all) {
		tok = strings.Trim(tok, ",;:()")
		if len(tok) >= 4 && strings.Trim(tok, "0123456789") == "" {
			t.Errorf("bare number %s in text output:\n%s", tok, all)
		}
	}
}
