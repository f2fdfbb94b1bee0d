package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/datafile"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/query"
)

// Two contents of one dataset: the same series and periods, every value
// equal to the content's marker (1 or 2), so a response mixing snapshots
// shows up as two markers, and a response whose marker disagrees with the
// snapshot id in its schema shows up as a wrong id.
const (
	flipSeries = 40
	flipRows   = 60
)

func writeMarkerLake(t testing.TB, dir string, marker float64) {
	var ids, periods, vals, cats []any
	for s := 0; s < flipSeries; s++ {
		for i := 0; i < flipRows; i++ {
			ids = append(ids, fmt.Sprintf("S%03d", s))
			periods = append(periods, fmt.Sprintf("%04d-%02d", 2015+i/12, 1+i%12))
			vals = append(vals, marker)
			cats = append(cats, []string{"Cat/Even", "Cat/Odd"}[s%2])
		}
	}
	testlake.WriteParquet(t, dir, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids},
		testlake.Col{Name: "period", Vals: periods},
		testlake.Col{Name: "value", Vals: vals, Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "category", Vals: cats},
	)
}

// flipFixture is a root with dataset FLIP: snapshot 1 holds marker 1,
// snapshot 2 marker 2 (CURRENT).
type flipFixture struct {
	root, dir  string
	lakes      [3]string // lakes[m] has marker m
	mu         sync.Mutex
	marker     map[uint64]float64 // snapshot id → its marker
	lastWithMk [3]uint64          // newest snapshot id of each marker
}

func newFlipFixture(t testing.TB, name string) *flipFixture {
	base := t.TempDir()
	f := &flipFixture{root: filepath.Join(base, "root"), marker: map[uint64]float64{}}
	f.dir = filepath.Join(f.root, name)
	for m := 1; m <= 2; m++ {
		f.lakes[m] = filepath.Join(base, fmt.Sprintf("lake%d", m))
		writeMarkerLake(t, f.lakes[m], float64(m))
		f.build(t, m)
	}
	return f
}

// build publishes a new snapshot of marker m (a real build; CURRENT flips).
func (f *flipFixture) build(t testing.TB, m int) uint64 {
	testsnap.Build(t, f.lakes[m], f.dir, nil)
	ds, _ := dsdir.Open(f.dir)
	id, err := ds.CurrentID()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.marker[id] = float64(m)
	f.lastWithMk[m] = id
	f.mu.Unlock()
	return id
}

// rollback points CURRENT at vintage id.
func (f *flipFixture) rollback(t testing.TB, id uint64) {
	ds, _ := dsdir.Open(f.dir)
	w, err := ds.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Rollback(id, dsdir.Change{Tool: "reload_test", Reason: "flip"}); err != nil {
		t.Fatal(err)
	}
}

func (f *flipFixture) gc(t testing.TB, keep int) *dsdir.GCResult {
	ds, _ := dsdir.Open(f.dir)
	w, err := ds.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := w.GC(keep, false)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// memStream is an in-process DoGet stream: it keeps copies of the messages.
type memStream struct {
	grpc.ServerStream
	ctx  context.Context
	msgs []*flight.FlightData
}

func (m *memStream) Context() context.Context { return m.ctx }
func (m *memStream) Send(d *flight.FlightData) error {
	m.msgs = append(m.msgs, proto.Clone(d).(*flight.FlightData))
	return nil
}

type memReader struct{ msgs []*flight.FlightData }

func (r *memReader) Recv() (*flight.FlightData, error) {
	if len(r.msgs) == 0 {
		return nil, io.EOF
	}
	d := r.msgs[0]
	r.msgs = r.msgs[1:]
	return d, nil
}

// answer is what the load test checks of one response.
type answer struct {
	id     uint64
	rows   int
	marker float64 // -1: the rows disagree with each other
}

// decodeAnswer reads a DoGet stream: the schema's snapshot id, the row
// count and the one marker all values must share.
func decodeAnswer(rd *flight.Reader) (answer, error) {
	var a answer
	id, err := strconv.ParseUint(metaOf(rd.Schema(), MetaSnapshotID), 10, 64)
	if err != nil {
		return a, fmt.Errorf("schema metadata %s: %v", MetaSnapshotID, err)
	}
	a.id, a.marker = id, 0
	for rd.Next() {
		rec := rd.RecordBatch()
		if got := metaOf(rec.Schema(), MetaSnapshotID); got != strconv.FormatUint(id, 10) {
			return a, fmt.Errorf("batch schema says snapshot %s, stream schema %d", got, id)
		}
		vals := rec.Column(2).(interface{ Float64Values() []float64 }).Float64Values()
		for _, v := range vals {
			if a.marker == 0 {
				a.marker = v
			} else if v != a.marker {
				a.marker = -1
			}
		}
		a.rows += int(rec.NumRows())
	}
	return a, rd.Err()
}

func metaOf(sc *arrow.Schema, key string) string {
	md := sc.Metadata()
	if i := md.FindKey(key); i >= 0 {
		return md.Values()[i]
	}
	return ""
}

// flipQueries are what the load test's clients ask, with the rows each
// must return: one series, all rows, latest from the index, a category.
var flipQueries = []struct {
	tk   string
	rows int
}{
	{`{"dataset":"FLIP","series":["S007"]}`, flipRows},
	{`{"dataset":"FLIP","prefix":""}`, flipSeries * flipRows},
	{`{"dataset":"FLIP","prefix":"","latest":true}`, flipSeries},
	{`{"dataset":"FLIP","category":"Cat","latest":true,"attributes":true}`, flipSeries},
	{`{"dataset":"FLIP","category":"Cat/Odd","start":"2016","end":"2016"}`, flipSeries / 2 * 12},
}

// snapshotMappings counts the lines of /proc/self/maps that map a file of
// the dataset's snapshots, by snapshot directory.
func snapshotMappings(t testing.TB, dir string) map[string]int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	out := map[string]int{}
	prefix := filepath.Join(dir, dsdir.SnapshotsDir) + "/"
	for _, line := range strings.Split(string(b), "\n") {
		i := strings.Index(line, prefix)
		if i < 0 {
			continue
		}
		rest := line[i+len(prefix):]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			rest = rest[:j]
		}
		out[rest]++
	}
	return out
}

// fdTargets lists what this process's file descriptors point at.
func fdTargets(t testing.TB) map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := map[string]string{}
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out[e.Name()] = l
	}
	return out
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(200 * time.Microsecond)
	}
	return cond()
}

// TestReloadUnderLoad proves reloads lose no request: 8 clients (4 over Flight, 4
// calling DoGet in-process) query without pause while the dataset is
// flipped 200 times between two contents — 20 flips by real builds, 180 by
// rollbacks to an older vintage; half the flips are found by the poller,
// half forced by DoAction reload. Every request must succeed and every
// response must come whole from exactly one snapshot (one marker, the one
// of the snapshot id in its schema). Afterwards no replaced snapshot is
// still mapped, no reference or file descriptor leaked.
func TestReloadUnderLoad(t *testing.T) {
	const flips = 200
	f := newFlipFixture(t, "FLIP")
	srv := startServer(t, Config{Root: f.root, Options: Options{ReloadInterval: 2 * time.Millisecond}})
	svc := srv.Service()
	d := svc.datasets["FLIP"]
	admin := dial(t, srv)
	ctx := context.Background()

	const flightClients, localClients = 4, 4
	clients := make([]flight.Client, flightClients)
	for i := range clients {
		clients[i] = dial(t, srv)
		if _, err := doGetRows(ctx, clients[i], []byte(flipQueries[0].tk)); err != nil {
			t.Fatal(err)
		}
	}
	statusOf(t, admin) // gRPC dials lazily: open the admin connection before counting
	fdsBefore := fdTargets(t)
	fdBase := len(fdsBefore)
	mapsBase := snapshotMappings(t, f.dir)
	t.Logf("baseline: %d fds, snapshot mappings %v", fdBase, mapsBase)

	var (
		stop     atomic.Bool
		requests atomic.Int64
		failures atomic.Int64
		wg       sync.WaitGroup
		obsMu    sync.Mutex
		seen     = map[uint64]float64{} // snapshot id → marker its responses carried
		firstErr atomic.Value
	)
	fail := func(err error) {
		failures.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	check := func(q int, a answer, err error) {
		requests.Add(1)
		switch {
		case err != nil:
			fail(fmt.Errorf("query %d: %v", q, err))
		case a.rows != flipQueries[q].rows:
			fail(fmt.Errorf("query %d: %d rows from snapshot %d, want %d", q, a.rows, a.id, flipQueries[q].rows))
		case a.marker != 1 && a.marker != 2:
			fail(fmt.Errorf("query %d: snapshot %d: rows of different snapshots in one response (marker %v)", q, a.id, a.marker))
		default:
			obsMu.Lock()
			if m, ok := seen[a.id]; ok && m != a.marker {
				fail(fmt.Errorf("snapshot %d answered with marker %v and %v", a.id, m, a.marker))
			}
			seen[a.id] = a.marker
			obsMu.Unlock()
		}
	}
	for i := 0; i < flightClients; i++ {
		wg.Add(1)
		go func(c flight.Client, i int) {
			defer wg.Done()
			for n := i; !stop.Load(); n++ {
				q := n % len(flipQueries)
				a, err := func() (answer, error) {
					stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: []byte(flipQueries[q].tk)})
					if err != nil {
						return answer{}, err
					}
					rd, err := flight.NewRecordReader(stream)
					if err != nil {
						return answer{}, err
					}
					defer rd.Release()
					return decodeAnswer(rd)
				}()
				check(q, a, err)
			}
		}(clients[i], i)
	}
	for i := 0; i < localClients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := i; !stop.Load(); n++ {
				q := n % len(flipQueries)
				a, err := func() (answer, error) {
					ms := &memStream{ctx: ctx}
					if err := svc.DoGet(&flight.Ticket{Ticket: []byte(flipQueries[q].tk)}, ms); err != nil {
						return answer{}, err
					}
					rd, err := flight.NewRecordReader(&memReader{msgs: ms.msgs})
					if err != nil {
						return answer{}, err
					}
					defer rd.Release()
					return decodeAnswer(rd)
				}()
				check(q, a, err)
			}
		}(i)
	}

	// The flipper.
	t0 := time.Now()
	live := func() uint64 { return servedID(d) }
	builds, forced := 0, 0
	for i := 0; i < flips && failures.Load() == 0; i++ {
		want := 1 + i%2 // live is 2 (marker 2) at start: flip to 1, 2, 1, …
		var target uint64
		if i%10 == 0 || i%10 == 5 { // real builds, of both contents
			target = f.build(t, want)
			builds++
		} else {
			f.mu.Lock()
			target = f.lastWithMk[want]
			f.mu.Unlock()
			f.rollback(t, target)
		}
		if i%2 == 1 {
			forced++
			res, err := admin.DoAction(ctx, &flight.Action{Type: "reload", Body: []byte("FLIP")})
			if err != nil {
				t.Fatal(err)
			}
			r, err := res.Recv()
			if err != nil {
				t.Fatalf("flip %d: reload action: %v", i, err)
			}
			var out struct{ Datasets []ReloadResult }
			if err := json.Unmarshal(r.Body, &out); err != nil || len(out.Datasets) != 1 {
				t.Fatalf("reload answer %s: %v", r.Body, err)
			}
			if got := out.Datasets[0]; got.SnapshotID != target || (got.Result != ReloadSwapped && got.Result != ReloadUnchanged) {
				t.Fatalf("flip %d: reload answered %+v, want snapshot %d", i, got, target)
			}
		}
		if !waitFor(10*time.Second, func() bool { return live() == target }) {
			t.Fatalf("flip %d: still serving %d, CURRENT names %d (status %+v)", i, live(), target, dsStatus(d))
		}
		time.Sleep(time.Millisecond) // let the clients run on the new snapshot
	}
	flipTime := time.Since(t0)
	stop.Store(true)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatalf("%d of %d requests failed; first: %v", failures.Load(), requests.Load(), err)
	}

	// Every snapshot's responses carried its own content.
	f.mu.Lock()
	for id, m := range seen {
		if f.marker[id] != m {
			t.Errorf("snapshot %d answered with marker %v, it holds %v", id, m, f.marker[id])
		}
	}
	f.mu.Unlock()

	rs := dsStatus(d)
	if rs.Reloads != flips || rs.ReloadFailures != 0 {
		t.Errorf("reload status: %d reloads, %d failures; want %d, 0", rs.Reloads, rs.ReloadFailures, flips)
	}
	if got := counterValue(t, srv.Metrics(), "servingsnap_reloads_total", "FLIP", "ok"); got != flips {
		t.Errorf("servingsnap_reloads_total{result=ok} = %v, want %d", got, flips)
	}
	// All readers are gone: only the live snapshot is referenced and mapped.
	if !waitFor(5*time.Second, func() bool { return d.Draining() == 0 }) {
		t.Errorf("%d replaced snapshots still held", d.Draining())
	}
	if v := acquireView(d); v.Readers() != 0 {
		t.Errorf("live snapshot has %d readers besides the dataset and this test", v.Readers())
		v.Release()
	} else {
		v.Release()
	}
	maps := snapshotMappings(t, f.dir)
	liveDir := dsdir.FormatID(live())
	for snap, n := range maps {
		if snap != liveDir {
			t.Errorf("snapshot %s still has %d mappings after its readers are gone", snap, n)
		}
	}
	if maps[liveDir] == 0 {
		t.Errorf("the live snapshot %s is not mapped? maps %v", liveDir, maps)
	}
	fdsAfter := fdTargets(t)
	fdEnd := len(fdsAfter)
	var added []string
	for fd, l := range fdsAfter {
		if fdsBefore[fd] != l {
			added = append(added, fd+"→"+l)
			if strings.Contains(l, f.dir) && !strings.Contains(l, liveDir) {
				t.Errorf("fd %s still open on %s", fd, l)
			}
		}
	}
	if fdEnd > fdBase+4 {
		t.Errorf("file descriptors: %d before, %d after %d flips (new: %v)", fdBase, fdEnd, flips, added)
	}
	t.Logf("fds new since the baseline: %v", added)
	t.Logf("%d requests (%d per flip), %d failures; %d flips (%d builds, %d rollbacks; %d forced by DoAction reload, %d found by the poller) in %v; snapshot mappings before %v, after %v; fds before %d, after %d",
		requests.Load(), requests.Load()/flips, failures.Load(), flips, builds, flips-builds, forced, flips-forced, flipTime.Round(time.Millisecond), mapsBase, maps, fdBase, fdEnd)
	if requests.Load() < 10*flips {
		t.Errorf("only %d requests during %d flips: the load is too thin to prove anything", requests.Load(), flips)
	}
}

// counterValue reads one counter of a metrics registry by its label values.
func counterValue(t testing.TB, m *Metrics, name string, labels ...string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
	next:
		for _, mt := range fam.GetMetric() {
			lp := mt.GetLabel()
			for i, want := range labels {
				if i >= len(lp) || lp[i].GetValue() != want {
					continue next
				}
			}
			switch {
			case mt.Counter != nil:
				return mt.Counter.GetValue()
			case mt.Gauge != nil:
				return mt.Gauge.GetValue()
			}
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

// TestReloadFailureKeepsServing: a new CURRENT whose snapshot does not
// validate is not served; the failure is in the action's error, status and
// the metrics; a poll does not re-checksum it every interval; a rollback
// clears the failure and a good build is picked up by the poller.
func TestReloadFailureKeepsServing(t *testing.T) {
	f := newFlipFixture(t, "FLIP") // serves 2
	srv := startServer(t, Config{Root: f.root, Options: Options{ReloadInterval: 5 * time.Millisecond}})
	c := dial(t, srv)
	ctx := context.Background()
	d := srv.Service().datasets["FLIP"]

	bad := f.build(t, 1) // 3, then damaged: same size, one byte changed
	// The poller may open 3 in the instant between its publish and the
	// damage below: point CURRENT back at 2 and wait until 2 is served, so
	// the damaged 3 can only be opened after it is damaged.
	f.rollback(t, 2)
	// A reload of our own waits for one in flight (reloads are
	// serialised): one that started before the rollback (and read the
	// undamaged 3) has finished, and any later one reads CURRENT = 2.
	if res := d.Reload(true); res.SnapshotID != 2 {
		t.Fatalf("not serving 2 after the rollback: %+v", res)
	}
	p := filepath.Join(f.dir, dsdir.SnapshotPath(bad), "data.arrow")
	os.Chmod(p, 0o644)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.rollback(t, bad)
	// The poller may or may not have tried it already; either way it is
	// not served, and the forced reload fails loudly.
	res, err := c.DoAction(ctx, &flight.Action{Type: "reload"})
	if err == nil {
		_, err = res.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), "still serving 2") {
		t.Fatalf("reload of a damaged snapshot: %v", err)
	}
	if id := servedID(d); id != 2 {
		t.Fatalf("serving %d after a failed reload, want 2", id)
	}
	st := statusOf(t, c)
	ds := st.Datasets[0]
	if ds.SnapshotID != 2 || ds.CurrentID != bad || ds.ReloadFailures < 1 || !strings.Contains(ds.LastError, "checksum") || ds.LastErrorAt == "" {
		t.Errorf("status after a failed reload: %+v", ds)
	}
	if v := counterValue(t, srv.Metrics(), "servingsnap_reload_failures_total", "FLIP"); v < 1 {
		t.Errorf("servingsnap_reload_failures_total = %v", v)
	}
	if v := counterValue(t, srv.Metrics(), "servingsnap_reload_failing", "FLIP"); v != 1 {
		t.Errorf("servingsnap_reload_failing = %v, want 1", v)
	}
	// Requests keep being answered from 2 (marker 2).
	a, err := getAnswer(ctx, c, flipQueries[1].tk)
	if err != nil || a.id != 2 || a.marker != 2 {
		t.Fatalf("during the failure: %+v, %v", a, err)
	}
	// The poller does not retry the same id at every interval.
	n := dsStatus(d).ReloadFailures
	time.Sleep(50 * time.Millisecond)
	if m := dsStatus(d).ReloadFailures; m != n {
		t.Errorf("the poller retried the broken snapshot %d times in 50 ms", m-n)
	}
	// Rolling back to the served snapshot clears the failure.
	f.rollback(t, 2)
	if !waitFor(5*time.Second, func() bool { return dsStatus(d).LastError == "" }) {
		t.Errorf("failure not cleared after rollback: %+v", dsStatus(d))
	}
	if v := counterValue(t, srv.Metrics(), "servingsnap_reload_failing", "FLIP"); v != 0 {
		t.Errorf("servingsnap_reload_failing = %v after rollback, want 0", v)
	}
	// A good build is found by the poller.
	good := f.build(t, 1)
	if !waitFor(10*time.Second, func() bool { return servedID(d) == good }) {
		t.Fatalf("poller did not pick up snapshot %d: %+v", good, dsStatus(d))
	}
	a, err = getAnswer(ctx, c, flipQueries[2].tk)
	if err != nil || a.id != good || a.marker != 1 {
		t.Fatalf("after the good build: %+v, %v", a, err)
	}
	// The ticket's "snapshot" field: the live id passes, another fails.
	if _, err := getAnswer(ctx, c, fmt.Sprintf(`{"dataset":"FLIP","series":["S001"],"snapshot":%d}`, good)); err != nil {
		t.Errorf("snapshot = live: %v", err)
	}
	_, err = getAnswer(ctx, c, `{"dataset":"FLIP","series":["S001"],"snapshot":2}`)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), fmt.Sprintf("serving snapshot %d, the request asks for snapshot 2", good)) {
		t.Errorf("snapshot = old: %v", err)
	}
	// Unknown dataset in the reload body.
	res, err = c.DoAction(ctx, &flight.Action{Type: "reload", Body: []byte("NOPE")})
	if err == nil {
		_, err = res.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("reload of an unknown dataset: %v", err)
	}
}

func getAnswer(ctx context.Context, c flight.Client, tk string) (answer, error) {
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: []byte(tk)})
	if err != nil {
		return answer{}, err
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		return answer{}, err
	}
	defer rd.Release()
	return decodeAnswer(rd)
}

func statusOf(t testing.TB, c flight.Client) Status {
	t.Helper()
	return statusWith(t, context.Background(), c)
}

// statusWith is the status action's answer, asked with ctx (a token's).
func statusWith(t testing.TB, ctx context.Context, c flight.Client) Status {
	t.Helper()
	res, err := c.DoAction(ctx, &flight.Action{Type: "status"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := res.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(r.Body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestGCWithServerHoldingSnapshot: gc never deletes a snapshot the server
// has open — the live one it has not reloaded away from yet, or a replaced
// one an in-flight reader still holds — and collects it once the last
// reader is gone.
func TestGCWithServerHoldingSnapshot(t *testing.T) {
	f := newFlipFixture(t, "FLIP") // 1, 2; CURRENT 2
	f.rollback(t, 1)
	svc, err := Open(f.root, Options{Limits: DefaultLimits}) // serves 1, no poller
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	d := svc.datasets["FLIP"]
	f.rollback(t, 2)
	snapDir := filepath.Join(f.dir, dsdir.SnapshotPath(1))

	// 1 is live in the server (CURRENT is 2): in use.
	r := f.gc(t, 0)
	if !containsID(r.InUse, 1) || containsID(r.Removed, 1) {
		t.Fatalf("gc while the server serves 1: %+v", r)
	}
	if _, err := os.Stat(snapDir); err != nil {
		t.Fatalf("gc deleted the served snapshot: %v", err)
	}

	// A reader pins 1 (what a running DoGet holds); the server moves to 2.
	v := acquireView(d)
	if v.ID() != 1 {
		t.Fatalf("serving %d", v.ID())
	}
	res, err := svc.Reload("")
	if err != nil || res[0].Result != ReloadSwapped || res[0].SnapshotID != 2 {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	r = f.gc(t, 0)
	if !containsID(r.InUse, 1) || containsID(r.Removed, 1) {
		t.Fatalf("gc while a reader holds 1: %+v", r)
	}
	// The reader's slices are still valid: the files are there and mapped.
	if d.Draining() != 1 || snapshotMappings(t, f.dir)[dsdir.FormatID(1)] == 0 {
		t.Errorf("draining %d, mappings %v", d.Draining(), snapshotMappings(t, f.dir))
	}
	p, err := svc.plan(v, &Query{Dataset: "FLIP", HasPrefix: true, Prefix: "S00", From: math.MinInt32, To: math.MaxInt32})
	if err != nil || p.Rows() != 10*flipRows {
		t.Fatalf("reading the held snapshot: %v rows, %v", p, err)
	}
	if got := v.Snapshot().Batch(0).Column(datafile.ColumnValue).(interface{ Float64Values() []float64 }).Float64Values()[0]; got != 1 {
		t.Errorf("held snapshot value %v, want marker 1", got)
	}

	// The last reader releases: unmapped, lease dropped, gc collects it.
	v.Release()
	if d.Draining() != 0 {
		t.Errorf("draining %d after the last release", d.Draining())
	}
	if n := snapshotMappings(t, f.dir)[dsdir.FormatID(1)]; n != 0 {
		t.Errorf("snapshot 1 still has %d mappings", n)
	}
	r = f.gc(t, 0)
	if !containsID(r.Removed, 1) || len(r.InUse) != 0 {
		t.Fatalf("gc after the last release: %+v", r)
	}
	if _, err := os.Stat(snapDir); !os.IsNotExist(err) {
		t.Errorf("snapshot 1 still on disk: %v", err)
	}
	// The live snapshot is never collected.
	if containsID(r.Removed, 2) {
		t.Errorf("gc removed the live snapshot: %+v", r)
	}
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestCategoryBoundary: a category matches itself and what lies below it
// at a '/', never a longer name.
func TestCategoryBoundary(t *testing.T) {
	f := newFlipFixture(t, "FLIP")
	svc, err := Open(f.root, Options{Limits: DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	v := acquireView(svc.datasets["FLIP"])
	defer v.Release()
	for cat, want := range map[string]int{"Cat": flipSeries, "Cat/": flipSeries, "Cat/Odd": flipSeries / 2, "Ca": 0, "Cat/Od": 0, "Cat/Odd/x": 0} {
		sel, err := v.Reader().Select(query.Selector{Kind: query.ByCategory, Category: cat})
		got := sel.Len()
		if err != nil {
			if status.Code(toStatus(err)) != codes.NotFound {
				t.Errorf("category %q: %v", cat, err)
			}
			got = 0
		}
		if got != want {
			t.Errorf("category %q matches %d series, want %d", cat, got, want)
		}
	}
}
