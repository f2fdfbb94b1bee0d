package serve

// The commands of the live-write scripts (live_golden_test.go) that move
// CURRENT or the live writes' checkpoint, and a read-only replica: the
// races of docs/OPERATIONS.md "One truth for a dataset".

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/energyscope/servingsnap/internal/datadriven"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// timestamps are RFC 3339 times in messages, which scripts print as TIME.
var timestamps = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+Z`)

// replicaState is the script's read-only server, when started.
type replicaState struct {
	srv    *Server
	cancel context.CancelFunc
	done   chan error
	client flight.Client
}

// on splits a directive's on=replica argument off: the client to ask and
// the directive without it.
func (s *liveScript) on(d *datadriven.Directive) (flight.Client, *datadriven.Directive) {
	vals, ok := d.Arg("on")
	if !ok {
		return s.client, d
	}
	if len(vals) != 1 || vals[0] != "replica" || s.replica == nil {
		s.t.Fatalf("%s: on=replica needs a started replica", d.Pos)
	}
	rest := *d
	rest.Args = nil
	for _, a := range d.Args {
		if a.Key != "on" {
			rest.Args = append(rest.Args, a)
		}
	}
	return s.replica.client, &rest
}

// writer returns the script's held lock, or a fresh one (and whether the
// caller closes it).
func (s *liveScript) writer() (*dsdir.Writer, bool, error) {
	if s.lock != nil {
		return s.lock, false, nil
	}
	ds, err := dsdir.Open(s.dir)
	if err != nil {
		return nil, false, err
	}
	w, err := ds.LockForWrite()
	return w, true, err
}

// flip is "publish N" and "rollback N [expect=M]".
func (s *liveScript) flip(d *datadriven.Directive) string {
	if len(d.Args) == 0 {
		s.t.Fatalf("%s: %s N [expect=M]", d.Pos, d.Cmd)
	}
	id, err := strconv.ParseUint(d.Args[0].Key, 10, 64)
	if err != nil {
		s.t.Fatalf("%s: %s N: %v", d.Pos, d.Cmd, err)
	}
	c := dsdir.Change{Tool: "script"}
	if v, ok := d.Arg("expect"); ok {
		c.Expect, _ = strconv.ParseUint(v[0], 10, 64)
	}
	w, own, err := s.writer()
	if err != nil {
		return "error: " + s.clean(err.Error())
	}
	if own {
		defer w.Close()
	}
	var from uint64
	if d.Cmd == "publish" {
		from, err = w.PublishInstalled(id, c)
	} else {
		from, err = w.Rollback(id, c)
	}
	if err != nil {
		return "error: " + timestamps.ReplaceAllString(s.clean(err.Error()), "TIME")
	}
	return fmt.Sprintf("CURRENT %d -> %d", from, id)
}

func (s *liveScript) gc(d *datadriven.Directive) string {
	v, ok := d.Arg("keep")
	if !ok {
		s.t.Fatalf("%s: gc keep=K", d.Pos)
	}
	keep, _ := strconv.Atoi(v[0])
	w, own, err := s.writer()
	if err != nil {
		return "error: " + s.clean(err.Error())
	}
	if own {
		defer w.Close()
	}
	res, err := w.GC(keep, false)
	if err != nil {
		return "error: " + s.clean(err.Error())
	}
	return fmt.Sprintf("removed %v, kept %v, in use %v", res.Removed, res.Kept, res.InUse)
}

// history prints HISTORY, one change a line.
func (s *liveScript) history() string {
	ds, err := dsdir.Open(s.dir)
	if err != nil {
		return "error: " + err.Error()
	}
	flips, err := ds.Flips()
	if err != nil {
		return "error: " + err.Error()
	}
	var out []string
	for _, f := range flips {
		l := fmt.Sprintf("%s %d -> %d", f.Action, f.From, f.To)
		if f.WALPosition != 0 {
			l += " checkpoint " + s.label(f.WALPosition)
		}
		if f.Rows != 0 {
			l += fmt.Sprintf(" (%d rows)", f.Rows)
		}
		if f.Recovered {
			l += " recovered"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func (s *liveScript) discard(d *datadriven.Directive) string {
	reason := ""
	if len(d.Args) > 0 {
		reason = d.Args[0].Key
	}
	body, err := runAction(context.Background(), s.client, "discard", scriptDataset+"\n"+reason)
	if err != nil {
		return errText(err)
	}
	var res struct{ Datasets []DiscardResult }
	if err := json.Unmarshal(body, &res); err != nil {
		return err.Error()
	}
	r := res.Datasets[0]
	if r.Result != "discarded" {
		return fmt.Sprintf("%s: snapshot %d", r.Result, r.SnapshotID)
	}
	return fmt.Sprintf("discarded %d rows through %s; snapshot %d", r.Rows, s.label(r.WALPosition), r.SnapshotID)
}

// replicaCmd is "replica start|stop|sync".
func (s *liveScript) replicaCmd(d *datadriven.Directive) string {
	if len(d.Args) != 1 {
		s.t.Fatalf("%s: replica start|stop|sync", d.Pos)
	}
	switch d.Args[0].Key {
	case "start":
		srv, err := New(Config{Root: s.root, Addr: "127.0.0.1:0", Options: Options{Limits: DefaultLimits, ReadOnly: true,
			FollowInterval: time.Millisecond, ReloadInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			return "error: " + s.clean(err.Error())
		}
		c, err := flight.NewClientWithMiddleware(srv.FlightAddr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			s.t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &replicaState{srv: srv, cancel: cancel, client: c, done: make(chan error, 1)}
		go func() { r.done <- srv.Serve(ctx) }()
		s.replica = r
		return "replica started (read-only)"
	case "stop":
		s.stopReplica()
		return "replica stopped"
	case "sync":
		return s.syncReplica()
	}
	s.t.Fatalf("%s: replica start|stop|sync", d.Pos)
	return ""
}

func (s *liveScript) stopReplica() {
	if r := s.replica; r != nil {
		r.client.Close()
		r.cancel()
		if err := <-r.done; err != nil {
			s.t.Errorf("replica Serve: %v", err)
		}
		s.replica = nil
	}
}

// syncReplica waits until the replica serves the writer's snapshot and
// has applied its last write.
func (s *liveScript) syncReplica() string {
	if s.replica == nil {
		return "no replica"
	}
	want := s.srv.svc.Status().Datasets[0]
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got := s.replica.srv.svc.Status().Datasets[0]
		if got.SnapshotID == want.SnapshotID && deltaPos(got.Delta) == deltaPos(want.Delta) && deltaFolded(got.Delta) == deltaFolded(want.Delta) {
			return fmt.Sprintf("replica serves snapshot %d, applied through %s", got.SnapshotID, s.labelOf(deltaPos(got.Delta)))
		}
		time.Sleep(2 * time.Millisecond)
	}
	got := s.replica.srv.svc.Status().Datasets[0]
	return fmt.Sprintf("replica did not catch up: it serves %d (delta %+v), the writer %d (delta %+v)", got.SnapshotID, got.Delta, want.SnapshotID, want.Delta)
}

func deltaPos(d *DeltaStatus) string {
	if d == nil {
		return ""
	}
	return d.WALPosition
}

func deltaFolded(d *DeltaStatus) string {
	if d == nil {
		return ""
	}
	return d.WALFolded
}

// labelOf labels a position given as segment:offset.
func (s *liveScript) labelOf(p string) string {
	if p == "" {
		return "nothing"
	}
	return s.label(parsePosition(p))
}

// parsePosition reads a position written as segment:offset (0 if it is
// not one).
func parsePosition(p string) uint64 {
	seg, off, ok := strings.Cut(p, ":")
	if !ok {
		return 0
	}
	a, err1 := strconv.ParseUint(seg, 10, 32)
	b, err2 := strconv.ParseUint(off, 10, 32)
	if err1 != nil || err2 != nil {
		return 0
	}
	return wal.Position{Segment: uint32(a), Offset: uint32(b)}.Uint64()
}
