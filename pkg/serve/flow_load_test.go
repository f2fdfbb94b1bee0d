package serve

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/energyscope/servingsnap/internal/testsnap"
)

// stallClients opens n DoGets of the whole dataset, each on a connection
// of its own, reads the first message of each and then nothing; with
// again, a client whose stream ended (cut by the stream timeout or
// refused) opens another, until ctx ends. It returns once every first
// DoGet is open; the returned function waits for the clients to go.
func stallClients(t testing.TB, ctx context.Context, addr string, tk []byte, n int, again time.Duration) func() {
	t.Helper()
	var wg sync.WaitGroup
	opened := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for ctx.Err() == nil {
				cl, err := flight.NewClientWithMiddleware(addr, nil, nil, insecureDial()...)
				if err != nil {
					if first {
						opened <- err
					}
					return
				}
				sctx, cancel := ctx, context.CancelFunc(func() {})
				if again > 0 {
					sctx, cancel = context.WithTimeout(ctx, again)
				}
				st, err := cl.DoGet(sctx, &flight.Ticket{Ticket: tk})
				if first {
					opened <- err
					first = false
				}
				if err == nil {
					st.Recv() // the schema (or a refusal); then read nothing more
				}
				<-sctx.Done()
				cancel()
				cl.Close()
				if again <= 0 {
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-opened; err != nil {
			t.Fatalf("stalled client: %v", err)
		}
	}
	return wg.Wait
}

// oneSeries runs one-series DoGets from clients clients (a connection
// each) until stop, each of a random id of ids; it returns every
// latency and the first failure.
func oneSeries(ctx context.Context, addr, dataset string, ids []string, clients int, stop <-chan struct{}, limit int) ([]time.Duration, int, error) {
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed int
		first  error
		wg     sync.WaitGroup
		count  atomic.Int64
	)
	for w := 0; w < clients; w++ {
		cl, err := flight.NewClientWithMiddleware(addr, nil, nil, insecureDial()...)
		if err != nil {
			return nil, 0, err
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
		loop:
			for {
				select {
				case <-stop:
					break loop
				default:
				}
				if limit > 0 && count.Add(1) > int64(limit) {
					break loop
				}
				id := ids[rand.IntN(len(ids))]
				t0 := time.Now()
				n, err := doGetRows(ctx, cl, ticket(map[string]any{"dataset": dataset, "series": []string{id}}))
				mine = append(mine, time.Since(t0))
				if err == nil && n == 0 {
					err = fmt.Errorf("series %s: no rows", id)
				}
				if err != nil {
					mu.Lock()
					failed++
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, failed, first
}

// quantile of sorted latencies.
func quantile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(q*float64(len(lat))))]
}

// TestFairFlowUnderStalledClients is the acceptance load test of fair
// flow control: 200 clients open a DoGet of a whole dataset (~730k rows,
// many batches) and stop reading; meanwhile 8 well-behaved clients run
// one-series DoGets for 5 s. Their p99 stays within 50 ms and none of
// their requests fails; the server process (snapbuild serve, defaults but
// the stream timeout) keeps RssAnon within 512 MiB, and once the stalled
// clients disconnect, RssAnon is back within twice its idle value within
// 30 s.
func TestFairFlowUnderStalledClients(t *testing.T) {
	const (
		stalled  = 200
		good     = 8
		loadTime = 5 * time.Second
	)
	root := t.TempDir()
	testsnap.Sample(t, root, "BIG", 12000, 3, nil)
	os.RemoveAll(filepath.Join(root, "lake-BIG"))
	// the stream timeout is longer than the test holds the stalled
	// clients: they are ended by disconnecting, as the issue measured
	p := startBinary(t, root, "--reload-interval", "0", "--stream-timeout", "40s")
	pid := p.cmd.Process.Pid
	c := dialAddr(t, p.flight)
	ctx := context.Background()
	all, err := get(ctx, c, allOf("BIG")) // warm: every page read once
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Compact(slices.Clone(all.ids))
	if len(ids) < 100 || all.batches < 5 {
		t.Fatalf("%d series in the dataset, %d batches in its whole answer: too small to stall", len(ids), all.batches)
	}
	t.Logf("the whole dataset: %d rows, %d series, %d batches", len(all.ids), len(ids), all.batches)
	all = nil
	// the idle baseline: one-series traffic alone, then settled
	base, _, err := oneSeries(ctx, p.flight, "BIG", ids, good, nil, 400)
	if err != nil {
		t.Fatalf("baseline one-series DoGets: %v", err)
	}
	time.Sleep(time.Second)
	_, idle := rss(t, pid)

	// sample the server's RssAnon from now until the end
	var peak atomic.Int64
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			_, a := rss(t, pid)
			if a > peak.Load() {
				peak.Store(a)
			}
			select {
			case <-sampling:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	sctx, disconnect := context.WithCancel(ctx)
	defer disconnect()
	t0 := time.Now()
	gone := stallClients(t, sctx, p.flight, allOf("BIG"), stalled, 0)
	if !waitFor(30*time.Second, func() bool {
		return metricValue(p.metrics(t), `servingsnap_requests_in_flight{method="DoGet"}`) >= stalled
	}) {
		t.Fatalf("the %d stalled streams did not all reach the server", stalled)
	}
	reached := time.Since(t0)
	stop := make(chan struct{})
	time.AfterFunc(loadTime, func() { close(stop) })
	lat, failed, first := oneSeries(ctx, p.flight, "BIG", ids, good, stop, 0)
	during := peak.Load()
	m := p.metrics(t)
	disconnect()
	gone()
	left := time.Now()
	var back time.Duration
	var after int64
	if waitFor(30*time.Second, func() bool {
		_, after = rss(t, pid)
		return after <= 2*idle
	}) {
		back = time.Since(left)
	}
	close(sampling)
	<-sampled
	// the stalled streams held at least 1/16 of the budget: once they
	// ended, the watchdog gave the memory back to the OS
	if !waitFor(3*freeEvery, func() bool { return metricValue(p.metrics(t), "servingsnap_memory_returned_total") >= 1 }) {
		t.Error("memory was not returned to the OS after the stalled streams ended")
	}
	_, settled := rss(t, pid)
	p99 := quantile(lat, 0.99)
	t.Logf("%d stalled whole-dataset clients (all in the server after %s), %d one-series clients for %s: %d queries (%.0f q/s), p50 %s p99 %s max %s, %d failed (baseline alone: p50 %s p99 %s); held %s bytes, waits %s, refused %s",
		stalled, reached.Round(time.Millisecond), good, loadTime, len(lat), float64(len(lat))/loadTime.Seconds(),
		quantile(lat, 0.5), p99, quantile(lat, 1), failed, quantile(base, 0.5), quantile(base, 0.99),
		metricText(m, "servingsnap_inflight_bytes"), metricText(m, "servingsnap_inflight_waits_total"), metricText(m, "servingsnap_inflight_refused_total"))
	t.Logf("server RssAnon: idle %d MiB, peak %d MiB, after the stalled clients left %d MiB (back within 2× idle after %s), %d MiB once memory was returned (%s times)",
		idle>>20, during>>20, after>>20, back.Round(time.Millisecond), settled>>20, metricText(p.metrics(t), "servingsnap_memory_returned_total"))
	if failed > 0 {
		t.Errorf("%d of %d one-series DoGets failed, the first: %v", failed, len(lat), first)
	}
	if p99 > 50*time.Millisecond {
		t.Errorf("one-series p99 %s among %d stalled clients, want ≤ 50ms", p99, stalled)
	}
	if during > 512<<20 {
		t.Errorf("server RssAnon %d MiB with %d stalled clients, want ≤ 512 MiB", during>>20, stalled)
	}
	if back == 0 {
		t.Errorf("server RssAnon %d MiB 30 s after the stalled clients left, want ≤ 2 × idle (%d MiB)", after>>20, 2*idle>>20)
	}
	p.alive(t)
}

// metricText is the value of the unlabelled (or fully labelled) series
// name in a /metrics text, "" if absent.
func metricText(text, name string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

// metricValue is metricText as a number, -1 if absent.
func metricValue(text, name string) float64 {
	v, err := strconv.ParseFloat(metricText(text, name), 64)
	if err != nil {
		return -1
	}
	return v
}

// BenchmarkDoGetFlow: one-series DoGets from 4 clients, alone
// ("stalled=0") or while 60 careless clients keep a DoGet of a whole
// dataset open without reading (each opens another once its stream is
// cut or refused), under the flow control before fair shares ("fifo": one
// semaphore, first come first served) and now ("fair"), with a 2 s stream
// timeout. Reports the one-series latency percentiles, queries/s and the
// fraction that failed.
func BenchmarkDoGetFlow(b *testing.B) {
	root := b.TempDir()
	testsnap.Sample(b, root, "BIG", 12000, 3, nil)
	os.RemoveAll(filepath.Join(root, "lake-BIG"))
	const (
		clients = 4
		timeout = 2 * time.Second
	)
	for _, bc := range []struct {
		policy  string
		stalled int
	}{{"fifo", 0}, {"fair", 0}, {"fifo", 60}, {"fair", 60}} {
		policy, stalled := bc.policy, bc.stalled
		b.Run(fmt.Sprintf("%s/stalled=%d", policy, stalled), func(b *testing.B) {
			lim := DefaultLimits
			lim.StreamTimeout = timeout
			srv := startServer(b, Config{Root: root, Options: Options{Limits: lim}})
			srv.svc.flow.fifo.Store(policy == "fifo")
			addr := srv.FlightAddr().String()
			c := dialAddr(b, addr)
			ctx := context.Background()
			all, err := get(ctx, c, allOf("BIG"))
			if err != nil {
				b.Fatal(err)
			}
			ids := slices.Compact(slices.Clone(all.ids))
			if stalled > 0 {
				sctx, disconnect := context.WithCancel(ctx)
				gone := stallClients(b, sctx, addr, allOf("BIG"), stalled, timeout+timeout/4)
				defer func() { disconnect(); gone() }()
				time.Sleep(500 * time.Millisecond) // the stalled streams reach the server
			}

			work := make(chan string, 1024)
			var (
				wg     sync.WaitGroup
				failed atomic.Int64
				mu     sync.Mutex
				lat    []time.Duration
			)
			for w := 0; w < clients; w++ {
				cl := dialAddr(b, addr)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for id := range work {
						t0 := time.Now()
						n, err := doGetRows(ctx, cl, ticket(map[string]any{"dataset": "BIG", "series": []string{id}}))
						mine = append(mine, time.Since(t0))
						if err != nil || n == 0 {
							failed.Add(1)
						}
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			start := time.Now()
			n := 0
			for b.Loop() {
				work <- ids[rand.IntN(len(ids))]
				n++
			}
			close(work)
			wg.Wait()
			el := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(n)/el.Seconds(), "queries/s")
			b.ReportMetric(float64(quantile(lat, 0.5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(quantile(lat, 0.99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(quantile(lat, 0.999).Microseconds()), "p99.9-µs")
			b.ReportMetric(float64(quantile(lat, 1).Microseconds()), "max-µs")
			b.ReportMetric(float64(failed.Load())/float64(max(n, 1)), "failed/op")
		})
	}
}
