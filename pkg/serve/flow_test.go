package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/served"
)

// TestFlowBudget: the budget is split into a small answers' pool and a
// large one, each shared among peer hosts; a stream that finds no room
// waits, proceeds when bytes are given back in time, and is
// ResourceExhausted naming the limit otherwise. A full large pool, or a
// client over its share, holds up no one else.
func TestFlowBudget(t *testing.T) {
	m := newFlowMetrics()
	// Budget 400, one batch 40: small pool 100 (25 a host), large 300 (75
	// a host). The wait for budget is the stream timeout: long enough that
	// the release 5 ms into the wait below lands inside it even on a loaded
	// machine under -race.
	f := newFlowControl(Limits{MaxInFlightBytes: 400, BatchBytes: 40, StreamTimeout: time.Second}, slog.New(slog.DiscardHandler), &m)
	defer f.close()
	d, v := &fakeOwner{}, &served.View{}
	from := func(host string) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(host), Port: 5000}})
	}
	held := map[string]*streamFlow{}
	steps := []struct {
		name, host string
		want       int64
		reserved   int64  // 0: refused
		refusal    string // in the refusal's message
	}{
		{"large, clamped to a host's share", "10.0.0.1", 1000, 75, ""},
		{"same host over its share", "10.0.0.1", 75, 0, "this client's share of the large answers"},
		{"same host, small answer: its own pool", "10.0.0.1", 30, 25, ""},
		{"host 2", "10.0.0.2", 75, 75, ""},
		{"host 3", "10.0.0.3", 75, 75, ""},
		{"host 4 fills the large pool", "10.0.0.4", 300, 75, ""},
		{"host 5, large pool full", "10.0.0.5", 75, 0, "the large answers' share"},
		{"host 5, small answer not held up", "10.0.0.5", 40, 25, ""},
	}
	for _, s := range steps {
		st, err := f.begin(from(s.host), d, v, s.want)
		if s.reserved == 0 {
			if status.Code(toStatus(err)) != codes.ResourceExhausted || !strings.Contains(err.Error(), s.refusal) {
				t.Fatalf("%s: %v, want ResourceExhausted naming %q", s.name, err, s.refusal)
			}
			continue
		}
		if err != nil || st.reserved != s.reserved {
			t.Fatalf("%s: %v, reserved %d, want %d", s.name, err, st.reserved, s.reserved)
		}
		held[s.name] = st
	}
	// freed during the wait: proceeds
	go func() { time.Sleep(5 * time.Millisecond); f.end(held["host 2"]) }()
	st, err := f.begin(from("10.0.0.5"), d, v, 75)
	if err != nil {
		t.Fatalf("stream after the budget was freed: %v", err)
	}
	held["host 5 after"] = st
	for k, st := range held {
		if k != "host 2" {
			f.end(st)
		}
	}
	if n := f.reservedNow.Load(); n != 0 {
		t.Fatalf("%d bytes still reserved after every stream ended", n)
	}
	for _, p := range []*flowPool{f.small, f.large} {
		if p.used != 0 || len(p.hosts) != 0 {
			t.Fatalf("%s pool after every stream ended: %d bytes used, hosts %v", p.name, p.used, p.hosts)
		}
	}
}

// TestFlowGiveBack: freed memory goes back to the OS once the bytes
// reserved fall from a high mark to a quarter of it, then once more
// freeEvery later, and no more often.
func TestFlowGiveBack(t *testing.T) {
	f := newFlowControl(Limits{MaxInFlightBytes: 1600, BatchBytes: 10}, slog.New(slog.DiscardHandler), nil)
	defer f.close()
	calls := 0
	f.freeOS = func() { calls++ }
	d, v := &fakeOwner{}, &served.View{}
	ctx := func(i int) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, byte(i)), Port: 1}})
	}
	now := time.Now()
	var sts []*streamFlow
	for i := range 4 { // 4 × 100 in the large pool: the high mark 400
		st, err := f.begin(ctx(i), d, v, 100)
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	steps := []struct {
		name  string
		end   int           // streams to end first
		after time.Duration // since the start
		calls int
	}{
		{"streams holding 400: nothing to give back", 0, 0, 0},
		{"300 of 400 ended", 3, 0, 1},
		{"again too soon", 0, time.Second, 1},
		{"once more after freeEvery", 0, freeEvery + time.Second, 2},
		{"then no more", 0, 3 * freeEvery, 2},
	}
	for _, s := range steps {
		for range s.end {
			f.end(sts[0])
			sts = sts[1:]
		}
		f.giveBack(now.Add(s.after))
		if calls != s.calls {
			t.Fatalf("%s: %d calls, want %d", s.name, calls, s.calls)
		}
	}
	f.end(sts[0])
}

// TestFlowLease: a stream whose snapshot is replaced is expired after the
// lease timeout (its context then ends the stream at the next batch); a
// stream on the live snapshot is not.
func TestFlowLease(t *testing.T) {
	f := newFlowControl(Limits{LeaseTimeout: 20 * time.Millisecond}, slog.New(slog.DiscardHandler), nil)
	defer f.close()
	oldV, liveV := &served.View{}, &served.View{}
	d := &fakeOwner{live: liveV}
	old, _ := f.begin(context.Background(), d, oldV, 0)
	cur, _ := f.begin(context.Background(), d, liveV, 0)
	defer f.end(old)
	defer f.end(cur)
	if !waitFor(5*time.Second, old.expired.Load) {
		t.Fatal("a stream on a replaced snapshot did not expire")
	}
	ctx := stopContext{Context: context.Background(), stop: context.Background(), flow: old}
	if ctx.Err() != errLeaseExpired {
		t.Fatalf("expired stream's context: %v", ctx.Err())
	}
	if cur.expired.Load() {
		t.Fatal("a stream on the live snapshot expired")
	}
}

// fakeOwner is a dataset X serving the view live.
type fakeOwner struct{ live *served.View }

func (o *fakeOwner) Name() string               { return "X" }
func (o *fakeOwner) Serves(v *served.View) bool { return v == o.live }

func insecureDial() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
}

// rss is a process's resident set: total and anonymous, in bytes.
func rss(t testing.TB, pid int) (total, anon int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(fs[1], 10, 64)
		switch fs[0] {
		case "VmRSS:":
			total = n << 10
		case "RssAnon:":
			anon = n << 10
		}
	}
	return total, anon
}

// TestStalledClients: 100 clients open a DoGet of a whole dataset (tens of
// MB) and stop reading. The server process holds less than 256 MiB
// resident while they are stalled (the in-flight budget makes most of them
// wait before they hold anything), and once the stream timeout has ended
// them, the snapshot has no reader left and the budget is whole again.
func TestStalledClients(t *testing.T) {
	root := t.TempDir()
	testsnap.Sample(t, root, "BIG", 12000, 3, nil)
	os.RemoveAll(filepath.Join(root, "lake-BIG"))
	m, err := dsOpen(t, filepath.Join(root, "BIG")).Current()
	if err != nil {
		t.Fatal(err)
	}
	df, _ := m.FileByRole(manifest.RoleData)
	// a production build of snapbuild (not this test binary, which may
	// carry the race detector's shadow memory), collecting at the runtime's
	// own GOGC=100: the default --gc-headroom lets up to 256 MiB of garbage
	// wait for a collection (30 MiB of it here), and --gc-read-headroom 16
	// MiB, which is what those flags document, not what the stalled streams
	// hold (with them, a fresh clone's run measured 257 MiB)
	p := startBinary(t, root, "--reload-interval", "0", "--stream-timeout", "15s", "--gc-headroom", "0", "--gc-read-headroom", "0")
	c := dialAddr(t, p.flight)
	ctx := context.Background()
	if _, err := get(ctx, c, allOf("BIG")); err != nil { // warm: every page read once
		t.Fatal(err)
	}
	base, baseAnon := rss(t, p.cmd.Process.Pid)
	const clients = 100
	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := flight.NewClientWithMiddleware(p.flight, nil, nil, insecureDial()...)
			if err != nil {
				opened <- err
				return
			}
			defer cl.Close()
			st, err := cl.DoGet(cctx, &flight.Ticket{Ticket: allOf("BIG")})
			opened <- err
			if err == nil {
				st.Recv() // the schema (or a refusal); then read nothing more
			}
			<-cctx.Done()
		}()
	}
	for i := 0; i < clients; i++ {
		if err := <-opened; err != nil {
			t.Fatalf("stalled client: %v", err)
		}
	}
	// every stream has reached the server: either blocked in Send or
	// waiting for the budget
	if !waitFor(60*time.Second, func() bool {
		return strings.Contains(p.metrics(t), `servingsnap_requests_in_flight{method="DoGet"} 100`)
	}) {
		t.Fatal("the 100 streams did not all reach the server")
	}
	// sample while they are stalled (before the 15 s stream timeout)
	var peak, peakAnon int64
	for i := 0; i < 10; i++ {
		tot, anon := rss(t, p.cmd.Process.Pid)
		peak, peakAnon = max(peak, tot), max(peakAnon, anon)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("100 stalled clients on a %d-byte data file (%d rows): server RSS %d MiB (base %d MiB), RssAnon %d MiB (base %d MiB)",
		df.Size, df.Rows, peak>>20, base>>20, peakAnon>>20, baseAnon>>20)
	if peak >= 256<<20 {
		t.Errorf("100 stalled clients: server RSS %d MiB, want < 256 MiB", peak>>20)
	}
	// the stream timeout ends them: no reader left, the budget whole
	if !waitFor(120*time.Second, func() bool {
		st := datasetStatus(t, c, "BIG")
		return st.Readers == 0 && strings.Contains(p.metrics(t), "servingsnap_inflight_bytes 0\n")
	}) {
		t.Fatalf("stalled streams still hold the snapshot: %+v", datasetStatus(t, c, "BIG"))
	}
	if !strings.Contains(p.metrics(t), "servingsnap_streams_stalled_total") {
		t.Error("no stalled-stream metric")
	}
	cancel()
	wg.Wait()
	p.alive(t)
}

// startBinary builds cmd/snapbuild (without the race detector, whatever
// this test runs with) and runs `snapbuild serve` on root with flags.
func startBinary(t *testing.T, root string, flags ...string) *serverProc {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build snapbuild: %v", err)
	}
	mod, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "snapbuild")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/snapbuild")
	build.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	args := append([]string{"serve", "--root", root, "--addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, exited: make(chan error, 1)}
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("snapbuild serve: %v", err)
	}
	var ready struct{ Flight, HTTP string }
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		cmd.Process.Kill()
		t.Fatalf("ready line %q: %v", line, err)
	}
	p.flight = strings.TrimPrefix(ready.Flight, "grpc+tcp://")
	p.http = strings.TrimPrefix(ready.HTTP, "http://")
	go func() { io.Copy(io.Discard, br); p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(40 * time.Second):
			cmd.Process.Kill()
		}
	})
	return p
}
