package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"
)

// Config is everything `snapbuild serve` sets: where the server listens
// and how it is reached, and the Options of the Service it runs (limits,
// reloads, live writes, compaction, shards, caches). Options.Metrics may
// be nil: the server then makes its own.
type Config struct {
	Root     string
	Addr     string // Flight listen address, e.g. 127.0.0.1:8815 (port 0: any free port)
	HTTPAddr string // metrics and health; empty: no HTTP listener

	Tokens          *Tokens // nil: no authentication
	TLSCert, TLSKey string  // both or neither

	ShutdownTimeout time.Duration // how long in-flight streams may run after a stop signal
	// WindowBytes is the gRPC flow-control window of each stream
	// (--grpc-window): how much a client may send before the server's
	// WINDOW_UPDATE; a connection's window is 4 times it. 0 leaves gRPC's
	// own (64 KiB, grown by its bandwidth-delay estimate, which a fixed
	// window turns off). On loopback a fixed 4 MiB window changed no
	// DoPut latency measurably (docs/OPERATIONS.md, "Measuring ingest"):
	// it is for links whose round trip is long against a batch's time.
	WindowBytes int

	Options
}

// gRPC message limits. Requests are tickets, commands, actions and DoPut
// record batches, so the receive limit is the larger of the ticket limit
// and the write budget, plus room for the envelope, and never below gRPC's
// 4 MiB default (recvMsgBytes). The send limit is a guard well above the
// batch budget: a record batch is sized to BatchBytes, and only one row
// wider than that (a single huge string) could come near it.
const (
	minRecvMsgBytes = 4 << 20
	sendMsgBytes    = 256 << 20
	// envelopeBytes is room for what wraps a ticket or a batch's buffers
	// in one gRPC message: the FlightData protobuf, the IPC message's
	// flatbuffer header (a few hundred bytes a column) and its padding.
	envelopeBytes = 64 << 10
)

// recvMsgBytes is the gRPC receive limit for l. A DoPut batch may be as
// large as MaxPutBytes (acquirePut refuses a larger one with a message
// that names the limit, which gRPC's own refusal would not), so a batch of
// MaxPutRows rows fits whenever its bytes do; with MaxPutBytes unbounded
// (<= 0) so is the message, up to gRPC's own ceiling.
func recvMsgBytes(l Limits) int {
	recv := int64(minRecvMsgBytes)
	if t := int64(l.MaxTicketBytes) + envelopeBytes; t > recv {
		recv = t
	}
	switch {
	case l.MaxPutBytes <= 0:
		recv = math.MaxInt32
	case l.MaxPutBytes+envelopeBytes > recv:
		recv = l.MaxPutBytes + envelopeBytes
	}
	return int(min(recv, math.MaxInt32))
}

// Server is a running Flight server plus its HTTP side.
type Server struct {
	cfg     Config
	svc     *Service
	metrics *Metrics
	log     *slog.Logger

	flight   flight.Server
	mux      *flightMux
	lis      net.Listener
	conns    *connTracker
	httpLis  net.Listener
	httpSrv  *http.Server
	health   *health.Server
	stopping atomic.Bool
}

// New opens the datasets and binds the listeners; Serve starts answering.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("serve: give both --tls-cert and --tls-key, or neither")
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	m := cfg.Metrics
	m.setBuildInfo(cfg.Version)
	svc, err := Open(cfg.Root, cfg.Options)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, svc: svc, metrics: m, log: cfg.Logger}
	ok := false
	defer func() {
		if !ok {
			s.closeListeners()
			svc.Close()
		}
	}()

	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(recvMsgBytes(cfg.Limits)),
		grpc.MaxSendMsgSize(sendMsgBytes),
		// Reuse handler goroutines (their stacks are already grown to what
		// the IPC writer needs) instead of one new goroutine per call:
		// about 10% off a small DoGet. Calls beyond the pool still get
		// goroutines of their own.
		grpc.NumStreamWorkers(uint32(4 * runtime.GOMAXPROCS(0))),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	// state a client makes lives as long as its connection (conns.go)
	s.mux = newFlightMux(svc)
	s.mux.sqlSrv.prepared.register(m.Registry)
	opts = append(opts, grpc.StatsHandler(&connStats{onEnd: s.connEnded}))
	if w := min(cfg.WindowBytes, math.MaxInt32/4); w > 0 {
		opts = append(opts, grpc.InitialWindowSize(int32(w)), grpc.InitialConnWindowSize(int32(4*w)))
	}
	if cfg.TLSCert != "" {
		creds, err := credentials.NewServerTLSFromFile(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("serve: TLS: %w", err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	mw := []flight.ServerMiddleware{callMiddleware(m, cfg.Logger, svc.panicked, svc.redact)}
	if cfg.Tokens != nil {
		mw = append(mw, authMiddleware(cfg.Tokens, m))
	}
	if cfg.Tokens != nil && cfg.TLSCert == "" {
		cfg.Logger.Warn("token auth without TLS: tokens travel in clear text; use --tls-cert/--tls-key off loopback")
	}
	s.flight = flight.NewServerWithMiddleware(mw, opts...)
	s.flight.RegisterFlightService(s.mux)
	s.health = newHealth(s.flight, svc)

	if s.lis, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("serve: listen %s: %w", cfg.Addr, err)
	}
	s.conns = &connTracker{Listener: s.lis, conns: map[net.Conn]struct{}{}}
	svc.flow.mu.Lock()
	svc.flow.closeConn = s.conns.closeRemote
	svc.flow.mu.Unlock()
	s.flight.InitListener(s.conns)
	if cfg.HTTPAddr != "" {
		if s.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
			return nil, fmt.Errorf("serve: listen %s: %w", cfg.HTTPAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
		mux.HandleFunc("/healthz", s.healthz)
		mux.HandleFunc("/readyz", s.readyz)
		s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}
	ok = true
	return s, nil
}

// Service is the Flight service (for in-process use and tests).
func (s *Server) Service() *Service { return s.svc }

// FlightURI is the address clients connect to, grpc+tcp:// or grpc+tls://.
func (s *Server) FlightURI() string {
	scheme := "grpc+tcp"
	if s.cfg.TLSCert != "" {
		scheme = "grpc+tls"
	}
	return scheme + "://" + s.lis.Addr().String()
}

// HTTPAddr is the bound metrics address, nil without one.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpLis == nil {
		return nil
	}
	return s.httpLis.Addr()
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.stopping.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"status": "stopping"})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"status": "ok", "datasets": s.svc.Datasets()})
}

// readyz says whether to send traffic here (a load balancer's or
// Kubernetes' readiness probe), where /healthz says whether the process is
// alive: 503 while shutting down, and when the root holds no served
// dataset (nothing could be answered, and datasets are only found at
// start-up); otherwise 200 with the datasets served, and those that take
// no writes for a fault (writes_failing: reads go on, so the server stays
// ready; status says why).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	ds := s.svc.Datasets()
	switch {
	case s.stopping.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"status": "stopping"})
	case len(ds) == 0:
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"status": "no datasets"}) // never the root: these endpoints are open
	default:
		body := map[string]any{"status": "ready", "datasets": ds}
		var failing []string
		for _, name := range ds {
			if d, ok := s.svc.datasets[name]; ok && d.WritesFailing() {
				failing = append(failing, name)
			}
		}
		if failing != nil {
			body["writes_failing"] = failing
		}
		json.NewEncoder(w).Encode(body)
	}
}

// Serve answers until ctx is cancelled, then shuts down gracefully: health
// turns 503, no new calls are accepted, and in-flight calls (streams
// included) run to completion for up to ShutdownTimeout, after which
// running streams are ended with Unavailable. Finally the snapshots are
// released. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.flight.Serve() }()
	if s.httpSrv != nil {
		go func() {
			if err := s.httpSrv.Serve(s.httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
	}
	var serveErr error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down", "grace", s.cfg.ShutdownTimeout.String())
	case serveErr = <-errc:
		s.log.Error("listener failed", "error", serveErr)
	}
	s.stopping.Store(true)
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() { s.flight.Shutdown(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(s.cfg.ShutdownTimeout):
		s.log.Warn("grace period over; ending in-flight streams")
		s.svc.stopNow(errShuttingDown) // streams between batches end with Unavailable
		select {
		case <-stopped:
		case <-time.After(time.Second):
			// a stream blocked in Send (a client that stopped reading)
			// only ends when its connection does
			n := s.conns.closeAll()
			s.log.Warn("closed connections of calls still running", "connections", n)
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				s.log.Error("calls still running after closing their connections; exiting anyway")
			}
		}
	}
	if s.httpSrv != nil {
		hctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.httpSrv.Shutdown(hctx)
		cancel()
	}
	s.svc.Close()
	s.mux.sqlSrv.prepared.shutdown()
	s.log.Info("stopped")
	return serveErr
}

// connEnded releases what a client connection made.
func (s *Server) connEnded(c *clientConn) {
	if n := s.mux.sqlSrv.prepared.releaseConn(c); n > 0 {
		s.log.Debug("released the prepared statements of a closed connection", "remote", c.remote, "statements", n)
	}
}

func (s *Server) closeListeners() {
	if s.lis != nil {
		s.lis.Close()
	}
	if s.httpLis != nil {
		s.httpLis.Close()
	}
}

// connTracker remembers the accepted connections so that a shutdown whose
// grace period is over can close them: the only way to end a stream blocked
// in gRPC flow control through flight.Server, which does not expose
// grpc.Server.Stop.
type connTracker struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

func (t *connTracker) Accept() (net.Conn, error) {
	c, err := t.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t}
	t.mu.Lock()
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// closeRemote closes the connections from remote address addr (a stalled
// stream's, flow.go); it returns how many it closed.
func (t *connTracker) closeRemote(addr string) int {
	t.mu.Lock()
	var cs []net.Conn
	for c := range t.conns {
		if c.RemoteAddr().String() == addr {
			cs = append(cs, c)
		}
	}
	t.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	return len(cs)
}

func (t *connTracker) closeAll() int {
	t.mu.Lock()
	var cs []net.Conn
	for c := range t.conns {
		cs = append(cs, c)
	}
	t.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	return len(cs)
}
