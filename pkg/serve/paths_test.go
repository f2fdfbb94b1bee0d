package serve

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rootForms are the ways a message could spell the served root.
func rootForms(t *testing.T, root string) []string {
	t.Helper()
	forms := []string{root}
	if abs, err := filepath.Abs(root); err == nil {
		forms = append(forms, abs)
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			forms = append(forms, real)
		}
	}
	return forms
}

var requestIDRe = regexp.MustCompile(` \[request ([0-9a-f]{8}-[0-9]+)\]$`)

// checkClientError checks what a client got for a failure: no spelling of
// the root in it, the dataset named, a request id at its end; and that
// the log line of that request id keeps the full message (the root in it
// when wantRootInLog), of which the client's is the redaction.
func checkClientError(t *testing.T, what string, err error, code codes.Code, root string, logs *logRecorder, wantRootInLog bool) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || err == nil || st.Code() != code {
		t.Errorf("%s: %v, want %v", what, err, code)
		return
	}
	msg := st.Message()
	for _, r := range rootForms(t, root) {
		if strings.Contains(msg, r) {
			t.Errorf("%s: the client's message holds the server's path %s: %s", what, r, msg)
		}
	}
	if !strings.Contains(msg, "LIVE") {
		t.Errorf("%s: the client's message does not name the dataset: %s", what, msg)
	}
	m := requestIDRe.FindStringSubmatch(msg)
	if m == nil {
		t.Errorf("%s: no request id at the end of %q", what, msg)
		return
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, rec := range logs.recs {
		if rec.attrs["request_id"] != m[1] {
			continue
		}
		full := rec.attrs["error"]
		if wantRootInLog && !strings.Contains(full, root) {
			t.Errorf("%s: the log line of request %s lacks the detail: %q", what, m[1], full)
		}
		if red := newRedactor(root).message(code, full); red != strings.TrimSuffix(msg, m[0]) {
			t.Errorf("%s: the client's message %q is not the log's %q redacted (%q)", what, msg, full, red)
		}
		return
	}
	t.Errorf("%s: no log line carries request id %s", what, m[1])
}

// TestNoServerPathsInClientErrors drives the failures whose messages name
// files (a write-ahead log that cannot be opened or is held by another
// server, a compaction and a discard that cannot publish, a reload of a
// damaged CURRENT) and checks that no status message a client gets holds
// the served root, while the server's log keeps the full message under
// the request id the client is given.
func TestNoServerPathsInClientErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	row := putRows{"series_id": {"A"}, "period": {"2030-01"}, "value": {1.0}}

	t.Run("wal cannot be opened", func(t *testing.T) {
		root := liveRoot(t)
		// the log's directory is a file (a permission change would not
		// stop a test run as root)
		if err := os.WriteFile(filepath.Join(root, "LIVE", WALDir), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		srv, logs, err := startLogged(t, root)
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, srv)
		_, err = doPut(ctx, c, "LIVE", row.record(t))
		checkClientError(t, "DoPut", err, codes.Unavailable, root, logs, true)
		// the status action's reason names the log's file, relative to the root
		res, err := c.DoAction(ctx, &flight.Action{Type: "status"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := res.Recv()
		if err != nil {
			t.Fatal(err)
		}
		body := string(r.Body)
		for _, f := range rootForms(t, root) {
			if strings.Contains(body, f) {
				t.Errorf("status holds the server's path %s: %s", f, body)
			}
		}
		if !strings.Contains(body, "LIVE/wal/") {
			t.Errorf("status does not name the log relative to the root: %s", body)
		}
	})

	t.Run("wal held by another server", func(t *testing.T) {
		root := liveRoot(t)
		first := startServer(t, Config{Root: root})
		if _, err := doPut(ctx, dial(t, first), "LIVE", row.record(t)); err != nil {
			t.Fatal(err)
		}
		srv, logs, err := startLogged(t, root)
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, srv)
		_, err = doPut(ctx, c, "LIVE", row.record(t))
		checkClientError(t, "DoPut", err, codes.Unavailable, root, logs, false)
		checkClientError(t, "compact", doAction(ctx, c, "compact", "LIVE"), codes.Unavailable, root, logs, false)
	})

	t.Run("compaction and discard cannot publish", func(t *testing.T) {
		root := liveRoot(t)
		srv, logs, err := startLogged(t, root)
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, srv)
		if _, err := doPut(ctx, c, "LIVE", row.record(t)); err != nil {
			t.Fatal(err)
		}
		// the dataset's manifests directory becomes a file: taking the
		// write lock (which makes the layout) fails
		ds := filepath.Join(root, "LIVE")
		if err := os.Rename(filepath.Join(ds, "manifests"), filepath.Join(ds, "manifests.moved")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ds, "manifests"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := c.DoAction(ctx, &flight.Action{Type: "compact", Body: []byte("LIVE")})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = st.Recv()
		}
		if err == io.EOF {
			t.Fatal("compaction succeeded without its manifests directory")
		}
		checkClientError(t, "compact", err, status.Code(err), root, logs, true)
		if id := st.Trailer().Get(requestIDKey); len(id) != 1 || !strings.Contains(err.Error(), "[request "+id[0]+"]") {
			t.Errorf("trailer request id %q, message %v", id, err)
		}
		err = doAction(ctx, c, "discard", "LIVE")
		checkClientError(t, "discard", err, status.Code(err), root, logs, true)
	})

	t.Run("reload of a damaged CURRENT", func(t *testing.T) {
		root := liveRoot(t)
		srv, logs, err := startLogged(t, root)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "LIVE", "CURRENT"), []byte("000009\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		err = doAction(ctx, dial(t, srv), "reload", "LIVE")
		checkClientError(t, "reload", err, codes.FailedPrecondition, root, logs, true)
	})
}

func TestRedactor(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "srv", "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	r := newRedactor(link)
	for _, tc := range []struct {
		code     codes.Code
		msg, out string
	}{
		{codes.Unavailable, "open " + link + "/LIVE/wal/CHECKPOINT: not a directory", "open LIVE/wal/CHECKPOINT: not a directory"},
		{codes.Unavailable, "open " + root + "/LIVE/wal/CHECKPOINT: not a directory", "open LIVE/wal/CHECKPOINT: not a directory"},
		{codes.Internal, "stat " + root + ": gone", "stat <root>: gone"},
		{codes.Internal, `read "/var/lib/x/LIVE/data.arrow": EIO (/proc/self/fd)`, `read "…/data.arrow": EIO (…/fd)`},
		{codes.Internal, "units $/t and category a/b/c, one /x", "units $/t and category a/b/c, one /x"},
		{codes.NotFound, `series "/a/b/c" not found`, `series "/a/b/c" not found`},
		{codes.FailedPrecondition, "at /a/b/c.", "at …/c."},
		{codes.FailedPrecondition, "served at grpc://127.0.0.1:8815/x/y, not here", "served at grpc://127.0.0.1:8815/x/y, not here"},
	} {
		if got := r.message(tc.code, tc.msg); got != tc.out {
			t.Errorf("%v %q:\n got %q\nwant %q", tc.code, tc.msg, got, tc.out)
		}
	}
	if got := newRedactor("snapshots").text("no snapshots here"); got != "no snapshots here" {
		t.Errorf("a bare relative root cut from a word: %q", got)
	}
}
