package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
)

func current(t *testing.T, ds string) uint64 {
	t.Helper()
	d, err := dataset.Open(ds)
	if err != nil {
		t.Fatal(err)
	}
	id, err := d.CurrentID()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPublishCycle: build --no-publish stages a vintage CURRENT does not
// name; publish refuses it while it does not verify, flips it once it
// does, and refuses to move CURRENT back or to a missing vintage.
func TestPublishCycle(t *testing.T) {
	root := t.TempDir()
	lake, ds := testsnap.Sample(t, root, "SYN", 20, 1, nil) // vintage 1, CURRENT
	code, out, errOut := snapbuild("build", "--input", lake, "--out", ds, "--no-publish", "--json")
	if code != 0 {
		t.Fatalf("build --no-publish: exit %d: %s", code, errOut)
	}
	var sum struct {
		SnapshotID uint64 `json:"snapshot_id"`
		Published  bool   `json:"published"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.SnapshotID != 2 || sum.Published {
		t.Fatalf("build --no-publish --json: %v %+v\n%s", err, sum, out)
	}
	if got := current(t, ds); got != 1 {
		t.Fatalf("CURRENT = %d after --no-publish, want 1", got)
	}
	code, out, _ = snapbuild("build", "--input", lake, "--out", ds, "--no-publish")
	if code != 0 || !strings.Contains(out, "NOT published") || !strings.Contains(out, "snapbuild publish "+ds+" --id 3") {
		t.Fatalf("build --no-publish text: exit %d\n%s", code, out)
	}

	// Damage vintage 2's index (same size): publish refuses, exit 1.
	d, _ := dataset.Open(ds)
	m, err := d.Load(2)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := m.FileByRole("index")
	p := d.Path(x.Path)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(orig)
	bad[len(bad)/2] ^= 0xff
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = snapbuild("publish", ds, "--id", "2")
	if code != 1 || !strings.Contains(errOut, "snapshot 2 of SYN does not verify") || !strings.Contains(errOut, "[checksum]") || out != "" {
		t.Errorf("publish of a damaged vintage: exit %d, %q %q", code, out, errOut)
	}
	if got := current(t, ds); got != 1 {
		t.Fatalf("CURRENT = %d after a refused publish, want 1", got)
	}
	os.WriteFile(p, orig, 0o644)

	code, out, errOut = snapbuild("publish", ds, "--id", "2", "--json")
	if code != 0 || !strings.Contains(out, `"from": 1`) || !strings.Contains(out, `"to": 2`) {
		t.Fatalf("publish --id 2: exit %d, %s %s", code, out, errOut)
	}
	if got := current(t, ds); got != 2 {
		t.Fatalf("CURRENT = %d after publish, want 2", got)
	}
	code, out, _ = snapbuild("publish", ds, "--id", "2")
	if code != 0 || !strings.Contains(out, "already CURRENT") {
		t.Errorf("publish of CURRENT again: exit %d, %q", code, out)
	}
	code, out, _ = snapbuild("publish", ds, "--id", "3")
	if code != 0 || !strings.Contains(out, "CURRENT 2 -> 3") {
		t.Errorf("publish --id 3: exit %d, %q", code, out)
	}
	code, _, errOut = snapbuild("publish", ds, "--id", "1")
	if code != 1 || !strings.Contains(errOut, "CURRENT is 3") || !strings.Contains(errOut, "rollback --to 1") {
		t.Errorf("publish of an older vintage: exit %d, %q", code, errOut)
	}
	code, _, errOut = snapbuild("publish", ds, "--id", "9")
	if code != 2 || !strings.Contains(errOut, "snapshot 9 of SYN does not exist") {
		t.Errorf("publish of a missing vintage: exit %d, %q", code, errOut)
	}
	h, err := d.Flips()
	if err != nil || len(h) != 3 || h[1].Action != dataset.ActionPublish || h[1].From != 1 || h[1].To != 2 {
		t.Errorf("HISTORY: %v %+v", err, h)
	}
}

// TestBuildPublishGuards: the CLI refuses an empty input and an
// implausible change by default, with the override named.
func TestBuildPublishGuards(t *testing.T) {
	root := t.TempDir()
	lake, ds := testsnap.Sample(t, root, "SYN", 20, 1, nil)
	small, _ := testsnap.Sample(t, t.TempDir(), "SMALL", 5, 1, nil)
	code, _, errOut := snapbuild("build", "--input", small, "--out", ds)
	if code != 1 || !strings.Contains(errOut, "--max-change 0") || current(t, ds) != 1 {
		t.Errorf("build of a quarter of the series: exit %d, %q", code, errOut)
	}
	if code, _, errOut := snapbuild("build", "--input", small, "--out", ds, "--max-change", "0"); code != 0 || current(t, ds) != 2 {
		t.Errorf("build --max-change 0: exit %d, %q", code, errOut)
	}
	if code, _, errOut := snapbuild("build", "--input", lake, "--out", ds, "--max-change", "1.5"); code != 2 || !strings.Contains(errOut, "[0, 1)") {
		t.Errorf("--max-change 1.5: exit %d, %q", code, errOut)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBuildStopsOnSIGTERM: a build waiting for the dataset's lock (held
// by another process) gets SIGTERM: it exits 1 saying it was interrupted,
// publishes nothing and leaves no staging behind.
func TestBuildStopsOnSIGTERM(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Fatal("this test needs flock(1) (util-linux) to hold the lock from another process")
	}
	root := t.TempDir()
	lake, ds := testsnap.Sample(t, root, "SYN", 20, 1, nil)
	hold := exec.Command(flock, filepath.Join(ds, "LOCK"), "sleep", "60")
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { hold.Process.Kill(); hold.Wait() }()

	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"snapbuild", "build", "--input", lake, "--out", ds}, &stdout, &stderr)
	}()
	// The build says it waits for the lock once its signal handler is
	// installed (the handler comes first), so the signal cannot kill the
	// test binary.
	for !strings.Contains(stderr.String(), "holds the write lock") {
		select {
		case code := <-done:
			t.Fatalf("build ended (exit %d) before waiting for the lock: %s", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := <-done
	if code != 1 || !strings.Contains(stderr.String(), "build interrupted (received terminated)") || !strings.Contains(stderr.String(), "nothing published") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if got := current(t, ds); got != 1 {
		t.Errorf("CURRENT = %d, want 1", got)
	}
	if ents, _ := os.ReadDir(filepath.Join(ds, dataset.TmpDir)); len(ents) != 0 {
		t.Errorf("staging left behind: %v", ents)
	}
}
