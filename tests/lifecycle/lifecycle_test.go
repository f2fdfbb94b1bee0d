// Package lifecycle proves the commit protocol of a dataset by generated
// histories (pebble's metamorphic tests are the model): seeded random
// sequences of live writes, compactions (asked for, and by threshold in
// the background), lake builds of two lakes (published, staged then
// published, superseding the live writes), rollbacks and roll-forwards,
// gc, discards, graceful restarts, start-before-stop hand-overs and kill
// -9, run against real server processes (snapserve) and the real command
// line (snapbuild), with a read-only replica following the writer. An
// oracle in the test knows what must be served: the snapshot CURRENT
// names, with every acknowledged write after the log's checkpoint merged
// over it (docs/OPERATIONS.md "One truth for a dataset"). It learns what
// the server did on its own (background compactions) from HISTORY, and
// after every step compares every series the writer and the replica serve
// with what it expects, and across every restart.
//
//	go test ./tests/lifecycle                                   # CI: a bounded run
//	LIFECYCLE_STEPS=5000 LIFECYCLE_SEEDS=1,2,3 go test -timeout 2h -v ./tests/lifecycle   # make soak-lifecycle
package lifecycle

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/dataset"
)

// bin is the directory TestMain builds snapserve and snapbuild into.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lifecycle-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	build := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/snapserve", "./cmd/snapbuild")
	build.Dir = moduleRoot()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the binaries:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func moduleRoot() string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// settings: CI runs two seeds of a few hundred steps; make soak-lifecycle
// sets LIFECYCLE_STEPS and LIFECYCLE_SEEDS.
func settings() (steps int, seeds []uint64) {
	steps = 150
	if v, err := strconv.Atoi(os.Getenv("LIFECYCLE_STEPS")); err == nil && v > 0 {
		steps = v
	}
	seeds = []uint64{1, 2}
	if v := os.Getenv("LIFECYCLE_SEEDS"); v != "" {
		seeds = nil
		for _, s := range strings.Split(v, ",") {
			if n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64); err == nil {
				seeds = append(seeds, n)
			}
		}
	}
	return steps, seeds
}

func TestLifecycle(t *testing.T) {
	steps, seeds := settings()
	var total counts
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			h := newHarness(t, seed)
			defer h.close()
			for i := 0; i < steps && !t.Failed(); i++ {
				h.step(i)
			}
			t.Logf("seed %d: %s", seed, h.n)
			total.add(h.n)
		})
	}
	t.Logf("total: %s", total)
}

// counts are what a run did, for its log line (the soak's figures).
type counts struct {
	steps, puts, rows, compactions, published, builds, supersedes, publishes, rollbacks, gcs, discards,
	restarts, handovers, kills, contended, compares, replicaCompares, mismatches int
}

func (c counts) String() string {
	return fmt.Sprintf("%d steps: %d puts (%d rows), %d compactions asked, %d published (asked or by threshold), %d builds (%d superseding), %d publishes, %d rollbacks, %d gc, %d discards, %d restarts, %d hand-overs, %d kills -9, %d compactions raced by a CURRENT move; %d compares of the writer, %d of the replica; %d mismatches",
		c.steps, c.puts, c.rows, c.compactions, c.published, c.builds, c.supersedes, c.publishes, c.rollbacks, c.gcs, c.discards,
		c.restarts, c.handovers, c.kills, c.contended, c.compares, c.replicaCompares, c.mismatches)
}

func (c *counts) add(o counts) {
	c.steps += o.steps
	c.puts += o.puts
	c.rows += o.rows
	c.compactions += o.compactions
	c.published += o.published
	c.builds += o.builds
	c.supersedes += o.supersedes
	c.publishes += o.publishes
	c.rollbacks += o.rollbacks
	c.gcs += o.gcs
	c.discards += o.discards
	c.restarts += o.restarts
	c.handovers += o.handovers
	c.kills += o.kills
	c.contended += o.contended
	c.compares += o.compares
	c.replicaCompares += o.replicaCompares
	c.mismatches += o.mismatches
}

const dsName = "LIFE"

// content is what one snapshot, or the served dataset, holds:
// "series|period" → value.
type content map[string]float64

func (c content) clone() content {
	out := make(content, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// write is one acknowledged DoPut batch: its log position and rows.
type write struct {
	pos  uint64
	rows [][3]any // id, period, value
}

// oracle is what must be served, learnt from what the test did and from
// HISTORY (what the server did by itself).
type oracle struct {
	vintages   map[uint64]content // known content of each vintage
	staged     []uint64           // built with --no-publish, not yet published
	current    uint64
	checkpoint uint64
	writes     []write
	history    int // HISTORY lines applied
}

// served is the oracle's answer: the current vintage with the writes
// after the checkpoint over it, in log order.
func (o *oracle) served() content {
	out := o.vintages[o.current].clone()
	for _, w := range o.writes {
		if w.pos > o.checkpoint {
			for _, r := range w.rows {
				out[key(r[0].(string), r[1].(string))] = r[2].(float64)
			}
		}
	}
	return out
}

// fold is the content a compaction of the writes through pos over the
// current vintage publishes.
func (o *oracle) fold(pos uint64) content {
	out := o.vintages[o.current].clone()
	for _, w := range o.writes {
		if w.pos > o.checkpoint && w.pos <= pos {
			for _, r := range w.rows {
				out[key(r[0].(string), r[1].(string))] = r[2].(float64)
			}
		}
	}
	return out
}

func key(id, period string) string { return id + "|" + period }

// harness runs one seed's history.
type harness struct {
	t       *testing.T
	rng     *rand.Rand
	tmp     string
	root    string
	dir     string
	lakes   [2]string
	lakeC   [2]content
	srv     *server
	replica *server
	o       *oracle
	n       counts
	value   float64 // the next value written: every value is distinct
}

func newHarness(t *testing.T, seed uint64) *harness {
	tmp := t.TempDir()
	h := &harness{t: t, rng: rand.New(rand.NewPCG(seed, 7)), tmp: tmp, root: filepath.Join(tmp, "root"),
		o: &oracle{vintages: map[uint64]content{}}, value: 1}
	h.dir = filepath.Join(h.root, dsName)
	// Two lakes: different series, periods and values.
	for i := range h.lakes {
		h.lakes[i], h.lakeC[i] = h.writeLake(i)
	}
	h.build(0, false, false)
	h.srv = h.start(false)
	h.replica = h.start(true)
	h.sync()
	return h
}

func (h *harness) close() {
	if h.replica != nil {
		h.replica.stop(syscall.SIGTERM)
	}
	if h.srv != nil {
		h.srv.stop(syscall.SIGTERM)
	}
}

// series and periods the test writes: some in both lakes, some in one,
// some in neither (new series, which need their attributes).
func seriesIDs() []string {
	var out []string
	for i := 0; i < 16; i++ {
		out = append(out, fmt.Sprintf("S%02d", i))
	}
	return out
}

func periods() []string {
	var out []string
	for m := 1; m <= 9; m++ {
		out = append(out, fmt.Sprintf("2020-%02d-01", m))
	}
	return out
}

func unitsOf(id string) string    { return "u" + id[1:] }
func categoryOf(id string) string { return []string{"Crude", "Gas", "Power"}[int(id[2]-'0')%3] }

func (h *harness) writeLake(i int) (string, content) {
	dir := filepath.Join(h.tmp, fmt.Sprintf("lake-%d", i))
	c := content{}
	var ids, ps, units, cats []any
	var vals []any
	for s, id := range seriesIDs()[i*4 : i*4+10] {
		for p, period := range periods()[:4+i] {
			v := float64(1000*(i+1) + 10*s + p)
			ids, ps, vals = append(ids, id), append(ps, period[:7]), append(vals, v)
			units, cats = append(units, unitsOf(id)), append(cats, categoryOf(id))
			c[key(id, period)] = v
		}
	}
	testlake.WriteParquet(h.t, dir, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids},
		testlake.Col{Name: "period", Vals: ps},
		testlake.Col{Name: "value", Vals: vals, Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "units", Vals: units},
		testlake.Col{Name: "category", Vals: cats})
	return dir, c
}

// step runs one random operation and checks what is served after it.
func (h *harness) step(i int) {
	h.n.steps++
	op := h.pick()
	h.t.Logf("step %d: %s", i, op)
	switch op {
	case "put":
		h.put()
	case "compact":
		h.compact()
	case "build":
		h.build(h.rng.IntN(2), false, h.rng.IntN(4) == 0)
	case "stage":
		h.build(h.rng.IntN(2), true, h.rng.IntN(4) == 0)
	case "publish":
		h.publish()
	case "rollback":
		h.rollback()
	case "gc":
		h.gc()
	case "discard":
		h.discard()
	case "restart":
		h.restart(false)
	case "kill":
		h.restart(true)
	case "handover":
		h.handover()
	case "contend":
		h.contend()
	}
	h.sync()
}

// pick draws the next operation: writes most often, so the delta is
// rarely empty when something else happens.
func (h *harness) pick() string {
	ops := []struct {
		name   string
		weight int
	}{
		{"put", 40}, {"compact", 8}, {"build", 6}, {"stage", 3}, {"publish", 3}, {"rollback", 6},
		{"gc", 4}, {"discard", 2}, {"restart", 4}, {"kill", 4}, {"handover", 2}, {"contend", 5},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	r := h.rng.IntN(total)
	for _, o := range ops {
		if r < o.weight {
			return o.name
		}
		r -= o.weight
	}
	return "put"
}

func (h *harness) put() {
	n := 1 + h.rng.IntN(6)
	var rows [][3]any
	ids := seriesIDs()
	ps := periods()
	seen := map[string]bool{}
	for len(rows) < n {
		id, p := ids[h.rng.IntN(len(ids))], ps[h.rng.IntN(len(ps))]
		if seen[key(id, p)] {
			continue
		}
		seen[key(id, p)] = true
		rows = append(rows, [3]any{id, p, h.value})
		h.value++
	}
	pos, err := h.srv.put(rows)
	if err != nil {
		h.t.Fatalf("put: %v", err)
	}
	h.o.writes = append(h.o.writes, write{pos: pos, rows: rows})
	h.n.puts++
	h.n.rows += len(rows)
}

func (h *harness) compact() {
	res, err := h.srv.action("compact", dsName)
	if err != nil {
		h.t.Fatalf("compact: %v", err)
	}
	h.n.compactions++
	h.t.Logf("  %s", res)
}

// build builds lake i (staged with --no-publish, or superseding the live
// writes) and registers what the new vintage holds.
func (h *harness) build(i int, staged, supersede bool) {
	args := []string{"build", "--input", h.lakes[i], "--out", h.dir, "--json", "--max-change", "0"}
	if staged {
		args = append(args, "--no-publish")
	}
	if supersede {
		args = append(args, "--supersede-writes")
		h.n.supersedes++
	}
	out := h.snapbuild(args...)
	var sum struct {
		SnapshotID uint64 `json:"snapshot_id"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.SnapshotID == 0 {
		h.t.Fatalf("build summary %q: %v", out, err)
	}
	h.o.vintages[sum.SnapshotID] = h.lakeC[i].clone()
	if staged {
		h.o.staged = append(h.o.staged, sum.SnapshotID)
	}
	h.n.builds++
}

func (h *harness) publish() {
	cur := h.currentID()
	var cands []uint64
	for _, id := range h.o.staged {
		if id > cur && h.exists(id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return
	}
	id := cands[h.rng.IntN(len(cands))]
	// A background compaction may make CURRENT newer than id meanwhile:
	// publish then refuses, as it must.
	out, err := h.snapbuildErr("publish", h.dir, "--id", fmt.Sprint(id), "--expect-current", fmt.Sprint(cur))
	if err != nil {
		if strings.Contains(out, "CURRENT has moved") || strings.Contains(out, "not newer than CURRENT") {
			h.t.Logf("  publish refused: %s", strings.TrimSpace(out))
			return
		}
		h.t.Fatalf("publish: %v: %s", err, out)
	}
	h.n.publishes++
}

func (h *harness) rollback() {
	cur := h.currentID()
	var cands []uint64
	for id := range h.o.vintages {
		if id != cur && h.exists(id) && !slices.Contains(h.o.staged, id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return
	}
	slices.Sort(cands)
	id := cands[h.rng.IntN(len(cands))]
	// The operator saw cur; a compaction may have moved CURRENT since.
	out, err := h.snapbuildErr("rollback", h.dir, "--to", fmt.Sprint(id), "--expect-current", fmt.Sprint(cur))
	if err != nil {
		if strings.Contains(out, "CURRENT has moved") {
			h.t.Logf("  rollback refused: %s", strings.TrimSpace(out))
			return
		}
		h.t.Fatalf("rollback: %v: %s", err, out)
	}
	h.n.rollbacks++
}

func (h *harness) gc() {
	h.snapbuild("gc", h.dir, "--keep", fmt.Sprint(h.rng.IntN(3)))
	h.n.gcs++
}

func (h *harness) discard() {
	res, err := h.srv.action("discard", dsName+"\nlifecycle test")
	if err != nil {
		h.t.Fatalf("discard: %v", err)
	}
	h.n.discards++
	h.t.Logf("  %s", res)
}

// restart stops the writer (gracefully, or kill -9) and starts it again;
// what it serves must not change.
func (h *harness) restart(kill bool) {
	before := h.fetch(h.srv)
	if kill {
		h.srv.stop(syscall.SIGKILL)
		h.n.kills++
	} else {
		h.srv.stop(syscall.SIGTERM)
		h.n.restarts++
	}
	h.srv = h.start(false)
	h.finishCrashed()
	h.learn()
	if after := h.fetch(h.srv); !equal(before, after) {
		h.n.mismatches++
		h.t.Fatalf("a restart changed the answer:\nbefore %v\nafter  %v", sorted(before), sorted(after))
	}
}

// handover starts a new writer before stopping the old one (a
// start-before-stop restart): the new one follows in standby and takes
// the writes over once the old one is gone.
func (h *harness) handover() {
	if len(h.o.writes) == 0 {
		h.put() // a log for the new server to find held
	}
	next := h.start(false)
	if got := next.writes(h.t); got != "standby" {
		h.t.Fatalf("a second writer on the root: writes %q, want standby", got)
	}
	old := h.srv
	old.stop(syscall.SIGTERM)
	h.srv = next
	deadline := time.Now().Add(20 * time.Second)
	for next.writes(h.t) != "writer" {
		if time.Now().After(deadline) {
			h.t.Fatalf("the new server did not take the writes over: %s", next.writes(h.t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.n.handovers++
}

// contend moves CURRENT while a compaction waits to publish: the test
// holds the dataset's lock (as a long build does), has the server compact
// (it freezes the delta over CURRENT, then waits for the lock), rolls back
// or publishes a staged vintage under the held lock, and lets go. The
// compaction must not publish over a snapshot it did not read.
func (h *harness) contend() {
	if st := h.srv.status(h.t); st.Delta == nil || st.Delta.Rows == 0 {
		h.put()
	}
	ds, err := dataset.Open(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	w, err := ds.LockForWrite()
	if err != nil {
		h.t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		res, err := h.srv.action("compact", dsName)
		if err != nil {
			res = "error: " + err.Error()
		}
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.srv.status(h.t)
		if st.Delta != nil && st.Delta.FrozenRuns > 0 {
			break
		}
		if time.Now().After(deadline) {
			w.Close()
			h.t.Fatalf("the compaction did not freeze: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	cur, _ := ds.CurrentID()
	var staged []uint64
	for _, id := range h.o.staged {
		if id > cur && h.exists(id) {
			staged = append(staged, id)
		}
	}
	var cands []uint64
	for id := range h.o.vintages {
		if id != cur && h.exists(id) && !slices.Contains(h.o.staged, id) {
			cands = append(cands, id)
		}
	}
	slices.Sort(cands)
	switch {
	case len(staged) > 0 && h.rng.IntN(2) == 0:
		if _, err := w.PublishInstalled(staged[0], dataset.Change{Tool: "lifecycle", Expect: cur}); err != nil {
			h.t.Fatal(err)
		}
		h.n.publishes++
	case len(cands) > 0:
		if _, err := w.Rollback(cands[h.rng.IntN(len(cands))], dataset.Change{Tool: "lifecycle", Expect: cur}); err != nil {
			h.t.Fatal(err)
		}
		h.n.rollbacks++
	}
	w.Close()
	res := <-done
	if strings.HasPrefix(res, "error") {
		h.t.Fatalf("compaction under contention: %s", res)
	}
	h.n.compactions++
	h.n.contended++
	h.t.Logf("  %s", res)
}

// finishCrashed takes the dataset's lock once, as the next writer would
// (a dry-run gc): a change a crash interrupted between its flip and its
// HISTORY line gets the line.
func (h *harness) finishCrashed() {
	h.snapbuild("gc", h.dir, "--keep", "1000", "--dry-run")
}

// sync brings the oracle up to date (HISTORY), has the servers serve
// CURRENT, and compares what they serve with what must be.
func (h *harness) sync() {
	if _, err := h.srv.action("reload", dsName); err != nil {
		h.t.Fatalf("reload: %v", err)
	}
	h.learn()
	want := h.o.served()
	got := h.fetch(h.srv)
	h.n.compares++
	if !equal(got, want) {
		h.n.mismatches++
		h.t.Fatalf("the writer serves what it must not (CURRENT %d, checkpoint %d):\n%s", h.o.current, h.o.checkpoint, diff(got, want))
	}
	// The replica follows: once it has applied the writer's position, it
	// answers the same.
	h.replicaCaughtUp()
	h.learn()
	want = h.o.served()
	if got := h.fetch(h.replica); !equal(got, want) {
		h.n.mismatches++
		h.t.Fatalf("the replica serves what it must not (CURRENT %d):\n%s", h.o.current, diff(got, want))
	}
	h.n.replicaCompares++
}

// replicaCaughtUp waits until the replica serves the writer's snapshot,
// checkpoint and log position.
func (h *harness) replicaCaughtUp() {
	deadline := time.Now().Add(20 * time.Second)
	for {
		w, r := h.srv.status(h.t), h.replica.status(h.t)
		if w.SnapshotID == r.SnapshotID && w.pos() == r.pos() && w.folded() == r.folded() {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the replica did not catch up: writer %+v, replica %+v", w, r)
		}
		if _, err := h.replica.action("reload", dsName); err != nil {
			h.t.Fatalf("replica reload: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// learn applies the HISTORY lines written since the last call: the
// changes the test made and those the server made by itself. A change's
// line follows its flip of CURRENT: when they disagree, a background
// compaction is between the two, and learn reads HISTORY again.
func (h *harness) learn() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.learnOnce()
		cur := h.currentID()
		if cur == h.o.current {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("CURRENT names %d, HISTORY says %d", cur, h.o.current)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) learnOnce() {
	ds, err := dataset.Open(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	flips, err := ds.Flips()
	if err != nil {
		h.t.Fatal(err)
	}
	o := h.o
	for _, f := range flips[o.history:] {
		switch f.Action {
		case dataset.ActionCompaction:
			if f.From != o.current {
				h.n.mismatches++
				h.t.Fatalf("a compaction published over snapshot %d, the oracle's CURRENT is %d: %+v", f.From, o.current, f)
			}
			o.vintages[f.To] = o.fold(f.WALPosition)
			h.n.published++
		case dataset.ActionBuild, dataset.ActionPublish, dataset.ActionRollback:
			if _, ok := o.vintages[f.To]; !ok {
				h.t.Fatalf("HISTORY moves CURRENT to snapshot %d, which the oracle does not know: %+v", f.To, f)
			}
			o.staged = slices.DeleteFunc(o.staged, func(id uint64) bool { return id == f.To })
		case dataset.ActionDiscard:
		default:
			h.t.Fatalf("HISTORY line of unknown kind: %+v", f)
		}
		if f.Action != dataset.ActionDiscard {
			o.current = f.To
		}
		if f.WALPosition > o.checkpoint {
			o.checkpoint = f.WALPosition
		}
		o.history++
	}
}

func (h *harness) currentID() uint64 {
	ds, _ := dataset.Open(h.dir)
	id, err := ds.CurrentID()
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

func (h *harness) exists(id uint64) bool {
	_, err := os.Stat(filepath.Join(h.dir, dataset.ManifestPath(id)))
	return err == nil
}

func (h *harness) snapbuild(args ...string) string {
	out, err := h.snapbuildErr(args...)
	if err != nil {
		h.t.Fatalf("snapbuild %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// snapbuildErr runs snapbuild: its standard output, or on failure its
// standard error too.
func (h *harness) snapbuildErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(bin, "snapbuild"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

func (h *harness) fetch(s *server) content {
	c, err := s.all()
	if err != nil {
		h.t.Fatalf("DoGet: %v", err)
	}
	return c
}

func (h *harness) start(readOnly bool) *server {
	args := []string{"--root", h.root, "--addr", "127.0.0.1:0", "--reload-interval", "50ms", "--log-level", "warn",
		"--compact-rows", "25", "--follow-interval", "5ms", "--shutdown-timeout", "2s"}
	if readOnly {
		args = append(args, "--read-only")
	}
	s, err := startServer(filepath.Join(bin, "snapserve"), args)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func equal(a, b content) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sorted(c content) []string {
	var out []string
	for k, v := range c {
		out = append(out, fmt.Sprintf("%s=%g", k, v))
	}
	sort.Strings(out)
	return out
}

func diff(got, want content) string {
	var out []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			out = append(out, fmt.Sprintf("  missing %s = %g", k, v))
		} else if g != v {
			out = append(out, fmt.Sprintf("  %s = %g, want %g", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("  extra %s = %g", k, v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// server is a snapserve process and a Flight client of it.
type server struct {
	cmd    *exec.Cmd
	client flight.Client
	stderr *os.File
}

func startServer(path string, args []string) (*server, error) {
	cmd := exec.Command(path, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errf, err := os.CreateTemp("", "snapserve-stderr-")
	if err != nil {
		return nil, err
	}
	cmd.Stderr = errf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		b, _ := os.ReadFile(errf.Name())
		return nil, fmt.Errorf("snapserve did not start: %v\n%s", err, b)
	}
	var ready struct{ Flight string }
	if err := json.Unmarshal([]byte(line), &ready); err != nil {
		return nil, fmt.Errorf("snapserve's first line %q: %v", line, err)
	}
	c, err := flight.NewClientWithMiddleware(strings.TrimPrefix(ready.Flight, "grpc+tcp://"), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &server{cmd: cmd, client: c, stderr: errf}, nil
}

func (s *server) stop(sig syscall.Signal) {
	s.client.Close()
	s.cmd.Process.Signal(sig)
	s.cmd.Wait()
	s.stderr.Close()
	os.Remove(s.stderr.Name())
}

func (s *server) action(kind, body string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.client.DoAction(ctx, &flight.Action{Type: kind, Body: []byte(body)})
	if err != nil {
		return "", err
	}
	r, err := res.Recv()
	if err != nil {
		return "", err
	}
	return string(r.Body), nil
}

// dsStatus is the part of a dataset's status the harness reads.
type dsStatus struct {
	SnapshotID uint64 `json:"snapshot_id"`
	Writes     string `json:"writes"`
	Delta      *struct {
		Rows        int64  `json:"rows"`
		FrozenRuns  int    `json:"frozen_runs"`
		WALPosition string `json:"wal_position"`
		WALFolded   string `json:"wal_folded"`
	} `json:"delta"`
}

// pos and folded are where the dataset's delta is applied through and
// the checkpoint it lies after ("00000000:0": no log yet).
func (d dsStatus) pos() string {
	if d.Delta == nil {
		return "00000000:0"
	}
	return d.Delta.WALPosition
}

func (d dsStatus) folded() string {
	if d.Delta == nil {
		return "00000000:0"
	}
	return d.Delta.WALFolded
}

func (s *server) status(t *testing.T) dsStatus {
	body, err := s.action("status", "")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var st struct{ Datasets []dsStatus }
	if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Datasets) != 1 {
		t.Fatalf("status %s: %v", body, err)
	}
	return st.Datasets[0]
}

func (s *server) writes(t *testing.T) string { return s.status(t).Writes }

// put writes rows (id, period, value) in one batch, with the series'
// attributes, and returns the acknowledged log position.
func (s *server) put(rows [][3]any) (uint64, error) {
	mem := memory.DefaultAllocator
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
		{Name: "units", Type: arrow.BinaryTypes.String},
		{Name: "category", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for _, r := range rows {
		id := r[0].(string)
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(r[1].(string))
		b.Field(2).(*array.Float64Builder).Append(r[2].(float64))
		b.Field(3).(*array.StringBuilder).Append(unitsOf(id))
		b.Field(4).(*array.StringBuilder).Append(categoryOf(id))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := s.client.DoPut(ctx)
	if err != nil {
		return 0, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{dsName}})
	if err := w.Write(rec); err != nil {
		return 0, err
	}
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	res, err := stream.Recv()
	if err != nil {
		return 0, err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	var ack struct {
		WALPosition uint64 `json:"wal_position"`
	}
	if err := json.Unmarshal(res.AppMetadata, &ack); err != nil {
		return 0, err
	}
	return ack.WALPosition, nil
}

// all fetches every row the server serves.
func (s *server) all() (content, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := s.client.DoGet(ctx, &flight.Ticket{Ticket: []byte(`{"dataset":"` + dsName + `","prefix":""}`)})
	if err != nil {
		return nil, err
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	out := content{}
	for rd.Next() {
		rec := rd.RecordBatch()
		ps := rec.Column(1).(*array.Date32)
		vs := rec.Column(2).(*array.Float64)
		for i := 0; i < int(rec.NumRows()); i++ {
			out[key(idAt(rec.Column(0), i), ps.Value(i).FormattedString())] = vs.Value(i)
		}
	}
	return out, rd.Err()
}

// idAt is row i's series id: a string column, or a dictionary of them.
func idAt(col arrow.Array, i int) string {
	if d, ok := col.(*array.Dictionary); ok {
		return d.Dictionary().(*array.String).Value(d.GetValueIndex(i))
	}
	return col.(*array.String).Value(i)
}
