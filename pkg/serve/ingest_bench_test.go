package serve

// Ingest benchmarks with a cheap, fair load generator (the live-write
// goals: durable ingest rows/s with 10k-row batches, ack p99 ≤ 10 ms;
// docs/OPERATIONS.md "Measuring ingest"):
//
//	go test -run '^$' -bench 'BenchmarkIngest' -benchtime 200x ./pkg/serve/
//
// The server runs in a process of its own (this test binary re-executed,
// as BenchmarkDoGet150's "subprocess"), so its CPU is read from /proc apart
// from the client's; -ingest.inprocess runs it in this process instead (for
// -cpuprofile; cpu-ns/row is then server and client together). The client
// encodes each batch's FlightData once and resends the same bytes, so what
// it costs is gRPC framing and the acknowledgements, not Arrow encoding.
// The server has taken no write before the measured load unless
// -ingest.warmup N sends N batches first (16: each series once), which
// measures the steady state apart from a start's first writes.
//
// BenchmarkIngestSaturated is closed-loop: W writers each keep one batch
// in flight and send the next when its ack arrives. It measures the
// throughput ceiling, but not the latency a paced load sees: by Little's
// law its mean latency is W × 10k rows / throughput whatever the server
// does (4 writers at 1M rows/s: 40 ms).
//
// BenchmarkIngestPaced is open-loop: 4 streams send at a fixed offered
// rate in total (rate=250k, 500k, 1M rows/s), each on its own schedule,
// without waiting for acks; a stream's acks come back in the order of its
// batches and are matched by that order. A batch's latency runs from the
// moment it was due to be sent to its ack, so a sender that falls behind
// (gRPC flow control holding it back) counts the delay rather than hiding
// it. b.N is the number of batches over all streams.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc"

	"github.com/energyscope/servingsnap/internal/gctune"
	"github.com/energyscope/servingsnap/internal/testlake"
)

var (
	ingestInProcess = flag.Bool("ingest.inprocess", false, "BenchmarkIngest*: run the server in the benchmark's process (for -cpuprofile)")
	ingestWindow    = flag.Int("ingest.window", 0, "BenchmarkIngest*: the server's Config.WindowBytes (--grpc-window; 0: gRPC's own)")
	ingestHeadroom  = flag.Int64("ingest.gc-headroom", gctune.DefaultHeadroom, "BenchmarkIngest*: the server's --gc-headroom in bytes (0: the runtime's own GOGC)")
	ingestCompact   = flag.Int64("ingest.compact-rows", 0, "BenchmarkIngest*: the server's --compact-rows, so the load meets compactions (0: none)")
	ingestWarmup    = flag.Int("ingest.warmup", 0, "BenchmarkIngestPaced/Saturated: batches sent (one writer, closed loop) and acknowledged before the measured load, so it sees a server past its first write of each series (0: a server that has taken no write yet)")
)

const ingestBatchRows = 10_000

// ingestServer is a server on a private copy of the benchmark dataset:
// its address, a function returning the server's CPU time so far (ns)
// and its /metrics address (for the per-stage latencies). A trace path
// makes the server write its per-batch trace there (ingest_trace_test.go).
func ingestServer(b *testing.B, trace string) (addr string, serverCPU func() int64, metrics string) {
	b.Helper()
	root := liveBenchRoot(b, 100_000, 150)
	if trace != "" && *ingestInProcess {
		b.Fatal("-ingest.trace needs the server in a process of its own (no -ingest.inprocess)")
	}
	if *ingestInProcess {
		tu := gctune.Start(*ingestHeadroom, gctune.DefaultReadHeadroom)
		b.Cleanup(tu.Stop)
		srv := startServer(b, Config{Root: root, HTTPAddr: "127.0.0.1:0", WindowBytes: *ingestWindow, Options: Options{Compact: CompactPolicy{Rows: *ingestCompact}}})
		return srv.FlightAddr().String(), liveCPUTime, srv.HTTPAddr().String()
	}
	addr, pid, httpAddr := startHelperHTTP(b, root, trace)
	return addr, func() int64 { return procCPUTime(b, pid) }, httpAddr
}

// startHelperHTTP is startHelperPID with the server's HTTP listener on:
// it also returns that address. A trace path turns its put trace on.
func startHelperHTTP(b testing.TB, root, trace string) (string, int, string) {
	b.Helper()
	lines, pid := startHelperProcess(b, root, 2, helperEnv+"_HTTP=1", helperEnv+"_WINDOW="+strconv.Itoa(*ingestWindow),
		helperEnv+"_GC_HEADROOM="+strconv.FormatInt(*ingestHeadroom, 10), helperEnv+"_COMPACT_ROWS="+strconv.FormatInt(*ingestCompact, 10),
		helperEnv+"_TRACE="+trace)
	return lines[0], pid, lines[1]
}

// stageCounts are the bucket counts of servingsnap_put_stage_seconds per
// stage, as scraped from a server's /metrics; under the stage "go" it
// also holds the Go runtime's counters named in goCounters, at le 0.
type stageCounts map[string]map[float64]float64

var stageBucketLine = regexp.MustCompile(`^servingsnap_put_stage_seconds_bucket\{stage="([a-z]+)",le="([^"]+)"\} ([0-9.e+]+)$`)

// goCounters are the server's GC cycles and heap bytes allocated, which
// the ingest benchmarks report per run (server-gcs, server-B/row): the
// collector's mark phase takes a core of the two, so the GC's rate shows
// in the latency tail.
var goCounters = regexp.MustCompile(`^(go_gc_duration_seconds_count|go_memstats_alloc_bytes_total|servingsnap_delta_runs\{[^}]*\}) ([0-9.e+]+)$`)

func scrapeStages(b *testing.B, addr string) stageCounts {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatalf("scrape stages: %v", err)
	}
	defer resp.Body.Close()
	out := stageCounts{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := goCounters.FindStringSubmatch(sc.Text()); m != nil {
			n, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				b.Fatalf("scrape stages: %q", sc.Text())
			}
			if out["go"] == nil {
				out["go"] = map[float64]float64{}
			}
			out["go"][goCounterKey(m[1])] = n
			continue
		}
		m := stageBucketLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		le, err1 := strconv.ParseFloat(m[2], 64)
		n, err2 := strconv.ParseFloat(m[3], 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("scrape stages: %q", sc.Text())
		}
		if out[m[1]] == nil {
			out[m[1]] = map[float64]float64{}
		}
		out[m[1]][le] = n
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("scrape stages: %v", err)
	}
	return out
}

// goCounterKey is where stageCounts["go"] keeps a goCounters counter (the
// delta's runs, a gauge, ride along at 2: whether merges kept up).
func goCounterKey(name string) float64 {
	switch {
	case name == "go_gc_duration_seconds_count":
		return 0
	case strings.HasPrefix(name, "servingsnap_delta_runs"):
		return 2
	}
	return 1
}

// reportStages reports each stage's p50 and p99 over the batches
// acknowledged between the scrapes before and after, interpolated
// linearly within a bucket (as Prometheus' histogram_quantile does), and
// the server's GC cycles and bytes allocated a row (rows: the run's) and
// the delta's runs at the end.
func reportStages(b *testing.B, before, after stageCounts, rows int) {
	if g1, g0 := after["go"], before["go"]; g1 != nil && g0 != nil && rows > 0 {
		b.ReportMetric(g1[0]-g0[0], "server-gcs")
		b.ReportMetric((g1[1]-g0[1])/float64(rows), "server-B/row")
		b.ReportMetric(g1[2], "delta-runs") // at the end of the run
	}
	for _, stage := range []string{stageCheck, stageQueue, stageFsync, stageApply, stageAck, stageTotal, stagePrepare} {
		cum := after[stage]
		if len(cum) == 0 {
			continue
		}
		les := make([]float64, 0, len(cum))
		for le := range cum {
			les = append(les, le)
		}
		slices.Sort(les)
		counts := make([]float64, len(les))
		for i, le := range les {
			counts[i] = cum[le] - before[stage][le]
		}
		total := counts[len(counts)-1]
		if total == 0 {
			continue
		}
		q := func(p float64) float64 {
			rank := p * total
			for i, c := range counts {
				if c < rank {
					continue
				}
				lo, below := 0.0, 0.0
				if i > 0 {
					lo, below = les[i-1], counts[i-1]
				}
				if math.IsInf(les[i], 1) {
					return lo
				}
				if c == below {
					return les[i]
				}
				return lo + (les[i]-lo)*(rank-below)/(c-below)
			}
			return les[len(les)-1]
		}
		b.ReportMetric(q(0.50)*1e6, stage+"-p50-µs")
		b.ReportMetric(q(0.99)*1e6, stage+"-p99-µs")
	}
}

// startHelperPID runs the test binary as a server process on root and
// returns its address and pid.
func startHelperPID(b testing.TB, root string) (string, int) {
	b.Helper()
	lines, pid := startHelperProcess(b, root, 1)
	return lines[0], pid
}

// startHelperProcess runs the test binary as a server process on root
// with env added, and returns the first n lines it prints (its addresses)
// and its pid. The process ends when the test does.
func startHelperProcess(b testing.TB, root string, n int, env ...string) ([]string, int) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), helperEnv+"="+root), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	br := bufio.NewReader(out)
	lines := make([]string, n)
	for i := range lines {
		line, err := br.ReadString('\n')
		if err != nil {
			b.Fatalf("helper server: %v", err)
		}
		lines[i] = strings.TrimSpace(line)
	}
	return lines, cmd.Process.Pid
}

// procCPUTime is process pid's user and system CPU time in nanoseconds
// (/proc/PID/stat, in clock ticks of 10 ms).
func procCPUTime(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		b.Fatalf("server CPU: %v", err)
	}
	// fields after the command name (which is in parentheses): state is
	// field 3, utime 14, stime 15
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + st) * int64(10*time.Millisecond)
}

// encodedBatches are 16 distinct 10k-row batches (half revisions, half
// appends, as BenchmarkDoPut's) as the FlightData a Flight client sends:
// the schema message with the descriptor, then one message per batch.
func encodedBatches(b *testing.B) (schema *flight.FlightData, batches []*flight.FlightData) {
	b.Helper()
	ids := testlake.UniformIDs(100_000)
	var cs ingestCapture
	var w *flight.Writer
	for i := 0; i < 16; i++ {
		rec := testlake.UniformBatch(ids, i*ingestBatchRows, ingestBatchRows, i%2 == 0)
		if w == nil {
			w = flight.NewRecordWriter(&cs, ipc.WithSchema(rec.Schema()))
			w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"B"}})
		}
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	w.Close()
	if len(cs.msgs) != 17 {
		b.Fatalf("encoded %d messages, want a schema and 16 batches", len(cs.msgs))
	}
	return cs.msgs[0], cs.msgs[1:]
}

// ingestCapture keeps copies of the FlightData a writer sends (the
// writer reuses its buffers).
type ingestCapture struct{ msgs []*flight.FlightData }

func (c *ingestCapture) Send(fd *flight.FlightData) error {
	c.msgs = append(c.msgs, &flight.FlightData{
		FlightDescriptor: fd.FlightDescriptor,
		DataHeader:       append([]byte(nil), fd.DataHeader...),
		DataBody:         append([]byte(nil), fd.DataBody...),
	})
	return nil
}

// ingestRun is one benchmark's load: streams × per batches.
type ingestRun struct {
	addr    string
	schema  *flight.FlightData
	batches []*flight.FlightData
	streams int
	per     int
	// interval is a stream's time between batches; 0: closed loop.
	interval time.Duration
	// trace, if not nil, takes every paced batch's moments.
	trace *clientTrace
}

// run sends the load and returns every batch's latency and the wall time
// from the first send to the last ack.
func (r ingestRun) run(b *testing.B) ([]time.Duration, time.Duration) {
	conns := make([]flight.FlightServiceClient, r.streams)
	for i := range conns {
		conns[i] = dialAddr(b, r.addr) // a connection per stream, as separate writers have
	}
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	t0 := time.Now()
	for s := 0; s < r.streams; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, err := r.stream(conns[s], s, t0)
			if err != nil {
				b.Error(err)
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, time.Since(t0)
}

// stream is one writer: closed loop (send, wait for the ack) or paced
// (send on schedule; a second goroutine takes the acks in order).
func (r ingestRun) stream(c flight.FlightServiceClient, s int, t0 time.Time) ([]time.Duration, error) {
	ctx := context.Background()
	if r.trace != nil {
		ctx = traceContext(s)
	}
	st, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(r.schema); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, r.per)
	batch := func(i int) *flight.FlightData { return r.batches[(s+i)%len(r.batches)] }
	if r.interval == 0 {
		for i := 0; i < r.per; i++ {
			t := time.Now()
			if err := st.Send(batch(i)); err != nil {
				return lat, err
			}
			if _, err := st.Recv(); err != nil {
				return lat, err
			}
			lat = append(lat, time.Since(t))
		}
		return lat, st.CloseSend()
	}
	// Stream s starts s/streams of an interval after the first, so the
	// offered load is even rather than in bursts of one batch per stream.
	due := make([]time.Time, r.per)
	for i := range due {
		due[i] = t0.Add(time.Duration(s)*r.interval/time.Duration(r.streams) + time.Duration(i)*r.interval)
	}
	var traced []*tracedBatch
	if r.trace != nil {
		traced = make([]*tracedBatch, r.per)
		for i := range traced {
			traced[i] = r.trace.batch(s, i)
			traced[i].due = due[i].UnixNano()
		}
	}
	acks := make(chan error, 1)
	go func() {
		for i := 0; i < r.per; i++ {
			res, err := st.Recv()
			if err != nil {
				acks <- fmt.Errorf("stream %d, ack %d: %w", s, i, err)
				return
			}
			now := time.Now()
			lat = append(lat, now.Sub(due[i]))
			if traced != nil {
				traced[i].ack = now.UnixNano()
				traced[i].walPosition = ackPosition(res.AppMetadata)
			}
		}
		acks <- nil
	}()
	for i := 0; i < r.per; i++ {
		waitUntil(due[i])
		if traced != nil {
			traced[i].send = time.Now().UnixNano()
		}
		if err := st.Send(batch(i)); err != nil {
			return nil, fmt.Errorf("stream %d, batch %d: %w", s, i, err)
		}
		if traced != nil {
			traced[i].sent = time.Now().UnixNano()
		}
	}
	err = <-acks
	st.CloseSend()
	return lat, err
}

// waitUntil returns at t, or as soon after as the kernel wakes it. A
// paced batch's latency runs from when it was due, so the generator's own
// lateness would count in every figure, and Go's timers wake a sleeping
// process up to a millisecond late (its netpoller waits in whole
// milliseconds; measured here: time.Sleep p50 0.6 ms, p99 1.1 ms late).
// So it sleeps with Go's timer to within a few milliseconds of t, then in
// nanosleep(2) on its thread (p50 0.12 ms late), without spinning a core
// the server needs.
func waitUntil(t time.Time) {
	const coarse = 3 * time.Millisecond
	if d := time.Until(t) - coarse; d > 0 {
		time.Sleep(d)
	}
	if d := time.Until(t); d > 0 {
		ts := syscall.NsecToTimespec(d.Nanoseconds())
		for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
		}
	}
}

// floorServer is the transport floor under the ingest benchmarks: a
// Flight server that decodes every DoPut batch as the real one does
// (flight.NewRecordReader over the same gRPC settings) and acknowledges it
// at once with app_metadata of the same shape, checking and logging
// nothing. Its latencies are what gRPC, the IPC decoding, the generator
// and this machine cost a batch with no server work at all: the part of
// BenchmarkIngestPaced's figures no change to the write path can remove.
type floorServer struct{ flight.BaseFlightServer }

func (*floorServer) DoPut(stream flight.FlightService_DoPutServer) error {
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		return err
	}
	defer rd.Release()
	for rd.Next() {
		md := fmt.Appendf(nil, `{"rows":%d,"wal_position":0}`, rd.RecordBatch().NumRows())
		if err := stream.Send(&flight.PutResult{AppMetadata: md}); err != nil {
			return err
		}
	}
	return rd.Err()
}

// floorServe is the helper process as a floorServer on 127.0.0.1:0: it
// prints the address and stops when stdin closes.
func floorServe() int {
	g, lis, err := newFloorServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		g.Stop()
	}()
	fmt.Println(lis.Addr().String())
	if err := g.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// newFloorServer is a floorServer's gRPC server (the real server's
// message limit and stream workers) and its listener on 127.0.0.1:0.
func newFloorServer() (*grpc.Server, net.Listener, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(minRecvMsgBytes), grpc.NumStreamWorkers(uint32(4*runtime.GOMAXPROCS(0))))
	flight.RegisterFlightServiceServer(g, &floorServer{})
	return g, lis, nil
}

// BenchmarkIngestFloor: BenchmarkIngestPaced's load against floorServer
// in its own process, for the floor under its latencies.
func BenchmarkIngestFloor(b *testing.B) {
	schema, batches := encodedBatches(b)
	const streams = 4
	for _, rate := range []int{250_000, 500_000, 1_000_000} {
		b.Run(fmt.Sprintf("rate=%dk", rate/1000), func(b *testing.B) {
			var addr string
			serverCPU := liveCPUTime
			if *ingestInProcess {
				g, lis, err := newFloorServer()
				if err != nil {
					b.Fatal(err)
				}
				go g.Serve(lis)
				b.Cleanup(g.Stop)
				addr = lis.Addr().String()
			} else {
				lines, pid := startHelperProcess(b, "-", 1, helperEnv+"_FLOOR=1")
				addr, serverCPU = lines[0], func() int64 { return procCPUTime(b, pid) }
			}
			interval := time.Duration(float64(time.Second) * streams * ingestBatchRows / float64(rate))
			r := ingestRun{addr: addr, schema: schema, batches: batches, streams: streams,
				per: max(b.N/streams, 1), interval: interval}
			warmUp(b, r)
			b.ResetTimer()
			s0, c0 := serverCPU(), liveCPUTime()
			lat, wall := r.run(b)
			s1, c1 := serverCPU(), liveCPUTime()
			ingestReport(b, lat, wall, s1-s0, c1-c0)
		})
	}
}

// report adds throughput, CPU per row (server; client) and latency.
func ingestReport(b *testing.B, lat []time.Duration, wall time.Duration, serverCPU, clientCPU int64) {
	rows := float64(len(lat) * ingestBatchRows)
	b.ReportMetric(rows/wall.Seconds(), "rows/s")
	b.ReportMetric(float64(serverCPU)/rows, "server-cpu-ns/row")
	if !*ingestInProcess {
		b.ReportMetric(float64(clientCPU)/rows, "client-cpu-ns/row")
	}
	percentiles(b, lat)
}

// warmUp sends -ingest.warmup batches of r's over one closed-loop
// stream and waits for their acks. The first write of each series after a
// start (or a compaction) costs more than later ones: the key index makes
// its entry, the code cache may still be filling. With a warm-up of as
// many batches as the generator has (16: every series once) the measured
// load sees the steady state; without, its first second counts too.
func warmUp(b *testing.B, r ingestRun) {
	if *ingestWarmup <= 0 {
		return
	}
	r.streams, r.per, r.interval = 1, *ingestWarmup, 0
	if _, _ = r.run(b); b.Failed() {
		b.FailNow()
	}
}

// BenchmarkIngestSaturated: closed-loop throughput with the pre-encoded
// client, 1 and 4 writers (b.N batches in all).
func BenchmarkIngestSaturated(b *testing.B) {
	schema, batches := encodedBatches(b)
	for _, writers := range []int{1, 4} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			addr, serverCPU, metrics := ingestServer(b, "")
			r := ingestRun{addr: addr, schema: schema, batches: batches, streams: writers, per: max(b.N/writers, 1)}
			warmUp(b, r)
			b.ResetTimer()
			st0 := scrapeStages(b, metrics)
			s0, c0 := serverCPU(), liveCPUTime()
			lat, wall := r.run(b)
			s1, c1 := serverCPU(), liveCPUTime()
			ingestReport(b, lat, wall, s1-s0, c1-c0)
			reportStages(b, st0, scrapeStages(b, metrics), len(lat)*ingestBatchRows)
		})
	}
}

// BenchmarkIngestPaced: open-loop ingest over 4 streams at a fixed
// offered rate; reports the achieved rows/s and ack latency from due time.
func BenchmarkIngestPaced(b *testing.B) {
	schema, batches := encodedBatches(b)
	const streams = 4
	for _, rate := range []int{250_000, 500_000, 1_000_000} {
		b.Run(fmt.Sprintf("rate=%dk", rate/1000), func(b *testing.B) {
			var trace string
			if *ingestTrace {
				trace = filepath.Join(b.TempDir(), "server.trace")
			}
			addr, serverCPU, metrics := ingestServer(b, trace)
			// a stream sends a batch every streams × batch / rate
			interval := time.Duration(float64(time.Second) * streams * ingestBatchRows / float64(rate))
			r := ingestRun{addr: addr, schema: schema, batches: batches, streams: streams,
				per: max(b.N/streams, 1), interval: interval}
			warmUp(b, r)
			if trace != "" {
				r.trace = newClientTrace()
				defer reportTrace(b, r.trace, trace)
			}
			b.ResetTimer()
			st0 := scrapeStages(b, metrics)
			s0, c0 := serverCPU(), liveCPUTime()
			lat, wall := r.run(b)
			s1, c1 := serverCPU(), liveCPUTime()
			ingestReport(b, lat, wall, s1-s0, c1-c0)
			reportStages(b, st0, scrapeStages(b, metrics), len(lat)*ingestBatchRows)
		})
	}
}
