package serve

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/served"
)

// Metrics are the server's Prometheus metrics, on their own registry (so
// tests can run several servers in one process).
type Metrics struct {
	Registry *prometheus.Registry

	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	inflight    *prometheus.GaugeVec
	rows        *prometheus.CounterVec
	bytes       *prometheus.CounterVec
	snapshotID  *prometheus.GaugeVec
	mapped      *prometheus.GaugeVec
	dsRows      *prometheus.GaugeVec
	dsSeries    *prometheus.GaugeVec
	authFailed  prometheus.Counter
	startedUnix prometheus.Gauge

	reloads        *prometheus.CounterVec
	reloadFailures *prometheus.CounterVec
	reloadDuration *prometheus.HistogramVec
	lastReload     *prometheus.GaugeVec

	buildInfo *prometheus.GaugeVec
	created   *prometheus.GaugeVec

	faults *prometheus.CounterVec
	flow   flowMetrics
	put    putStageMetrics
}

// NewMetrics registers the servingsnap metrics plus the Go and process
// collectors on a new registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "servingsnap_requests_total", Help: "Flight calls by method and gRPC status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "servingsnap_request_duration_seconds",
			Help:    "Flight call duration by method (for DoGet: until the last batch is handed to gRPC).",
			Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"method"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_requests_in_flight", Help: "Flight calls running now, by method.",
		}, []string{"method"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "servingsnap_rows_sent_total", Help: "Rows streamed by DoGet, by dataset.",
		}, []string{"dataset"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "servingsnap_bytes_sent_total", Help: "Arrow IPC bytes (headers and bodies) streamed by DoGet, by dataset.",
		}, []string{"dataset"}),
		snapshotID: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_snapshot_id", Help: "Id of the snapshot being served, by dataset.",
		}, []string{"dataset"}),
		mapped: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_mapped_bytes", Help: "Bytes of the served snapshot's memory-mapped data file, by dataset.",
		}, []string{"dataset"}),
		dsRows: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_dataset_rows", Help: "Rows in the served snapshot, by dataset.",
		}, []string{"dataset"}),
		dsSeries: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_dataset_series", Help: "Series in the served snapshot, by dataset.",
		}, []string{"dataset"}),
		authFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "servingsnap_auth_failures_total", Help: "Calls refused for a missing or wrong token.",
		}),
		startedUnix: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "servingsnap_start_time_seconds", Help: "Unix time the server started.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "servingsnap_reloads_total", Help: "Reloads that opened a new snapshot, by dataset and result (ok: swapped in; error: not served, the previous snapshot stays).",
		}, []string{"dataset", "result"}),
		reloadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "servingsnap_reload_failures_total", Help: "Reloads whose new snapshot failed to open or validate, by dataset (= servingsnap_reloads_total{result=\"error\"}).",
		}, []string{"dataset"}),
		reloadDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "servingsnap_reload_duration_seconds",
			Help:    "Time to open and validate (checksum every file of) a new snapshot, by dataset.",
			Buckets: []float64{1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"dataset"}),
		lastReload: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_last_reload_timestamp_seconds", Help: "Unix time of the last successful reload (swap), by dataset; 0 if none since start-up.",
		}, []string{"dataset"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_build_info", Help: "Always 1; its labels say which build is running.",
		}, []string{"version", "goversion"}),
		created: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "servingsnap_snapshot_created_timestamp_seconds",
			Help: "Unix time the served snapshot was built (its manifest's created), by dataset: time() minus it is the age of the data served.",
		}, []string{"dataset"}),
	}
	m.faults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "servingsnap_faults_total",
		Help: "Damage found in a served snapshot's files, by dataset and kind (memory_fault: a read of a mapping faulted; file_changed: a served file changed size, mtime or inode; corrupt_read: a query found its bytes damaged).",
	}, []string{"dataset", "kind"})
	m.flow = newFlowMetrics()
	r.MustRegister(m.faults)
	m.flow.register(r)
	m.put = newPutStageMetrics()
	m.put.register(r)
	r.MustRegister(m.requests, m.latency, m.inflight, m.rows, m.bytes, m.snapshotID, m.mapped,
		m.dsRows, m.dsSeries, m.authFailed, m.startedUnix,
		m.reloads, m.reloadFailures, m.reloadDuration, m.lastReload, m.buildInfo, m.created,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.startedUnix.SetToCurrentTime()
	return m
}

func (m *Metrics) snapshotServed(v *served.View) {
	name, man := v.Dataset(), v.Manifest()
	m.snapshotID.WithLabelValues(name).Set(float64(v.ID()))
	m.mapped.WithLabelValues(name).Set(float64(v.Snapshot().MappedBytes()))
	m.dsRows.WithLabelValues(name).Set(float64(man.Stats.Rows))
	m.dsSeries.WithLabelValues(name).Set(float64(man.Stats.Series))
	if t, err := time.Parse(time.RFC3339Nano, man.Created); err == nil {
		m.created.WithLabelValues(name).Set(float64(t.UnixNano()) / 1e9)
	}
}

// setBuildInfo sets servingsnap_build_info for this binary.
func (m *Metrics) setBuildInfo(version string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
}

// initReload makes the reload series of a dataset exist at zero, so a
// rate() or an alert on them works before the first reload, and adds the
// gauges read from the dataset's state at scrape time.
func (m *Metrics) initReload(d *served.Dataset) {
	name := d.Name()
	m.reloads.WithLabelValues(name, "ok")
	m.reloads.WithLabelValues(name, "error")
	m.reloadFailures.WithLabelValues(name)
	m.lastReload.WithLabelValues(name).Set(0)
	labels := prometheus.Labels{"dataset": name}
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "servingsnap_reload_failing", ConstLabels: labels,
			Help: "1 while the snapshot CURRENT names is not served because its reload failed, by dataset.",
		}, func() float64 {
			if d.ReloadFailing() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "servingsnap_draining_snapshots", ConstLabels: labels,
			Help: "Replaced snapshots still mapped because in-flight readers hold them, by dataset.",
		}, func() float64 { return float64(d.Draining()) }),
	)
}

// initFault makes a dataset's fault series exist at zero and adds
// servingsnap_dataset_failing, read from its state at scrape time.
func (m *Metrics) initFault(d *served.Dataset) {
	for _, k := range served.FaultKinds {
		m.faults.WithLabelValues(d.Name(), k)
	}
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "servingsnap_dataset_failing", ConstLabels: prometheus.Labels{"dataset": d.Name()},
		Help: "1 while the snapshot CURRENT names is damaged (a fallback snapshot, or nothing, is served), by dataset; status says why.",
	}, func() float64 {
		if d.Failing() {
			return 1
		}
		return 0
	}), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "servingsnap_wal_failing", ConstLabels: prometheus.Labels{"dataset": d.Name()},
		Help: "1 while the dataset takes no writes for a fault: its write-ahead log could not be opened (its snapshot alone is served, read-only) or refuses appends after a failed write (a full disk) until it heals by itself; DoPut is Unavailable; status says why.",
	}, func() float64 {
		if d.WritesFailing() {
			return 1
		}
		return 0
	}))
}

func (m *Metrics) reloaded(dataset string, ok bool, dur time.Duration) {
	if ok {
		m.reloads.WithLabelValues(dataset, "ok").Inc()
		m.lastReload.WithLabelValues(dataset).SetToCurrentTime()
	} else {
		m.reloads.WithLabelValues(dataset, "error").Inc()
		m.reloadFailures.WithLabelValues(dataset).Inc()
	}
	if dur > 0 {
		m.reloadDuration.WithLabelValues(dataset).Observe(dur.Seconds())
	}
}

func (m *Metrics) sent(dataset string, rows, bytes int64) {
	m.rows.WithLabelValues(dataset).Add(float64(rows))
	m.bytes.WithLabelValues(dataset).Add(float64(bytes))
}

// methodName turns "/arrow.flight.protocol.FlightService/DoGet" into "DoGet".
func methodName(full string) string {
	if i := strings.LastIndexByte(full, '/'); i >= 0 {
		return full[i+1:]
	}
	return full
}

// observe records one finished call.
func (m *Metrics) observe(method string, start time.Time, err error) {
	m.requests.WithLabelValues(method, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

// callMiddleware counts, times and logs every call (m may be nil). It is
// the outermost middleware, so refused (unauthenticated) calls are counted
// and logged too. A failed call gets a request id: the log line keeps the
// full message, the client gets it redacted (redact.go) and ending with
// the id, which the call's trailer also carries (requestIDKey).
func callMiddleware(m *Metrics, log *slog.Logger, onPanic func(where string, r any) error, red *redactor) flight.ServerMiddleware {
	ids := newRequestIDs()
	done := func(ctx context.Context, method string, start time.Time, err error, trailer func(metadata.MD) error) error {
		if m != nil {
			m.observe(method, start, err)
		}
		code := status.Code(err)
		lvl := slog.LevelDebug
		switch code {
		case codes.OK, codes.Canceled:
		case codes.Internal, codes.Unknown, codes.DataLoss:
			lvl = slog.LevelError
		default:
			lvl = slog.LevelInfo
		}
		var id, full string
		if err != nil {
			id, full = ids.next(), status.Convert(err).Message()
			var redacted bool
			err, redacted = red.clientError(err, id)
			if redacted {
				lvl = max(lvl, slog.LevelWarn) // the log is the only place the detail is kept
			}
			trailer(metadata.Pairs(requestIDKey, id))
		}
		if log.Enabled(ctx, lvl) {
			attrs := []slog.Attr{slog.String("method", method), slog.String("code", code.String()),
				slog.Float64("ms", float64(time.Since(start).Microseconds())/1000)}
			if p, ok := peer.FromContext(ctx); ok {
				attrs = append(attrs, slog.String("peer", p.Addr.String()))
			}
			if err != nil {
				attrs = append(attrs, slog.String("request_id", id), slog.String("error", full))
			}
			log.LogAttrs(ctx, lvl, "call", attrs...)
		}
		return err
	}
	inflight := func(method string) prometheus.Gauge {
		if m == nil {
			return nopGauge{}
		}
		return m.inflight.WithLabelValues(method)
	}
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			method := methodName(info.FullMethod)
			start := time.Now()
			g := inflight(method)
			g.Inc()
			resp, err := recovered(log, method, onPanic, func() (any, error) { return handler(ctx, req) })
			g.Dec()
			err = done(ctx, method, start, err, func(md metadata.MD) error { return grpc.SetTrailer(ctx, md) })
			return resp, err
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			method := methodName(info.FullMethod)
			start := time.Now()
			g := inflight(method)
			g.Inc()
			_, err := recovered(log, method, onPanic, func() (any, error) { return nil, handler(srv, ss) })
			g.Dec()
			return done(ss.Context(), method, start, err, func(md metadata.MD) error { ss.SetTrailer(md); return nil })
		},
	}
}

// requestIDKey is the trailer key of a failed call's request id.
const requestIDKey = "servingsnap-request-id"

// recovered runs a handler and turns a panic into an Internal error (logged
// with its stack) instead of a crash of the whole server. The handler runs
// with debug.SetPanicOnFault, so a fault reading a mapped file (SIGBUS on
// a file truncated under the server) is such a panic too; onPanic (nil:
// none) turns it into the error the client gets and marks the dataset
// failing (fault.go).
func recovered(log *slog.Logger, method string, onPanic func(string, any) error, f func() (any, error)) (resp any, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			log.Error("panic in handler", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "internal error in %s: %v", method, r)
			if onPanic != nil {
				if e := onPanic(method, r); e != nil {
					resp, err = nil, toStatus(e)
				}
			}
		}
	}()
	return f()
}

type nopGauge struct{ prometheus.Gauge }

func (nopGauge) Inc() {}
func (nopGauge) Dec() {}

// registerColdCache adds the cold-cache series (--cold-cache), read from
// the cache's counters at scrape time. They exist at zero when the cache
// is disabled, so dashboards and alerts need no special case.
func (m *Metrics) registerColdCache(c *coldfile.Cache) {
	stat := func(f func(coldfile.CacheStats) int64) func() float64 {
		return func() float64 {
			if c == nil {
				return 0
			}
			return float64(f(c.Stats()))
		}
	}
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "servingsnap_cold_cache_bytes",
			Help: "Bytes of decoded cold rows (tiered snapshots' cold.vortex) held by the server's cache, shared by every dataset.",
		}, stat(func(s coldfile.CacheStats) int64 { return s.Used })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "servingsnap_cold_cache_budget_bytes",
			Help: "The cold cache's budget (--cold-cache); 0: disabled, every cold read decodes.",
		}, stat(func(s coldfile.CacheStats) int64 { return s.Budget })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "servingsnap_cold_cache_hits_total",
			Help: "Cold-row reads answered from the cold cache without decoding.",
		}, stat(func(s coldfile.CacheStats) int64 { return s.Hits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "servingsnap_cold_cache_misses_total",
			Help: "Cold-row reads that decoded a series' cold rows from cold.vortex (with the cache disabled: none are counted).",
		}, stat(func(s coldfile.CacheStats) int64 { return s.Misses })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "servingsnap_cold_cache_evictions_total",
			Help: "Decoded cold series dropped from the cold cache to stay under its budget (least recently used first).",
		}, stat(func(s coldfile.CacheStats) int64 { return s.Evictions })),
	)
}

// liveCollector exports every dataset's live-write state at scrape time.
type liveCollector struct{ s *Service }

var (
	descDeltaRows   = prometheus.NewDesc("servingsnap_delta_rows", "Rows of live writes held in memory (revisions included), by dataset.", []string{"dataset"}, nil)
	descDeltaBytes  = prometheus.NewDesc("servingsnap_delta_bytes", "Memory the live writes' rows hold, by dataset.", []string{"dataset"}, nil)
	descDeltaRuns   = prometheus.NewDesc("servingsnap_delta_runs", "Sorted runs merged on read, by dataset.", []string{"dataset"}, nil)
	descWALBytes    = prometheus.NewDesc("servingsnap_wal_bytes", "Size of the write-ahead log's segments, by dataset.", []string{"dataset"}, nil)
	descWrites      = prometheus.NewDesc("servingsnap_writes_total", "DoPut batches acknowledged, by dataset.", []string{"dataset"}, nil)
	descWriteRows   = prometheus.NewDesc("servingsnap_write_rows_total", "Rows acknowledged by DoPut, by dataset.", []string{"dataset"}, nil)
	descFsync       = prometheus.NewDesc("servingsnap_wal_fsync_seconds_total", "Time spent in WAL appends and fsyncs, by dataset (divide by servingsnap_wal_commits_total for the mean).", []string{"dataset"}, nil)
	descCommits     = prometheus.NewDesc("servingsnap_wal_commits_total", "Group commits (one append and one fsync each), by dataset.", []string{"dataset"}, nil)
	descCompactions = prometheus.NewDesc("servingsnap_compactions_total", "Compactions that published a snapshot, by dataset.", []string{"dataset"}, nil)
	descCompactSecs = prometheus.NewDesc("servingsnap_compaction_seconds_total", "Time spent compacting, by dataset.", []string{"dataset"}, nil)
)

func (c liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDeltaRows, descDeltaBytes, descDeltaRuns, descWALBytes, descWrites, descWriteRows, descFsync, descCommits, descCompactions, descCompactSecs} {
		ch <- d
	}
}

func (c liveCollector) Collect(ch chan<- prometheus.Metric) {
	for _, name := range c.s.names {
		ls, ok := c.s.datasets[name].LiveStats()
		if !ok {
			continue
		}
		for _, m := range []struct {
			d *prometheus.Desc
			t prometheus.ValueType
			v float64
		}{
			{descDeltaRows, prometheus.GaugeValue, float64(ls.Rows)},
			{descDeltaBytes, prometheus.GaugeValue, float64(ls.Bytes)},
			{descDeltaRuns, prometheus.GaugeValue, float64(ls.Runs)},
			{descWALBytes, prometheus.GaugeValue, float64(ls.WALBytes)},
			{descWrites, prometheus.CounterValue, float64(ls.Writes)},
			{descWriteRows, prometheus.CounterValue, float64(ls.WriteRows)},
			{descFsync, prometheus.CounterValue, ls.FsyncTotal.Seconds()},
			{descCommits, prometheus.CounterValue, float64(ls.Commits)},
			{descCompactions, prometheus.CounterValue, float64(ls.Compactions)},
			{descCompactSecs, prometheus.CounterValue, ls.CompactSeconds},
		} {
			ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v, name)
		}
	}
}
