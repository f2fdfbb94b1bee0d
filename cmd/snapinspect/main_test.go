package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/cliutil/clitest"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var (
	fixtureOnce sync.Once
	fixtureRoot string
	fixtureOK   bool
)

// fixture builds inspecttest's dataset (vintages 1 and 2, a corrupt
// manifest 3) and a dataset without a category column, once per run, and
// returns their common root.
func fixture(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		root, err := os.MkdirTemp("", "snapinspect-test-")
		if err != nil {
			t.Fatal(err)
		}
		fixtureRoot = root
		inspecttest.Build(t, root, true)
		inspecttest.BuildNoCategory(t, root)
		fixtureOK = true
	})
	if !fixtureOK {
		t.Fatal("fixture build failed")
	}
	return fixtureRoot
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if fixtureRoot != "" {
		os.RemoveAll(fixtureRoot)
	}
	os.Exit(code)
}

// runCmd runs snapinspect with args, in which "ROOT" stands for the fixture
// root, and returns stdout and stderr with the root replaced by "ROOT".
func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := fixture(t)
	full := []string{"snapinspect"}
	for _, a := range args {
		full = append(full, strings.ReplaceAll(a, "ROOT", root))
	}
	var o, e bytes.Buffer
	code = run(full, &o, &e)
	return strings.ReplaceAll(o.String(), root, "ROOT"), strings.ReplaceAll(e.String(), root, "ROOT"), code
}

// TestGolden compares the text output of every command with
// testdata/NAME.golden; go test -update rewrites them.
func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"summary", []string{"ROOT/PRICES"}, 0},
		{"summary_vintage1", []string{"summary", "ROOT/PRICES", "--snapshot", "1"}, 0},
		{"summary_all_inputs", []string{"ROOT/PRICES", "--snapshot=1", "--all-inputs"}, 0},
		{"series", []string{"ROOT/PRICES", "series", "NG.HH.D", "PET.BRENT.D"}, 0},
		{"series_range", []string{"series", "ROOT/PRICES", "PET.BRENT.M", "NG.HH.D", "--from", "2023-12", "--to", "2024-01-02"}, 0},
		{"series_csv", []string{"ROOT/PRICES", "series", "PET.EMPTY.W", "ZZ.OLD.Q", "--snapshot", "1", "--format", "csv"}, 0},
		{"series_unknown", []string{"ROOT/PRICES", "series", "NG.HH.D", "ZZ.OLD.Q"}, 1},
		{"latest_ids", []string{"ROOT/PRICES", "latest", "PET.EMPTY.W", "NG.HH.D"}, 0},
		{"latest_prefix", []string{"ROOT/PRICES", "latest", "--prefix", "PET.BRENT"}, 0},
		{"latest_category", []string{"ROOT/PRICES", "latest", "--category", "Petroleum"}, 0},
		{"latest_all_vintage1", []string{"--snapshot", "1", "ROOT/PRICES", "latest", "--all"}, 0},
		{"latest_no_category", []string{"ROOT/NOCAT", "latest", "--category", "x"}, 1},
		{"history", []string{"ROOT/PRICES", "history"}, 0},
		{"diff", []string{"ROOT/PRICES", "diff", "1", "2"}, 0},
		{"diff_current", []string{"diff", "ROOT/PRICES", "000002"}, 0},
		{"diff_stat", []string{"ROOT/PRICES", "diff", "1", "2", "--stat"}, 0},
		{"diff_exit_code", []string{"ROOT/PRICES", "diff", "1", "2", "--stat", "--exit-code"}, 1},
		{"summary_corrupt_manifest", []string{"ROOT/PRICES", "--snapshot", "3"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := runCmd(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, c.code, stderr)
			}
			var b strings.Builder
			b.WriteString("$ snapinspect " + strings.Join(c.args, " ") + "\n")
			b.WriteString(stdout)
			if stderr != "" {
				b.WriteString("-- stderr --\n" + stderr)
			}
			if code != 0 {
				b.WriteString("-- exit " + string(rune('0'+code)) + " --\n")
			}
			golden(t, c.name, b.String())
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", p, got, want)
	}
}

// jsonFields are the documented JSON field names of each document, by
// path ("" the top level, "files[]" the objects of the files array). The
// test requires exactly these keys, and TestJSONFieldsDocumented requires
// docs/CLI.md to name each one.
var jsonFields = map[string]map[string][]string{
	"summary": {
		"":                 {"dataset", "dir", "snapshot_id", "current", "current_id", "parent_id", "created", "tool", "rows", "series", "first_period", "last_period", "duplicates_dropped", "files", "schema", "attributes", "lineage", "build", "wal_position", "error", "tiers"},
		"tiers":            {"tiered", "format", "hot_since", "hot_rows", "hot", "cold"},
		"tiers.hot":        {"path", "rows", "bytes", "batches", "chunks"},
		"tiers.cold":       {"path", "rows", "bytes", "batches", "chunks"},
		"files[]":          {"path", "role", "tier", "format", "size", "rows", "batches", "checksum"},
		"schema":           {"data", "index", "attributes"},
		"schema.data[]":    {"name", "type", "nullable"},
		"attributes[]":     {"name", "type", "distinct", "nulls"},
		"lineage":          {"kind", "source", "lake_snapshot_id", "inputs"},
		"lineage.inputs[]": {"path", "size", "rows", "checksum"},
		"build":            {"series_column", "period_column", "value_column", "on_duplicate", "batch_rows"},
	},
	"series": {
		"":          {"dataset", "snapshot_id", "from", "to", "columns", "rows"},
		"columns[]": {"name", "type"},
		"rows[]":    {"series_id", "period", "value", "status"},
	},
	"latest": {
		"":         {"dataset", "snapshot_id", "attributes", "series"},
		"series[]": {"series_id", "latest_period", "latest_value", "first_period", "last_period", "rows", "attributes"},
	},
	"history": {
		"":            {"dataset", "dir", "current_id", "current_error", "snapshots", "flips"},
		"snapshots[]": {"snapshot_id", "parent_id", "created", "tool", "rows", "series", "first_period", "last_period", "current", "error"},
	},
	"diff": {
		"":         {"dataset", "a", "b", "totals", "stat", "series"},
		"a":        {"snapshot_id", "created", "current", "rows", "series"},
		"b":        {"snapshot_id", "created", "current", "rows", "series"},
		"series[]": {"series_id", "change", "rows_a", "rows_b", "rows_added", "rows_removed", "rows_changed"},
		"totals":   {"series_added", "series_removed", "series_changed", "series_unchanged", "series_net", "rows_added", "rows_removed", "rows_changed", "rows_net"},
	},
}

// at walks a decoded JSON document along a path like "lineage.inputs[]"
// and returns the objects found there.
func at(t *testing.T, doc any, path string) []map[string]any {
	t.Helper()
	cur := []any{doc}
	if path != "" {
		for _, part := range strings.Split(path, ".") {
			name, isArr := strings.CutSuffix(part, "[]")
			var next []any
			for _, c := range cur {
				v := c.(map[string]any)[name]
				if isArr {
					arr, ok := v.([]any)
					if !ok {
						t.Fatalf("%s: %T, want an array", path, v)
					}
					next = append(next, arr...)
				} else {
					next = append(next, v)
				}
			}
			cur = next
		}
	}
	var out []map[string]any
	for _, c := range cur {
		m, ok := c.(map[string]any)
		if !ok {
			t.Fatalf("%s: %T, want an object", path, c)
		}
		out = append(out, m)
	}
	return out
}

func TestJSONFields(t *testing.T) {
	cases := map[string][]string{
		"summary": {"ROOT/PRICES", "--json"},
		"series":  {"ROOT/PRICES", "series", "NG.HH.D", "PET.EMPTY.W", "--json"},
		"latest":  {"--json", "ROOT/PRICES", "latest", "--all"},
		"history": {"ROOT/PRICES", "history", "--json"},
		"diff":    {"ROOT/PRICES", "diff", "1", "2", "--json"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runCmd(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var doc any
			if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, stdout)
			}
			for path, want := range jsonFields[name] {
				objs := at(t, doc, path)
				if len(objs) == 0 {
					t.Errorf("%s: no objects", path)
				}
				for _, o := range objs {
					var got []string
					for k := range o {
						got = append(got, k)
					}
					sort.Strings(got)
					w := append([]string{}, want...)
					sort.Strings(w)
					if !reflect.DeepEqual(got, w) {
						t.Errorf("%s: fields %v\nwant %v", path, got, w)
						break
					}
				}
			}
		})
	}

	// Spot-check values the fields carry.
	stdout, _, _ := runCmd(t, "ROOT/PRICES", "diff", "1", "2", "--json")
	var d struct {
		Totals map[string]int64 `json:"totals"`
		A, B   struct {
			SnapshotID uint64 `json:"snapshot_id"`
			Current    bool   `json:"current"`
			Rows       int64  `json:"rows"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.A.SnapshotID != 1 || d.B.SnapshotID != 2 || d.A.Current || !d.B.Current || d.A.Rows != inspecttest.RowsA || d.B.Rows != inspecttest.RowsB ||
		d.Totals["series_added"] != inspecttest.SeriesAdded || d.Totals["series_removed"] != inspecttest.SeriesRemoved ||
		d.Totals["series_changed"] != inspecttest.SeriesChanged || d.Totals["rows_added"] != inspecttest.RowsAdded ||
		d.Totals["rows_removed"] != inspecttest.RowsRemoved || d.Totals["rows_changed"] != inspecttest.RowsChanged ||
		d.Totals["rows_net"] != inspecttest.RowsB-inspecttest.RowsA {
		t.Errorf("diff JSON %+v", d)
	}
	stdout, _, _ = runCmd(t, "ROOT/PRICES", "history", "--json")
	var h struct {
		CurrentID uint64 `json:"current_id"`
		Snapshots []struct {
			SnapshotID uint64 `json:"snapshot_id"`
			Current    bool   `json:"current"`
			Error      string `json:"error"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(stdout), &h); err != nil {
		t.Fatal(err)
	}
	if h.CurrentID != 2 || len(h.Snapshots) != 3 || h.Snapshots[0].SnapshotID != inspecttest.CorruptID || h.Snapshots[0].Error == "" ||
		!h.Snapshots[1].Current || h.Snapshots[2].Error != "" {
		t.Errorf("history JSON %+v", h)
	}
	stdout, _, _ = runCmd(t, "ROOT/PRICES", "--json", "--snapshot", "1")
	var s struct {
		SnapshotID uint64 `json:"snapshot_id"`
		Current    bool   `json:"current"`
		Lineage    struct {
			Inputs []any `json:"inputs"`
		} `json:"lineage"`
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.SnapshotID != 1 || s.Current || len(s.Lineage.Inputs) != 2 {
		t.Errorf("summary JSON %+v", s)
	}
}

// TestJSONFieldsDocumented requires docs/CLI.md's snapinspect section to
// name every JSON field (as `field`).
func TestJSONFieldsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## snapinspect")
	if i < 0 {
		t.Fatal("docs/CLI.md has no ## snapinspect section")
	}
	sec := doc[i+1:]
	if j := strings.Index(sec, "\n## "); j >= 0 {
		sec = sec[:j]
	}
	for cmd, paths := range jsonFields {
		for _, fields := range paths {
			for _, f := range fields {
				if cmd == "series" && f == "status" {
					continue // a data column of the fixture, not a fixed field
				}
				if !strings.Contains(sec, "`"+f+"`") {
					t.Errorf("%s: field %q is not documented in docs/CLI.md ## snapinspect", cmd, f)
				}
			}
		}
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		args   []string
		code   int
		stderr string // a substring of stderr
	}{
		{nil, 2, "missing ROOT/DATASET"},
		{[]string{"--json"}, 2, "missing ROOT/DATASET"},
		{[]string{"ROOT/PRICES", "--bogus"}, 2, "unknown flag --bogus (see snapinspect summary --help)"},
		{[]string{"ROOT/PRICES", "seris", "NG.HH.D"}, 2, `unknown command "seris"; did you mean "series"?`},
		{[]string{"ROOT/PRICES", "NG.HH.D"}, 2, "the commands are"},
		{[]string{"ROOT/PRICES", "--snapshot", "x"}, 2, "--help"},
		{[]string{"ROOT/PRICES", "--snapshot", "0"}, 2, "ids start at 1"},
		// A missing operand (dataset directory, vintage) is exit 2, as in
		// snapverify and snapbuild, naming the vintages present.
		{[]string{"ROOT/PRICES", "--snapshot", "9"}, 2, "snapshot 9 of PRICES does not exist (vintages: 1, 2, 3; CURRENT is 2)"},
		{[]string{"ROOT/MISSING"}, 2, "dataset directory ROOT/MISSING does not exist"},
		{[]string{"ROOT/MISSING", "history"}, 2, "does not exist"},
		{[]string{"ROOT/bad name"}, 1, "not allowed"},
		{[]string{"ROOT/PRICES", "series"}, 2, "at least one series id"},
		{[]string{"ROOT/PRICES", "series", "NOPE"}, 1, `unknown series "NOPE" in snapshot 2 of PRICES`},
		{[]string{"ROOT/PRICES", "series", "NG.HH.D", "--from", "2024-13"}, 2, "--from"},
		{[]string{"ROOT/PRICES", "series", "NG.HH.D", "--from", "2024", "--to", "2023"}, 2, "after --to"},
		{[]string{"ROOT/PRICES", "series", "NG.HH.D", "--format", "xml"}, 2, "want text, csv or json"},
		{[]string{"ROOT/PRICES", "series", "NG.HH.D", "--format", "csv", "--json"}, 2, "conflicts"},
		{[]string{"ROOT/PRICES", "latest"}, 2, "--prefix, --category or --all"},
		{[]string{"ROOT/PRICES", "latest", "NG.HH.D", "--all"}, 2, "not both"},
		{[]string{"ROOT/PRICES", "latest", "--prefix", "XX"}, 1, `no series match --prefix "XX"`},
		{[]string{"ROOT/PRICES", "latest", "--category", "Petrol"}, 1, "no series match"},
		{[]string{"ROOT/PRICES", "history", "--snapshot", "1"}, 2, "does not apply"},
		{[]string{"ROOT/PRICES", "history", "extra"}, 2, "unexpected"},
		{[]string{"ROOT/PRICES", "diff"}, 2, "want snapshot ids A [B]"},
		{[]string{"ROOT/PRICES", "diff", "1", "2", "3"}, 2, "want snapshot ids A [B]"},
		{[]string{"ROOT/PRICES", "diff", "one", "2"}, 2, "not a snapshot id"},
		{[]string{"ROOT/PRICES", "diff", "1", "7"}, 2, "snapshot 7 of PRICES does not exist"},
		{[]string{"ROOT/PRICES", "diff", "1", "3"}, 1, "corrupt"},
		{[]string{"ROOT/PRICES", "diff", "1", "2", "--snapshot", "1"}, 2, "does not apply"},
		{[]string{"ROOT/PRICES", "--snapshot", "3"}, 1, "corrupt"},
		{[]string{"--help"}, 0, ""},
		{[]string{"--version"}, 0, ""},
	}
	for _, c := range cases {
		_, stderr, code := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.stderr)
		}
	}
}

// TestDamagedFiles: a snapshot whose data file is damaged is still
// summarised from its manifest, with the error and exit status 1; commands
// that need the rows fail with 1.
func TestDamagedFiles(t *testing.T) {
	root := t.TempDir()
	ds := inspecttest.Build(t, root, false)
	m, err := (&dataset.Dir{Dir: ds, Name: inspecttest.Name}).Load(2)
	if err != nil {
		t.Fatal(err)
	}
	df, _ := m.FileByRole(manifest.RoleData)
	// published files are read-only (0444): a test that damages one in
	// place makes it writable first, as an operator's tool would have to
	os.Chmod(filepath.Join(ds, filepath.FromSlash(df.Path)), 0o644)
	if err := os.Truncate(filepath.Join(ds, filepath.FromSlash(df.Path)), df.Size-10); err != nil {
		t.Fatal(err)
	}
	var o, e bytes.Buffer
	code := run([]string{"snapinspect", ds}, &o, &e)
	if code != 1 || !strings.Contains(o.String(), "ERROR: the snapshot's files do not open") || !strings.Contains(o.String(), "files\n") ||
		!strings.Contains(e.String(), "corrupt: ") {
		t.Errorf("summary of a damaged snapshot: exit %d\nstdout %s\nstderr %s", code, o.String(), e.String())
	}
	o.Reset()
	e.Reset()
	code = run([]string{"snapinspect", ds, "--json"}, &o, &e)
	var doc struct {
		Error string `json:"error"`
	}
	if code != 1 || json.Unmarshal(o.Bytes(), &doc) != nil || !strings.Contains(doc.Error, "corrupt: ") {
		t.Errorf("summary --json of a damaged snapshot: exit %d, %s", code, o.String())
	}
	for _, args := range [][]string{{"series", "NG.HH.D"}, {"latest", "--all"}, {"diff", "1"}} {
		o.Reset()
		e.Reset()
		code := run(append([]string{"snapinspect", ds}, args...), &o, &e)
		if code != 1 || o.Len() != 0 {
			t.Errorf("%v on a damaged snapshot: exit %d, stdout %q", args, code, o.String())
		}
	}
	// The older vintage is intact.
	o.Reset()
	if code := run([]string{"snapinspect", ds, "--snapshot", "1", "latest", "--all"}, &o, &e); code != 0 {
		t.Errorf("vintage 1: exit %d: %s", code, e.String())
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"summary", "--help"}, {"series", "--help"}, {"latest", "-h"},
		{"history", "--help"}, {"diff", "--help"}, {"help", "diff"}, {"ROOT/PRICES", "series", "--help"}} {
		stdout, stderr, code := runCmd(t, args...)
		if code != 0 || !strings.Contains(stdout, "Examples:") {
			t.Errorf("%v: exit %d, no examples in:\n%s%s", args, code, stdout, stderr)
		}
	}
}

func TestNormalizeArgs(t *testing.T) {
	app := newApp(nil, nil)
	cases := []struct{ in, want string }{
		{"ROOT", "summary ROOT"},
		{"--json ROOT", "summary --json ROOT"},
		{"ROOT --snapshot 3 --json", "summary --snapshot 3 --json ROOT"},
		{"ROOT -s 3 latest --all", "latest -s 3 --all ROOT"},
		{"ROOT series A B --from 2020 --to=2021", "series --from 2020 --to=2021 ROOT A B"},
		{"--snapshot 2 ROOT series A", "series --snapshot 2 ROOT A"},
		{"series ROOT A --format csv", "series --format csv ROOT A"},
		{"ROOT latest --prefix PET. --json", "latest --prefix PET. --json ROOT"},
		{"ROOT diff 1 2", "diff ROOT 1 2"},
		{"ROOT history", "history ROOT"},
		{"ROOT series -- -A B", "series -- ROOT -A B"},
		{"ROOT series A --help", "series --help"},
		{"ROOT --help", "--help"},
		{"-h", "--help"},
		{"ROOT series -- history", "series ROOT history"},
		{"ROOT series history", "series ROOT history"},
		{"--version", "--version"},
		{"ROOT --version", "--version summary ROOT"},
		{"help series", "help series"},
		{"--json", "--json"},
		{"", ""},
	}
	for _, c := range cases {
		in := append([]string{"snapinspect"}, strings.Fields(c.in)...)
		got := strings.Join(cliutil.NormalizeArgs(app, "summary", in)[1:], " ")
		if got != c.want {
			t.Errorf("%q → %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDiffExitCode: --exit-code is 0 for equal snapshots and 1 for
// different ones, as git diff --exit-code, in text and JSON; --stat prints
// no series lines and an empty series list.
func TestDiffExitCode(t *testing.T) {
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"ROOT/PRICES", "diff", "2", "2", "--exit-code"}, 0},
		{[]string{"ROOT/PRICES", "diff", "1", "2", "--exit-code"}, 1},
		{[]string{"ROOT/PRICES", "diff", "1", "2", "--exit-code", "--json", "--stat"}, 1},
		{[]string{"ROOT/PRICES", "diff", "2", "--exit-code", "--json"}, 0},
		{[]string{"ROOT/PRICES", "diff", "1", "2"}, 0},
	}
	for _, c := range cases {
		stdout, stderr, code := runCmd(t, c.args...)
		if code != c.code || stderr != "" {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and no message", c.args, code, stderr, c.code)
		}
		if strings.Contains(strings.Join(c.args, " "), "--stat") {
			if strings.Contains(stdout, "NG.HH.D") {
				t.Errorf("%q lists series:\n%s", c.args, stdout)
			}
		}
	}
	stdout, _, _ := runCmd(t, "ROOT/PRICES", "diff", "1", "2")
	if i, j := strings.Index(stdout, "totals"), strings.Index(stdout, "NG.HH.D"); i < 0 || j < i {
		t.Errorf("totals do not come first:\n%s", stdout)
	}
}

// TestConventions walks every command (docs/CLI.md, Conventions).
func TestConventions(t *testing.T) {
	clitest.Check(t, newApp, run, map[string]string{"completion": "it prints a shell script"})
}
