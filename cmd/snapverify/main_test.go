package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/cliutil/clitest"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
	"github.com/energyscope/servingsnap/pkg/verify"
)

func snapverify(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"snapverify"}, args...), &o, &e)
	return code, o.String(), e.String()
}

func TestExitCodes(t *testing.T) {
	root := t.TempDir()
	lake, ds := testsnap.Sample(t, root, "SYN", 60, 5, func(o *sortwrite.Options) { o.BatchRows = 2000 })

	t.Run("intact", func(t *testing.T) {
		for _, args := range [][]string{
			{ds},
			{ds, "--deep"},
			{"--deep", ds},
			{ds, "--snapshot", "1", "--deep", "--against", lake},
			{"-d", "-s=1", ds, "-a", lake},
			{ds, "-s", "1", "--json=false", "--max-findings", "5"},
		} {
			code, out, errOut := snapverify(t, args...)
			if code != 0 {
				t.Fatalf("%q: exit %d\n%s%s", args, code, out, errOut)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "SYN snapshot 1: intact") {
				t.Errorf("%q: want one summary line, got %q", args, out)
			}
		}
	})

	t.Run("json", func(t *testing.T) {
		code, out, _ := snapverify(t, ds, "--deep", "--json", "--against", lake)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		var r verify.Report
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("--json output is not a Report: %v\n%s", err, out)
		}
		if !r.OK || r.Level != "deep" || r.SnapshotID != 1 || r.Rows == 0 || r.InputRows != r.Rows || r.Findings == nil {
			t.Errorf("report: %+v", r)
		}
		// Every field of the report is documented in docs/CLI.md.
		all, err := os.ReadFile("../../docs/CLI.md")
		if err != nil {
			t.Fatal(err)
		}
		_, doc, ok := strings.Cut(string(all), "\n## snapverify\n")
		if !ok {
			t.Fatal("docs/CLI.md has no \"## snapverify\" section")
		}
		if i := strings.Index(doc, "\n## "); i >= 0 {
			doc = doc[:i]
		}
		for _, typ := range []reflect.Type{reflect.TypeOf(verify.Report{}), reflect.TypeOf(verify.Finding{})} {
			for i := 0; i < typ.NumField(); i++ {
				name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
				if !strings.Contains(doc, "`"+name+"`") {
					t.Errorf("docs/CLI.md does not document field %q of %s", name, typ.Name())
				}
			}
		}
		for _, c := range []string{verify.CheckCurrent, verify.CheckManifest, verify.CheckManifestRules, verify.CheckFiles,
			verify.CheckChecksum, verify.CheckOpen, verify.CheckArrow, verify.CheckSchema, verify.CheckStats, verify.CheckSort,
			verify.CheckSeriesCode, verify.CheckIndex, verify.CheckBatches, verify.CheckTypes, verify.CheckAgainst} {
			if !strings.Contains(doc, "`"+c+"`") {
				t.Errorf("docs/CLI.md does not document check %q", c)
			}
		}
	})

	t.Run("corrupt", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "SYN")
		copyDir(t, ds, bad)
		d, _ := dataset.Open(bad)
		m, err := d.Current()
		if err != nil {
			t.Fatal(err)
		}
		df, _ := m.FileByRole(manifest.RoleData)
		p := d.Path(df.Path)
		b, _ := os.ReadFile(p)
		b[len(b)/2] ^= 1
		os.WriteFile(p, b, 0o644)

		code, out, _ := snapverify(t, bad)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], df.Path+": [checksum]") || !strings.Contains(lines[1], "CORRUPT: 1 finding") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		code, out, _ = snapverify(t, bad, "--json")
		var r verify.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.OK || r.Status != verify.StatusCorrupt || len(r.Findings) != 1 || r.Findings[0].File != df.Path {
			t.Fatalf("--json on corruption: exit %d err %v: %s", code, err, out)
		}

		// CURRENT missing or dangling is corruption, not a usage error.
		os.WriteFile(filepath.Join(bad, "CURRENT"), []byte("manifests/000009.json\n"), 0o644)
		if code, out, _ := snapverify(t, bad); code != 1 || !strings.Contains(out, "CURRENT: [current]") {
			t.Errorf("dangling CURRENT: exit %d\n%s", code, out)
		}
		os.Remove(filepath.Join(bad, "CURRENT"))
		if code, out, _ := snapverify(t, bad); code != 1 {
			t.Errorf("missing CURRENT: exit %d\n%s", code, out)
		}
		os.Remove(d.Path(df.Path))
		if code, out, _ := snapverify(t, bad, "--snapshot", "1"); code != 1 || !strings.Contains(out, "file is missing") {
			t.Errorf("missing data file: exit %d\n%s", code, out)
		}
	})

	t.Run("differs", func(t *testing.T) {
		// The lake lost a file since the build: the snapshot is intact
		// and differs from it.
		moved := filepath.Join(t.TempDir(), "lake")
		copyDir(t, lake, moved)
		files, _ := filepath.Glob(filepath.Join(moved, "*", "*.parquet"))
		if len(files) < 2 {
			t.Fatalf("lake files %v", files)
		}
		os.Remove(files[0])
		code, out, _ := snapverify(t, ds, "--against", moved)
		if code != 1 || !strings.Contains(out, "intact, DIFFERS from the input: ") || strings.Contains(out, "CORRUPT") {
			t.Errorf("against a lake that moved on: exit %d, want 1 and DIFFERS, not CORRUPT:\n%s", code, out)
		}
		code, out, _ = snapverify(t, ds, "--against", moved, "--json")
		var r verify.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.OK || r.Status != verify.StatusDiffers {
			t.Errorf("--json against a lake that moved on: exit %d, err %v, status %q", code, err, r.Status)
		}
	})

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{},
			{ds, ds},
			{"--bogus", ds},
			{ds, "--snapshot", "-1"},
			{ds, "--snapshot", "9"},
			{ds, "--against", filepath.Join(root, "nolake")},
			{ds, "--max-findings", "-3"},
			{filepath.Join(root, "MISSING")},
			{filepath.Join(root, "bad name")},
			{root}, // a directory, but not a dataset
		} {
			code, out, errOut := snapverify(t, args...)
			if code != 2 {
				t.Errorf("%q: exit %d, want 2\n%s%s", args, code, out, errOut)
			}
			if !strings.Contains(errOut, "snapverify: ") {
				t.Errorf("%q: no error message on stderr: %q", args, errOut)
			}
		}
	})

	t.Run("help", func(t *testing.T) {
		code, out, _ := snapverify(t, "--help")
		if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--against") || !strings.Contains(out, "Exit status") {
			t.Fatalf("exit %d\n%s", code, out)
		}
	})
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConventions walks the command line (docs/CLI.md, Conventions).
func TestConventions(t *testing.T) {
	clitest.Check(t, newApp, run, map[string]string{"completion": "it prints a shell script"})
}
