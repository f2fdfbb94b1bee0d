package serve

// Flow control for slow clients (docs/FLIGHT.md "Flow control").
//
// A DoGet whose client stops reading blocks in gRPC's Send once the
// stream's flow-control window is full, holding what it has serialised
// (the message blocked in Send, the one queued before it, the IPC
// writer's buffer) and a reference on its snapshot, which keeps the
// files mapped and gc away. Without bounds, a hundred such clients held
// gigabytes and pinned old vintages forever. Three bounds:
//
//   - the in-flight byte budget (Limits.MaxInFlightBytes): a stream
//     reserves what it may hold in the transport (the answer's estimated
//     size, at most flowHold × BatchBytes) before its first message, and
//     gives it back when it ends; a stream that finds the budget spent
//     waits up to StreamTimeout, then fails with ResourceExhausted;
//   - the stream timeout (Limits.StreamTimeout): a Send blocked longer
//     ends the stream. gRPC offers no way to end one blocked stream from
//     another goroutine through flight.Server, so the watchdog closes the
//     stream's connection (a client that stops reading one stream of a
//     multiplexed connection loses that connection's other calls too);
//   - the lease timeout (Limits.LeaseTimeout): a stream may keep reading a
//     snapshot that was replaced (by a reload, a rollback or a compaction)
//     for at most this long; then it ends with Unavailable at its next
//     batch (a retry reads the new snapshot), or, blocked in Send, with
//     its connection. So a vintage is unmapped, and gc may delete it, at
//     most LeaseTimeout after it stopped being served.
//
// One watchdog goroutine scans the running streams; a stream costs a map
// insert and delete and two atomic stores per message.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"

	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/served"
)

// flowHold is how many batch budgets a stream reserves at most: the
// message blocked in Send, the one queued in the transport before it, and
// the IPC writer's buffer.
const flowHold = 3

// minReserve is the least a stream reserves (schema, dictionaries,
// headers).
const minReserve = 64 << 10

// errLeaseExpired ends a stream whose snapshot was replaced more than
// LeaseTimeout ago.
var errLeaseExpired = fmt.Errorf("lease timeout")

// leaseOwner is the dataset a stream reads (a *served.Dataset): the flow
// watchdog asks it whether the stream's view is still the one served.
type leaseOwner interface {
	Name() string
	Serves(v *served.View) bool
}

// streamFlow is one running DoGet's flow state.
type streamFlow struct {
	d        leaseOwner
	v        *served.View
	peer     string
	reserved int64

	sendStart  atomic.Int64 // UnixNano the Send in progress began; 0: none
	replacedAt atomic.Int64 // UnixNano the watchdog first saw the snapshot replaced
	expired    atomic.Bool  // the lease timeout passed: end at the next batch
	cut        atomic.Bool  // the watchdog closed the connection
	why        atomic.Value // string: why it was cut
}

// flowControl holds the budget and the running streams.
type flowControl struct {
	timeout, lease time.Duration
	budget         int64
	sem            *semaphore.Weighted // nil: no budget
	reservedNow    atomic.Int64
	log            interface {
		Warn(string, ...any)
	}
	m *flowMetrics

	mu      sync.Mutex
	streams map[*streamFlow]struct{}
	// closeConn closes the connection of a peer address (set by Server;
	// nil in-process: a stalled stream is only flagged).
	closeConn func(peer string) int

	stop chan struct{}
	done chan struct{}
}

func newFlowControl(l Limits, log interface{ Warn(string, ...any) }, m *flowMetrics) *flowControl {
	f := &flowControl{timeout: l.StreamTimeout, lease: l.LeaseTimeout, budget: l.MaxInFlightBytes, log: log, m: m,
		streams: map[*streamFlow]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	if l.MaxInFlightBytes > 0 {
		f.sem = semaphore.NewWeighted(l.MaxInFlightBytes)
	}
	if m != nil {
		m.budget.Set(float64(l.MaxInFlightBytes))
	}
	tick := time.Second
	for _, d := range []time.Duration{f.timeout, f.lease} {
		if d > 0 && d/4 < tick {
			tick = max(d/4, 5*time.Millisecond)
		}
	}
	if f.timeout <= 0 && f.lease <= 0 {
		close(f.done)
		return f
	}
	go f.watch(tick)
	return f
}

func (f *flowControl) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

// reserveFor is what a plan's stream reserves: its estimated answer size,
// at least minReserve, at most flowHold batch budgets.
func reserveFor(p *query.Plan, batchBytes int64) int64 {
	w := int64(0)
	for _, fd := range p.Schema().Fields() {
		if fw, ok := fd.Type.(arrow.FixedWidthDataType); ok {
			w += int64((fw.BitWidth() + 7) / 8)
		} else {
			w += 16
		}
	}
	est := p.Rows()*w + minReserve
	return min(est, flowHold*max(batchBytes, 1))
}

// begin registers a stream and reserves its share of the budget, waiting
// up to the stream timeout for it; a budget still spent then is
// ResourceExhausted.
func (f *flowControl) begin(ctx context.Context, d leaseOwner, v *served.View, want int64) (*streamFlow, error) {
	st := &streamFlow{d: d, v: v}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		st.peer = p.Addr.String()
	}
	if f.sem != nil {
		want = min(want, f.budget)
		if !f.sem.TryAcquire(want) {
			if f.m != nil {
				f.m.waits.Inc()
			}
			wctx, cancel := ctx, context.CancelFunc(func() {})
			if f.timeout > 0 {
				wctx, cancel = context.WithTimeout(ctx, f.timeout)
			}
			err := f.sem.Acquire(wctx, want)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if f.m != nil {
					f.m.refused.Inc()
				}
				return nil, errf(codes.ResourceExhausted, "server busy: the in-flight byte budget (%d bytes, --max-inflight-bytes) stayed spent for %s; retry later", f.budget, f.timeout)
			}
		}
		st.reserved = want
		f.reservedNow.Add(want)
	}
	f.mu.Lock()
	f.streams[st] = struct{}{}
	f.mu.Unlock()
	if f.m != nil {
		f.m.inflight.Set(float64(f.reservedNow.Load()))
	}
	return st, nil
}

// end unregisters a stream and returns its reservation.
func (f *flowControl) end(st *streamFlow) {
	f.mu.Lock()
	delete(f.streams, st)
	f.mu.Unlock()
	if st.reserved > 0 {
		// The count first: once released, the budget may be taken (and
		// counted) by a waiting stream before this goroutine runs again,
		// and the count would lag the semaphore, above it and the budget.
		f.reservedNow.Add(-st.reserved)
		f.sem.Release(st.reserved)
	}
	if f.m != nil {
		f.m.inflight.Set(float64(f.reservedNow.Load()))
	}
}

// watch ends stalled streams and streams past their lease until close.
func (f *flowControl) watch(tick time.Duration) {
	defer close(f.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case now := <-t.C:
			f.scan(now)
		}
	}
}

func (f *flowControl) scan(now time.Time) {
	f.mu.Lock()
	var cut []*streamFlow
	for st := range f.streams {
		if f.lease > 0 && !st.expired.Load() {
			if !st.d.Serves(st.v) {
				st.replacedAt.CompareAndSwap(0, now.UnixNano())
				if now.Sub(time.Unix(0, st.replacedAt.Load())) > f.lease {
					st.expired.Store(true)
					if f.m != nil {
						f.m.leaseExpired.Inc()
					}
				}
			}
		}
		s := st.sendStart.Load()
		if s == 0 || st.cut.Load() {
			continue
		}
		blocked := now.Sub(time.Unix(0, s))
		switch {
		case f.timeout > 0 && blocked > f.timeout:
			st.why.Store(fmt.Sprintf("the client read nothing for %s (--stream-timeout %s)", blocked.Round(time.Millisecond), f.timeout))
			cut = append(cut, st)
		case st.expired.Load() && blocked > f.lease/4:
			st.why.Store(fmt.Sprintf("snapshot %d was replaced more than %s ago (--lease-timeout) and the client is not reading", st.v.ID(), f.lease))
			cut = append(cut, st)
		}
	}
	closeConn := f.closeConn
	f.mu.Unlock()
	for _, st := range cut {
		st.cut.Store(true)
		n := 0
		if closeConn != nil && st.peer != "" {
			n = closeConn(st.peer)
		}
		if f.m != nil {
			f.m.stalled.Inc()
		}
		f.log.Warn("ending a stalled stream by closing its connection", "dataset", st.d.Name(), "snapshot_id", st.v.ID(),
			"peer", st.peer, "why", st.why.Load(), "connections_closed", n)
	}
}

// flowMetrics are the flow-control metrics.
type flowMetrics struct {
	budget       prometheus.Gauge
	inflight     prometheus.Gauge
	waits        prometheus.Counter
	refused      prometheus.Counter
	stalled      prometheus.Counter
	leaseExpired prometheus.Counter
}

func newFlowMetrics() flowMetrics {
	return flowMetrics{
		budget: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "servingsnap_inflight_budget_bytes", Help: "The in-flight byte budget of DoGet streams (--max-inflight-bytes; 0: none).",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "servingsnap_inflight_bytes", Help: "Bytes of the in-flight budget that running DoGet streams hold now.",
		}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "servingsnap_inflight_waits_total", Help: "DoGet streams that found the in-flight byte budget spent and waited.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "servingsnap_inflight_refused_total", Help: "DoGet streams refused with ResourceExhausted: the budget stayed spent for --stream-timeout.",
		}),
		stalled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "servingsnap_streams_stalled_total", Help: "DoGet streams ended (their connection closed) because a send made no progress for --stream-timeout, or past their lease.",
		}),
		leaseExpired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "servingsnap_streams_lease_expired_total", Help: "DoGet streams ended because their snapshot was replaced more than --lease-timeout ago.",
		}),
	}
}

func (m flowMetrics) register(r *prometheus.Registry) {
	r.MustRegister(m.budget, m.inflight, m.waits, m.refused, m.stalled, m.leaseExpired)
}
