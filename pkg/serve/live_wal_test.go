package serve

// Torn tails and corruption of the WAL as a server start-up meets them: a
// torn last write of the newest segment is cut with a warning and
// everything acknowledged is served; damage anywhere else refuses to start
// with an error naming the segment and the offset.

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// walWrites are three DoPuts on dataset LIVE of liveRoot, one record each,
// and the rows the dataset serves after them.
var walWrites = []putRows{
	{"series_id": {"A"}, "period": {"2020-02"}, "value": {20.0}},
	{"series_id": {"B", "B"}, "period": {"2020-03", "2020-04"}, "value": {12.0, 13.0}},
	{"series_id": {"C"}, "period": {"2020-01"}, "value": {100.0}, "units": {"w"}},
}

const walWritesRows = "A 2020-01-01 1\nA 2020-02-01 20\nA 2020-03-01 3\nB 2020-01-01 10\nB 2020-02-01 11\nB 2020-03-01 12\nB 2020-04-01 13\nC 2020-01-01 100"

// writeThrough runs a server on root, sends walWrites, stops it cleanly
// and returns the acknowledged positions.
func writeThrough(t *testing.T, root string) []wal.Position {
	t.Helper()
	srv := startServer(t, Config{Root: root})
	c := dial(t, srv)
	var pos []wal.Position
	for _, w := range walWrites {
		acks, err := doPut(context.Background(), c, "LIVE", w.record(t))
		if err != nil || len(acks) != 1 {
			t.Fatalf("put: %v %v", acks, err)
		}
		pos = append(pos, wal.PositionFromUint64(acks[0]["wal_position"]))
	}
	srv.svc.Close()
	return pos
}

// startLogged runs a server on root whose log the test reads.
func startLogged(t *testing.T, root string) (*Server, *logRecorder, error) {
	t.Helper()
	logs := &logRecorder{}
	srv, err := New(Config{Root: root, Addr: "127.0.0.1:0", Options: Options{Limits: DefaultLimits, Logger: slog.New(recHandler{r: logs})}})
	if err != nil {
		return nil, logs, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, logs, nil
}

func segmentPath(root string, n uint32) string {
	return filepath.Join(root, "LIVE", WALDir, fmt.Sprintf("%08d.wal", n))
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLiveStartupTornTail(t *testing.T) {
	// Each tail is what a crash can leave of a write that was never
	// acknowledged, after the three that were.
	tails := []struct {
		name string
		tail func(last []byte) []byte // last: the bytes of the newest acknowledged record
	}{
		{"half a record", func(last []byte) []byte { return last[:len(last)/2] }},
		{"a header without its payload", func(last []byte) []byte { return last[:16] }},
		{"a few bytes of a header", func(last []byte) []byte { return last[:5] }},
		{"zeroed space", func([]byte) []byte { return make([]byte, 4096) }},
		{"garbage", func([]byte) []byte { return []byte("\x13\x37 not a record, never synced") }},
		{"a record with a bad checksum", func(last []byte) []byte {
			b := append([]byte(nil), last...)
			b[len(b)-1] ^= 1
			return b
		}},
	}
	for _, tc := range tails {
		t.Run(tc.name, func(t *testing.T) {
			root := liveRoot(t)
			pos := writeThrough(t, root)
			seg := segmentPath(root, 1)
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			end := pos[2]
			if end.Segment != 1 || int64(end.Offset) != int64(len(b)) {
				t.Fatalf("acked through %v, segment 1 holds %d bytes", end, len(b))
			}
			tail := tc.tail(b[pos[1].Offset:end.Offset])
			appendFile(t, seg, tail)

			srv, logs, err := startLogged(t, root)
			if err != nil {
				t.Fatalf("start-up refused a torn tail: %v", err)
			}
			var warned bool
			for _, r := range logs.take() {
				if r.msg == "wal: torn tail cut" {
					warned = r.level == slog.LevelWarn && r.attrs["segment"] == "1" &&
						r.attrs["offset"] == fmt.Sprint(end.Offset) && r.attrs["bytes"] == fmt.Sprint(len(tail))
					if !warned {
						t.Errorf("warning %v, want segment 1 offset %d bytes %d", r.attrs, end.Offset, len(tail))
					}
				}
			}
			if !warned {
				t.Error("no warning about the torn tail")
			}
			c := dial(t, srv)
			all := map[string]any{"dataset": "LIVE", "prefix": ""}
			if got := rowsOf(t, c, all); got != walWritesRows {
				t.Fatalf("after the cut:\n%s\nwant:\n%s", got, walWritesRows)
			}
			// Writes go on after the last intact record, and the next
			// start-up finds nothing to cut.
			acks, err := doPut(context.Background(), c, "LIVE", putRows{"series_id": {"A"}, "period": {"2020-04"}, "value": {4.0}}.record(t))
			if err != nil || len(acks) != 1 || acks[0]["wal_position"] <= end.Uint64() {
				t.Fatalf("put after the cut: %v %v", acks, err)
			}
			srv.svc.Close()
			srv2, logs2, err := startLogged(t, root)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range logs2.take() {
				if r.level >= slog.LevelWarn {
					t.Errorf("second start-up: %s %v", r.msg, r.attrs)
				}
			}
			want := strings.Replace(walWritesRows, "A 2020-03-01 3", "A 2020-03-01 3\nA 2020-04-01 4", 1)
			if got := rowsOf(t, dial(t, srv2), all); got != want {
				t.Fatalf("after restart:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestLiveStartupCorruptNewestSegment: a flipped byte in a record followed
// by a later write cannot be a torn tail (that write had been synced
// before the next began): start-up refuses, naming segment and offset.
func TestLiveStartupCorruptNewestSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(pos []wal.Position) (rec int64, flip int64) // the damaged record's offset, the byte flipped
	}{
		// a segment's first record starts at 40, after its header (16)
		// and its link record (24)
		{"first record's payload", func(pos []wal.Position) (int64, int64) { return 40, 40 + 16 + 5 }},
		{"the segment's link record", func(pos []wal.Position) (int64, int64) { return 16, 16 + 16 + 3 }},
		{"middle record's payload", func(pos []wal.Position) (int64, int64) {
			return int64(pos[0].Offset), int64(pos[0].Offset) + 16 + 40
		}},
		{"middle record's header", func(pos []wal.Position) (int64, int64) {
			return int64(pos[0].Offset), int64(pos[0].Offset) + 1 // its length
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := liveRoot(t)
			pos := writeThrough(t, root)
			rec, off := tc.at(pos)
			flipByte(t, segmentPath(root, 1), off)
			want := fmt.Sprintf("%s offset %d: corrupt", filepath.Join(WALDir, "00000001.wal"), rec)
			walFailing(t, root, want)
		})
	}
}

// nopTarget is a dataset that serves nothing: the test writes a log
// through pkg/live alone, with small segments.
type nopTarget struct{ base livedelta.Base }

func (t nopTarget) Base() livedelta.Base   { return t.base }
func (nopTarget) Publish(*livedelta.State) {}

// TestLiveStartupCorruptOlderSegment: damage in a segment before the
// newest, even in its last record, refuses start-up, naming the segment
// and the offset; the records before the damage are not served partially.
func TestLiveStartupCorruptOlderSegment(t *testing.T) {
	root := liveRoot(t)
	srv := startServer(t, Config{Root: root})
	v := acquireView(srv.svc.datasets["LIVE"])
	fields, _ := v.Snapshot().Index().Attributes()
	s, err := livedelta.NewSchema(v.Snapshot().Schema(), fields)
	if err != nil {
		t.Fatal(err)
	}
	known, _ := v.Reader().(livedelta.Known)
	base := v.Base()
	// The log's segments hold about two records each.
	w, _, err := live.Open(filepath.Join(root, "LIVE", WALDir), s, 0, nopTarget{base}, live.Options{WAL: wal.Options{SegmentSize: 2000}})
	if err != nil {
		t.Fatal(err)
	}
	var pos []wal.Position
	for i := 0; i < 6; i++ {
		rec := putRows{"series_id": {"A"}, "period": {fmt.Sprintf("2021-%02d", i+1)}, "value": {float64(i)}}.record(t)
		norm, err := livedelta.Normalize(context.Background(), memory.DefaultAllocator, s, rec, 0, known)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := w.Put(context.Background(), norm)
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, wal.PositionFromUint64(ack.WALPosition))
	}
	v.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	srv.svc.Close()
	if pos[len(pos)-1].Segment < 3 {
		t.Fatalf("positions %v: want at least 3 segments", pos)
	}
	// The last record of segment 1.
	last := int64(-1)
	for i, p := range pos {
		start := int64(16)
		if i > 0 && pos[i-1].Segment == p.Segment {
			start = int64(pos[i-1].Offset)
		}
		if p.Segment == 1 {
			last = start
		}
	}
	if last < 0 {
		t.Fatalf("positions %v: nothing in segment 1", pos)
	}
	seg1 := segmentPath(root, 1)
	b, err := os.ReadFile(seg1)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint32(b[last:]); last+16+int64(n) != int64(len(b)) {
		t.Fatalf("record at %d of length %d does not end segment 1 (%d bytes)", last, n, len(b))
	}
	flipByte(t, seg1, int64(len(b))-3)

	want := fmt.Sprintf("%s offset %d: corrupt", filepath.Join(WALDir, "00000001.wal"), last)
	walFailing(t, root, want)
}

// walFailing starts a server on root, whose dataset LIVE's log is damaged
// (want: what the error names), and checks the damage stays inside the
// dataset: the server starts, LIVE serves its snapshot alone (none of the
// log's records, not a partial replay), shows writes failing with the
// reason in status and /metrics, and refuses writes with Unavailable.
func walFailing(t *testing.T, root, want string) {
	t.Helper()
	srv, _, err := startLogged(t, root)
	if err != nil {
		t.Fatalf("a damaged log kept the server from starting: %v", err)
	}
	st := srv.svc.Status().Datasets[0]
	if st.Name != "LIVE" || st.Writes != "failing" || !strings.Contains(st.WritesReason, want) || !strings.Contains(st.WritesReason, "LIVE") {
		t.Fatalf("status: writes %q, reason %q; want failing naming LIVE and %q", st.Writes, st.WritesReason, want)
	}
	if st.Delta != nil {
		t.Errorf("a failing log's delta is served: %+v", st.Delta)
	}
	if st.Rows != 5 {
		t.Errorf("serving %d rows, want the snapshot's 5 alone", st.Rows)
	}
	c := dial(t, srv)
	_, err = doPut(context.Background(), c, "LIVE", putRows{"series_id": {"A"}, "period": {"2030-01"}, "value": {1.0}}.record(t))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("DoPut on a failing log: %v, want Unavailable naming the damage", err)
	}
	if got := counterValue(t, srv.Metrics(), "servingsnap_wal_failing", "LIVE"); got != 1 {
		t.Errorf("servingsnap_wal_failing = %v, want 1", got)
	}
}
