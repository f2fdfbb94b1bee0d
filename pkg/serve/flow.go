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
//     gives it back when it ends; a stream that finds no room waits up to
//     StreamTimeout, then fails with ResourceExhausted;
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
// The budget is shared fairly, so that stalled large answers cannot make
// everyone else wait (with one FIFO semaphore, 26 stalled whole-dataset
// streams held the whole budget and a one-series query waited 26 s
// behind them):
//
//   - small answers have a reserve of their own: a stream whose
//     reservation is at most one batch budget (BatchBytes) takes it from
//     the small pool, 1/smallPart of the budget; larger ones from the
//     rest. A one-series query never waits behind whole-dataset streams,
//     and the small pool is bounded like the large one;
//   - each client (peer host, without the port: a client opening many
//     connections is still one) may hold at most 1/hostShare of each
//     pool, so a few hosts cannot take all of it; a client over its share
//     waits (and, past StreamTimeout, is refused) alone;
//   - waiters do not queue in order of arrival: whoever fits when bytes
//     are given back takes them, so a large reservation waiting (or a
//     client waiting for its share) never holds up a smaller one that
//     fits. A reservation is at most its host's share, so every stream can
//     eventually fit.
//
// Per-host shares and a separate small reserve were chosen over a
// reservation that shrinks with what a stream has left to send: they
// bound what stalled clients hold without tracking each stream's
// progress, and a stalled stream's reservation is what it really holds
// (the message blocked in Send), which shrinking cannot give back.
//
// Memory given back: what the stalled streams held (their messages, the
// connections' buffers) is garbage once they end, but the Go runtime keeps
// freed pages, and with gctune's headroom it may not even collect for a
// while. When the bytes reserved fall from a high mark (at least
// 1/freeAbovePart of the budget) to a quarter of it, the watchdog calls
// debug.FreeOSMemory (a collection that returns free pages to the OS), at
// most once every freeEvery, and once more freeEvery later for the
// streams that were still ending (with a budget and a watchdog: a stream
// or lease timeout). gctune retunes GOGC after that
// collection like after any other.
//
// One watchdog goroutine scans the running streams; a stream costs a map
// insert and delete, a pool's lock twice, and two atomic stores per
// message.

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
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

// smallPart: the small answers' pool is 1/smallPart of the budget.
// hostShare: one peer host holds at most 1/hostShare of each pool.
const (
	smallPart = 4
	hostShare = 4
)

// freeAbovePart, freeEvery: memory goes back to the OS once reservations
// fall from at least 1/freeAbovePart of the budget to a quarter of their
// high mark, at most once every freeEvery.
const (
	freeAbovePart = 16
	freeEvery     = 5 * time.Second
)

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
	peer     string // address, host:port
	host     string // peer without the port: the client whose share it takes
	pool     *flowPool
	reserved int64

	sendStart  atomic.Int64 // UnixNano the Send in progress began; 0: none
	replacedAt atomic.Int64 // UnixNano the watchdog first saw the snapshot replaced
	expired    atomic.Bool  // the lease timeout passed: end at the next batch
	cut        atomic.Bool  // the watchdog closed the connection
	why        atomic.Value // string: why it was cut
}

// flowPool is a byte budget shared among peer hosts: a grant needs room in
// the pool and in its host's share. Waiters are not queued: when bytes are
// given back every waiter looks again and whoever fits takes them.
type flowPool struct {
	name        string // "small" or "large", for messages
	size, share int64

	mu    sync.Mutex
	used  int64
	hosts map[string]int64 // bytes held, by host; no zero entries
	freed chan struct{}    // made by the first waiter; closed (and cleared) when bytes are given back
}

func newFlowPool(name string, size int64) *flowPool {
	return &flowPool{name: name, size: size, share: max(size/hostShare, 1), hosts: map[string]int64{}}
}

// acquire takes n bytes (at most share) for host, waiting until they fit
// or ctx ends or, if timeout > 0, timeout passes; it calls waiting once if
// it has to wait. hostFull reports whether the host's share, rather than
// the pool, was what had no room the last time it looked. Bytes that are
// free are taken without allocating (the timeout's context is made only
// for a wait).
func (p *flowPool) acquire(ctx context.Context, timeout time.Duration, host string, n int64, waiting func()) (hostFull bool, err error) {
	waited := false
	for {
		p.mu.Lock()
		hostFull = p.hosts[host]+n > p.share
		if !hostFull && p.used+n <= p.size {
			p.used += n
			p.hosts[host] += n
			p.mu.Unlock()
			return false, nil
		}
		if p.freed == nil {
			p.freed = make(chan struct{})
		}
		freed := p.freed
		p.mu.Unlock()
		if !waited {
			waited = true
			waiting()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
		}
		select {
		case <-ctx.Done():
			return hostFull, ctx.Err()
		case <-freed:
		}
	}
}

// release gives back n bytes of host's and wakes the waiters.
func (p *flowPool) release(host string, n int64) {
	p.mu.Lock()
	p.used -= n
	if p.hosts[host] -= n; p.hosts[host] <= 0 {
		delete(p.hosts, host)
	}
	if p.freed != nil { // someone waits
		close(p.freed)
		p.freed = nil
	}
	p.mu.Unlock()
}

// flowControl holds the budget and the running streams.
type flowControl struct {
	timeout, lease time.Duration
	budget         int64
	small, large   *flowPool // nil: no budget
	smallMax       int64     // a reservation up to this is small (one batch budget)
	reservedNow    atomic.Int64
	log            interface {
		Warn(string, ...any)
	}
	m *flowMetrics

	// fifo selects the policy before fair shares (one semaphore, first
	// come first served), kept for the benchmark that compares the two
	// (atomic: it sets it on a running server).
	fifo atomic.Bool
	sem  *semaphore.Weighted

	// high is the most bytes reserved since memory was last given back to
	// the OS; lastFree when that was; freeAgain asks for one more if the
	// bytes reserved are still at most freeBelow. Only the watchdog uses
	// the last three.
	high      atomic.Int64
	lastFree  time.Time
	freeAgain bool
	freeBelow int64
	freeOS    func() // debug.FreeOSMemory; tests count the calls

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
		freeOS: debug.FreeOSMemory, streams: map[*streamFlow]struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	f.smallMax = l.BatchBytes
	if f.smallMax <= 0 {
		f.smallMax = DefaultLimits.BatchBytes
	}
	if l.MaxInFlightBytes > 0 {
		f.sem = semaphore.NewWeighted(l.MaxInFlightBytes)
		smallSize := max(l.MaxInFlightBytes/smallPart, 1)
		f.small = newFlowPool("small", smallSize)
		f.large = newFlowPool("large", max(l.MaxInFlightBytes-smallSize, 1))
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
	sc := p.Schema()
	for i := range sc.NumFields() { // not Fields(): it copies the slice
		if fw, ok := sc.Field(i).Type.(arrow.FixedWidthDataType); ok {
			w += int64((fw.BitWidth() + 7) / 8)
		} else {
			w += 16
		}
	}
	est := p.Rows()*w + minReserve
	return min(est, flowHold*max(batchBytes, 1))
}

// peerHost is a peer address without its port.
func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// begin registers a stream and reserves its share of the budget, waiting
// up to the stream timeout for it; no room then is ResourceExhausted.
func (f *flowControl) begin(ctx context.Context, d leaseOwner, v *served.View, want int64) (*streamFlow, error) {
	st := &streamFlow{d: d, v: v}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		st.peer = p.Addr.String()
		st.host = peerHost(st.peer)
	}
	if f.small != nil {
		if err := f.reserve(ctx, st, want); err != nil {
			return nil, err
		}
		r := f.reservedNow.Add(st.reserved)
		for h := f.high.Load(); r > h && !f.high.CompareAndSwap(h, r); h = f.high.Load() {
		}
	}
	f.mu.Lock()
	f.streams[st] = struct{}{}
	f.mu.Unlock()
	if f.m != nil {
		f.m.inflight.Set(float64(f.reservedNow.Load()))
	}
	return st, nil
}

// reserve takes want bytes for st from its pool (or, fifo, the one
// semaphore), waiting up to the stream timeout.
func (f *flowControl) reserve(ctx context.Context, st *streamFlow, want int64) error {
	waiting := func() {
		if f.m != nil {
			f.m.waits.Inc()
		}
	}
	var (
		hostFull bool
		err      error
	)
	if f.fifo.Load() {
		want = min(want, f.budget)
		if !f.sem.TryAcquire(want) {
			waiting()
			wctx, cancel := ctx, context.CancelFunc(func() {})
			if f.timeout > 0 {
				wctx, cancel = context.WithTimeout(ctx, f.timeout)
			}
			err = f.sem.Acquire(wctx, want)
			cancel()
		}
	} else {
		st.pool = f.large
		if want <= f.smallMax {
			st.pool = f.small
		}
		want = min(want, st.pool.share)
		hostFull, err = st.pool.acquire(ctx, f.timeout, st.host, want, waiting)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if f.m != nil {
			f.m.refused.Inc()
		}
		return errf(codes.ResourceExhausted, "server busy: %s stayed spent for %s; retry later", f.limitText(st, hostFull), f.timeout)
	}
	st.reserved = want
	return nil
}

// limitText names the budget a refused reservation found spent.
func (f *flowControl) limitText(st *streamFlow, hostFull bool) string {
	switch {
	case f.fifo.Load():
		return fmt.Sprintf("the in-flight byte budget (%d bytes, --max-inflight-bytes)", f.budget)
	case hostFull:
		return fmt.Sprintf("this client's share of the %s answers' in-flight bytes (%d bytes, 1/%d of %d; --max-inflight-bytes %d)",
			st.pool.name, st.pool.share, hostShare, st.pool.size, f.budget)
	default:
		return fmt.Sprintf("the %s answers' share of the in-flight byte budget (%d of --max-inflight-bytes %d)", st.pool.name, st.pool.size, f.budget)
	}
}

// end unregisters a stream and returns its reservation.
func (f *flowControl) end(st *streamFlow) {
	f.mu.Lock()
	delete(f.streams, st)
	f.mu.Unlock()
	if st.reserved > 0 {
		// The count first: once released, the budget may be taken (and
		// counted) by a waiting stream before this goroutine runs again,
		// and the count would lag the pool, above it and the budget.
		f.reservedNow.Add(-st.reserved)
		if st.pool != nil {
			st.pool.release(st.host, st.reserved)
		} else {
			f.sem.Release(st.reserved)
		}
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
	f.giveBack(now)
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

// giveBack returns freed memory to the OS when the bytes reserved fell
// from a high mark to a quarter of it, at most once every freeEvery, and
// once more freeEvery later for the streams still ending then. Only the
// watchdog calls it.
func (f *flowControl) giveBack(now time.Time) {
	if f.budget <= 0 || now.Sub(f.lastFree) < freeEvery {
		return
	}
	r, h := f.reservedNow.Load(), f.high.Load()
	switch {
	case h >= max(f.budget/freeAbovePart, 1) && r <= h/4:
		f.freeAgain, f.freeBelow = true, h/4
	case f.freeAgain && r <= f.freeBelow:
		f.freeAgain = false
	default:
		return
	}
	f.high.Store(r)
	f.lastFree = now
	f.freeOS()
	if f.m != nil {
		f.m.freed.Inc()
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
	freed        prometheus.Counter
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
			Name: "servingsnap_inflight_waits_total", Help: "DoGet streams that found no room in the in-flight byte budget (the small or large answers' part, or their client's share of it) and waited.",
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
		freed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "servingsnap_memory_returned_total", Help: "Times the server returned freed memory to the OS after the bytes DoGet streams held fell (flow control).",
		}),
	}
}

func (m flowMetrics) register(r *prometheus.Registry) {
	r.MustRegister(m.budget, m.inflight, m.waits, m.refused, m.stalled, m.leaseExpired, m.freed)
}
