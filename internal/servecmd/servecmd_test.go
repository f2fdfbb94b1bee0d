package servecmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/pkg/serve"
)

// TestReadTokens: --token-file and --token-env alone and together; a
// token in both, a bad line or an unset variable is an error naming where.
func TestReadTokens(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	os.WriteFile(file, []byte("# readers\nfile-0123456789abcdef scopes=read\n"), 0o600)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("\nbad-0123456789abcdef scopes=read,root\n"), 0o600)
	t.Setenv("SERVECMD_TEST_TOKENS", "env-0123456789abcdef scopes=write datasets=PET;env2-0123456789abcdef")
	t.Setenv("SERVECMD_TEST_DUP", "file-0123456789abcdef")
	for _, tc := range []struct {
		file, env string
		valid     []string // tokens accepted
		err       string
	}{
		{"", "", nil, ""},
		{file, "", []string{"file-0123456789abcdef"}, ""},
		{"", "SERVECMD_TEST_TOKENS", []string{"env-0123456789abcdef", "env2-0123456789abcdef"}, ""},
		{file, "SERVECMD_TEST_TOKENS", []string{"file-0123456789abcdef", "env-0123456789abcdef", "env2-0123456789abcdef"}, ""},
		{bad, "", nil, "--token-file: " + bad + `:2: unknown scope "root"`},
		{"", "SERVECMD_TEST_UNSET", nil, "--token-env: environment variable SERVECMD_TEST_UNSET is not set"},
		{file, "SERVECMD_TEST_DUP", nil, "tokens: $SERVECMD_TEST_DUP:1: the same token as " + file + ":2"},
	} {
		toks, err := readTokens(tc.file, tc.env)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %q: %v, want %q", tc.file, tc.env, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q %q: %v", tc.file, tc.env, err)
		case tc.valid == nil && toks != nil:
			t.Errorf("no flags: tokens %v", toks)
		default:
			for _, tok := range tc.valid {
				if !toks.Valid(tok) {
					t.Errorf("%q %q: %s refused", tc.file, tc.env, tok)
				}
			}
			if toks != nil && toks.Valid("other-0123456789abcdef") {
				t.Errorf("%q %q: an unknown token accepted", tc.file, tc.env)
			}
		}
	}
}

// TestPreparedLimits: the prepared statements' flags, good and bad.
func TestPreparedLimits(t *testing.T) {
	for _, tc := range []struct {
		total, per string
		ttl        time.Duration
		want       serve.Limits
		err        string
	}{
		{"64MiB", "16MiB", 15 * time.Minute, serve.Limits{MaxPreparedBytes: 64 << 20, MaxPreparedBytesPerClient: 16 << 20, PreparedTTL: 15 * time.Minute}, ""},
		{"0", "0", 0, serve.Limits{}, ""},
		{"lots", "16MiB", time.Minute, serve.Limits{}, "--max-prepared-bytes: "},
		{"64MiB", "-1", time.Minute, serve.Limits{}, "--max-prepared-bytes-per-client: "},
		{"64MiB", "16MiB", -time.Second, serve.Limits{}, "--prepared-ttl -1s: want 0 or more"},
	} {
		var l serve.Limits
		err := preparedLimits(&l, tc.total, tc.per, tc.ttl)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q %q %s: %v, want %q", tc.total, tc.per, tc.ttl, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q %q %s: %v", tc.total, tc.per, tc.ttl, err)
		case l != tc.want:
			t.Errorf("%q %q %s: %+v, want %+v", tc.total, tc.per, tc.ttl, l, tc.want)
		}
	}
	if d := serve.DefaultLimits; d.MaxPreparedBytes != 64<<20 || d.MaxPreparedBytesPerClient != 16<<20 || d.PreparedTTL != 15*time.Minute {
		t.Errorf("defaults %d %d %s, the flags' are 64MiB 16MiB 15m", d.MaxPreparedBytes, d.MaxPreparedBytesPerClient, d.PreparedTTL)
	}
}

// TestFlagsDocumented: every flag of serve has a row in the flag table of
// docs/FLIGHT.md (CLI.md sends readers there for the full list).
func TestFlagsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "FLIGHT.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "| `--") {
			rows = append(rows, l[:strings.Index(l[1:], "|")+1]) // the first cell: the flag names
		}
	}
	if len(rows) < 10 {
		t.Fatalf("docs/FLIGHT.md: found %d flag rows, want the table of serve's flags", len(rows))
	}
	for _, f := range Command("test").Flags {
		name := "`--" + f.Names()[0] + "`"
		found := false
		for _, r := range rows {
			found = found || strings.Contains(r, name)
		}
		if !found {
			t.Errorf("docs/FLIGHT.md's flag table has no row for %s", name)
		}
	}
}

// TestParsePrefetch: --prefetch is auto, off or a size; anything else is
// an error naming what is accepted.
func TestParsePrefetch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{"auto", serve.PrefetchAuto, ""},
		{"AUTO", serve.PrefetchAuto, ""},
		{"off", 0, ""},
		{"0", 0, ""},
		{"2GiB", 2 << 30, ""},
		{"512MiB", 512 << 20, ""},
		{"1000", 1000, ""},
		{"", 0, "(or auto, off)"},
		{"lots", 0, "(or auto, off)"},
		{"-1", 0, "out of range"},
	} {
		got, err := parsePrefetch(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %d, %v; want an error with %q", tc.in, got, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case got != tc.want:
			t.Errorf("%q: %d, want %d", tc.in, got, tc.want)
		}
	}
}
