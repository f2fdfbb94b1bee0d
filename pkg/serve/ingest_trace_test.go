package serve

// A per-batch trace of the ingest benchmarks (-ingest.trace): where a
// slow acknowledgement's time went, from the moment its batch was due at
// the client to the moment the client read its ack, split at the moments
// the server saw it (the message read from gRPC, decoded, checked, taken
// into a commit group, durable, applied, acknowledged). The stage
// histograms say how each stage is distributed; only a trace says which
// stages the slowest batches were slow in, and whether a collection (the
// server's or the client's) was running then.
//
// Both processes stamp wall-clock time (one host, one clock). The client
// names its stream in gRPC metadata (traceStreamKey), so the server's
// records are matched to the client's by (stream, batch).

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/energyscope/servingsnap/pkg/live"
)

var ingestTrace = flag.Bool("ingest.trace", false, "BenchmarkIngestPaced: trace every batch through the client and the server's stages and print where the slowest 1% spent their time")

// traceStreamKey is the gRPC metadata key naming a traced stream.
const traceStreamKey = "x-ingest-trace-stream"

// fileTrace is the helper server's putTrace: it writes a line per event
// to a file (a write per event: ~200 a second at the loads traced).
//
//	R stream msg t
//	A stream batch decoded checked queued taken logged prepared applied acked
//	G t          (a collection of the server's ended)
type fileTrace struct {
	mu sync.Mutex
	f  *os.File
}

func newFileTrace(path string) (*fileTrace, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	t := &fileTrace{f: f}
	watchGC(func(at time.Time) { t.line("G %d\n", at.UnixNano()) })
	return t, nil
}

func (t *fileTrace) line(format string, args ...any) {
	t.mu.Lock()
	fmt.Fprintf(t.f, format, args...)
	t.mu.Unlock()
}

func traceStream(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, traceStreamKey); len(v) == 1 {
		return v[0]
	}
	return "-"
}

func (t *fileTrace) Received(ctx context.Context, msg int, at time.Time) {
	t.line("R %s %d %d\n", traceStream(ctx), msg, at.UnixNano())
}

func (t *fileTrace) Acked(ctx context.Context, batch int, decoded, checked, acked time.Time, st live.Stages) {
	n := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixNano()
	}
	t.line("A %s %d %d %d %d %d %d %d %d %d\n", traceStream(ctx), batch, n(decoded), n(checked),
		n(st.Queued), n(st.Taken), n(st.Logged), n(st.Prepared), n(st.Applied), n(acked))
}

// watchGC calls f after every collection of this process (from a
// finalizer, so f must be quick), until the process ends.
func watchGC(f func(time.Time)) {
	type sentinel struct {
		_ *int
		_ [16]byte // not a tiny allocation
	}
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
			f(time.Now())
			arm()
		})
	}
	arm()
}

// clientTrace is the client's side: when each batch was due, when its
// send began and returned, when its ack was read; and its collections.
type clientTrace struct {
	mu      sync.Mutex
	batches map[[2]int]*tracedBatch // (stream, batch)
	gcs     []int64
}

// tracedBatch is one batch's moments (Unix ns), the client's and the
// server's; 0: not seen.
type tracedBatch struct {
	due, send, sent                                                      int64
	received, decoded, checked, queued, taken, logged, prepared, applied int64
	acked, ack                                                           int64
	// walPosition is its acknowledgement's (its commit group's end)
	walPosition uint64
}

// ackPosition is the wal_position of a PutResult's app_metadata (0 if it
// has none).
func ackPosition(md []byte) uint64 {
	var a struct {
		WALPosition uint64 `json:"wal_position"`
	}
	json.Unmarshal(md, &a)
	return a.WALPosition
}

func newClientTrace() *clientTrace {
	t := &clientTrace{batches: map[[2]int]*tracedBatch{}}
	watchGC(func(at time.Time) {
		t.mu.Lock()
		t.gcs = append(t.gcs, at.UnixNano())
		t.mu.Unlock()
	})
	return t
}

func (t *clientTrace) batch(s, i int) *tracedBatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.batches[[2]int{s, i}]
	if b == nil {
		b = &tracedBatch{}
		t.batches[[2]int{s, i}] = b
	}
	return b
}

// traceContext names stream s for the server's trace.
func traceContext(s int) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), traceStreamKey, strconv.Itoa(s))
}

// join reads the server's trace file into t; it returns the server's
// collections.
func (t *clientTrace) join(r io.Reader) ([]int64, error) {
	var gcs []int64
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		nums := make([]int64, 0, len(f))
		for _, x := range f[1:] {
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				n = -1 // the stream "-": untraced
			}
			nums = append(nums, n)
		}
		switch {
		case f[0] == "G" && len(nums) == 1:
			gcs = append(gcs, nums[0])
		case f[0] == "R" && len(nums) == 3 && nums[0] >= 0 && nums[1] > 0:
			t.batch(int(nums[0]), int(nums[1]-1)).received = nums[2] // message 0 is the schema
		case f[0] == "A" && len(nums) == 10 && nums[0] >= 0:
			b := t.batch(int(nums[0]), int(nums[1]))
			b.decoded, b.checked, b.queued, b.taken = nums[2], nums[3], nums[4], nums[5]
			b.logged, b.prepared, b.applied, b.acked = nums[6], nums[7], nums[8], nums[9]
		case f[0] == "R" || f[0] == "A":
		default:
			return nil, fmt.Errorf("server trace: %q", sc.Text())
		}
	}
	return gcs, sc.Err()
}

// traceSegments are the consecutive parts of a batch's latency, from its
// due time to the client's reading of its ack.
var traceSegments = []struct {
	name     string
	from, to func(*tracedBatch) int64
}{
	{"late", func(b *tracedBatch) int64 { return b.due }, func(b *tracedBatch) int64 { return b.send }},    // the generator's lateness
	{"send", func(b *tracedBatch) int64 { return b.send }, func(b *tracedBatch) int64 { return b.sent }},   // gRPC's Send (flow control)
	{"in", func(b *tracedBatch) int64 { return b.sent }, func(b *tracedBatch) int64 { return b.received }}, // to the server's read of the message
	{"decode", func(b *tracedBatch) int64 { return b.received }, func(b *tracedBatch) int64 { return b.decoded }},
	{"check", func(b *tracedBatch) int64 { return b.decoded }, func(b *tracedBatch) int64 { return b.checked }},
	{"queue", func(b *tracedBatch) int64 { return b.checked }, func(b *tracedBatch) int64 { return b.taken }},
	{"fsync", func(b *tracedBatch) int64 { return b.taken }, func(b *tracedBatch) int64 { return b.logged }},
	{"apply", func(b *tracedBatch) int64 { return b.logged }, func(b *tracedBatch) int64 { return b.applied }},
	{"ack", func(b *tracedBatch) int64 { return b.applied }, func(b *tracedBatch) int64 { return b.acked }},
	{"out", func(b *tracedBatch) int64 { return b.acked }, func(b *tracedBatch) int64 { return b.ack }}, // to the client's read of the ack
}

// report prints, for all batches and for the slowest 1%, each segment's
// median (ms), then the slowest batches one by one with the collections
// that ended while they were in flight.
func (t *clientTrace) report(w io.Writer, serverGCs []int64) {
	var all []*tracedBatch
	for _, b := range t.batches {
		if b.due != 0 && b.ack != 0 && b.acked != 0 && b.received != 0 {
			all = append(all, b)
		}
	}
	if len(all) == 0 {
		fmt.Fprintln(w, "trace: no batch traced end to end")
		return
	}
	slices.SortFunc(all, func(a, b *tracedBatch) int { return int((a.ack - a.due) - (b.ack - b.due)) })
	slow := all[len(all)-max(len(all)/100, 1):]
	ms := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e6, 'f', 2, 64) }
	median := func(bs []*tracedBatch, from, to func(*tracedBatch) int64) int64 {
		d := make([]int64, 0, len(bs))
		for _, b := range bs {
			if from(b) != 0 && to(b) != 0 {
				d = append(d, to(b)-from(b))
			}
		}
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return d[len(d)/2]
	}
	fmt.Fprintf(w, "trace: %d batches traced, %d client GCs, %d server GCs; segment medians (ms)\n", len(all), len(t.gcs), len(serverGCs))
	fmt.Fprintf(w, "%-12s", "")
	for _, s := range traceSegments {
		fmt.Fprintf(w, "%8s", s.name)
	}
	fmt.Fprintf(w, "%8s\n", "total")
	total := struct{ from, to func(*tracedBatch) int64 }{
		func(b *tracedBatch) int64 { return b.due }, func(b *tracedBatch) int64 { return b.ack }}
	for _, row := range []struct {
		name string
		bs   []*tracedBatch
	}{{"all", all}, {"slowest 1%", slow}} {
		fmt.Fprintf(w, "%-12s", row.name)
		for _, s := range traceSegments {
			fmt.Fprintf(w, "%8s", ms(median(row.bs, s.from, s.to)))
		}
		fmt.Fprintf(w, "%8s\n", ms(median(row.bs, total.from, total.to)))
	}
	during := func(gcs []int64, b *tracedBatch) int {
		n := 0
		for _, g := range gcs {
			if g >= b.due && g <= b.ack {
				n++
			}
		}
		return n
	}
	// the WAL segments whose first commit group a batch was in: its
	// fsync created the segment
	firstSeg := map[uint64]uint64{} // segment → the lowest position acknowledged in it
	for _, b := range all {
		seg := b.walPosition >> 32
		if p, ok := firstSeg[seg]; !ok || b.walPosition < p {
			firstSeg[seg] = b.walPosition
		}
	}
	t0 := all[0].due
	for _, b := range all {
		t0 = min(t0, b.due)
	}
	fmt.Fprintln(w, "slowest batches (ms from due; s: due since the run began; GCs ended in flight: client/server; new: its group began a WAL segment)")
	for _, b := range slow[max(len(slow)-20, 0):] {
		fmt.Fprintf(w, "%-12s", ms(b.ack-b.due))
		for _, s := range traceSegments {
			fmt.Fprintf(w, "%8s", ms(s.to(b)-s.from(b)))
		}
		fmt.Fprintf(w, "  s %6.2f  gc %d/%d", float64(b.due-t0)/1e9, during(t.gcs, b), during(serverGCs, b))
		if firstSeg[b.walPosition>>32] == b.walPosition {
			fmt.Fprint(w, "  new")
		}
		fmt.Fprintln(w)
	}
	var starts []string
	for seg, p := range firstSeg {
		for _, b := range all {
			if b.walPosition == p {
				starts = append(starts, fmt.Sprintf("%d@%.2fs(fsync %s ms)", seg, float64(b.due-t0)/1e9, ms(b.logged-b.taken)))
				break
			}
		}
	}
	slices.Sort(starts)
	fmt.Fprintln(w, "WAL segments' first groups:", strings.Join(starts, " "))
}

// reportTrace joins the server's trace file with the client's trace and
// prints the report on stdout.
func reportTrace(b *testing.B, t *clientTrace, path string) {
	// the server writes a batch's line after sending its ack: give the
	// last ones time to land
	time.Sleep(100 * time.Millisecond)
	f, err := os.Open(path)
	if err != nil {
		b.Fatalf("server trace: %v", err)
	}
	defer f.Close()
	gcs, err := t.join(f)
	if err != nil {
		b.Fatal(err)
	}
	t.report(os.Stdout, gcs)
}
