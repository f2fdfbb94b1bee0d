package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/bufpool"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/serve/flightenc"
	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// Limits bound what one request may cost. Zero disables a limit.
type Limits struct {
	MaxTicketBytes int   // ticket / command size
	MaxSeries      int   // series per request (listed or matched)
	MaxRows        int64 // rows per response
	// BatchBytes is the target size of one record batch message; slices
	// larger are split and small ones coalesced up to it. Keep it well under
	// the clients' gRPC receive limit (4 MiB by default in Go and Java).
	BatchBytes int64
	// MaxPutRows bounds the rows of one DoPut record batch.
	MaxPutRows int64
	// MaxPutBytes bounds the bytes of record batches all DoPuts hold at
	// once (checked, normalized, waiting for the WAL): more waits, up to
	// 30 s, then is ResourceExhausted.
	MaxPutBytes int64

	// Flow control for slow clients (flow.go). MaxInFlightBytes is the
	// budget of bytes all DoGet streams may hold in the transport at once,
	// shared between small and large answers and among clients; a stream
	// that finds no room waits up to StreamTimeout, then is
	// ResourceExhausted. StreamTimeout ends a stream whose Send made no
	// progress that long. LeaseTimeout ends a stream still reading a
	// snapshot replaced that long ago.
	MaxInFlightBytes int64
	StreamTimeout    time.Duration
	LeaseTimeout     time.Duration

	// Flight SQL prepared statements (prepared.go): the bytes (text,
	// parsed form, bound parameters, a fixed overhead each) all of them
	// may hold, and those of one connection; PreparedTTL releases one
	// unused that long. A connection's statements are released when it
	// ends.
	MaxPreparedBytes          int64
	MaxPreparedBytesPerClient int64
	PreparedTTL               time.Duration
}

// DefaultLimits are the limits of `snapbuild serve` without flags.
var DefaultLimits = Limits{
	MaxTicketBytes: 1 << 20,
	MaxSeries:      100_000,
	MaxRows:        20_000_000,
	BatchBytes:     2 << 20,
	MaxPutRows:     1 << 20,
	MaxPutBytes:    256 << 20,

	MaxInFlightBytes: 128 << 20,
	StreamTimeout:    30 * time.Second,
	LeaseTimeout:     5 * time.Minute,

	MaxPreparedBytes:          64 << 20,
	MaxPreparedBytesPerClient: 16 << 20,
	PreparedTTL:               15 * time.Minute,
}

// Service implements the Flight service over the datasets of a root
// directory. It is safe for concurrent use.
type Service struct {
	flight.BaseFlightServer

	root     string
	host     *served.Root
	datasets map[string]*served.Dataset // the host's, by name
	names    []string                   // sorted
	limits   Limits
	log      *slog.Logger
	metrics  *Metrics
	mem      memory.Allocator
	answers  memory.Allocator // a DoGet's batches and IPC buffers (see answerBuffers)
	started  time.Time
	version  string

	// stopping is cancelled (cause errShuttingDown) when in-flight streams
	// must end now: the graceful-shutdown deadline passed.
	stopping context.Context
	stopNow  context.CancelCauseFunc

	flow *flowControl // DoGet budget, stalled streams, leases (flow.go)

	putSem   *semaphore.Weighted // bytes of DoPut batches in flight
	readOnly bool                // --read-only: a replica

	reloadInterval time.Duration
	closeOnce      sync.Once

	shards shardState // sharded datasets (shards.go)

	cold *coldfile.Cache // decoded cold rows of every tiered snapshot; nil: none

	redact *redactor // cuts the root out of what clients are sent (redact.go)

	prefetch *prefetcher // the start-up read-ahead (prefetch.go); nil: none
}

// Options configure Open.
type Options struct {
	Limits     Limits
	VerifyData bool // checksum every data file at open (reads every byte)
	Logger     *slog.Logger
	Metrics    *Metrics // nil: none
	Version    string
	// ReloadInterval is how often each dataset's CURRENT is read; a new id
	// is opened, validated and swapped in (see dataset.reload). 0: never
	// (only the reload action reloads).
	ReloadInterval time.Duration
	// Allocator is what every request allocates its answer from (nil:
	// memory.DefaultAllocator, and answerBuffers for DoGet's answers).
	// Tests pass a checked allocator to prove answers release everything.
	Allocator memory.Allocator
	// ReadOnly refuses DoPut (PermissionDenied) and never takes a dataset's
	// write-ahead log: each dataset follows the writer's log read-only.
	ReadOnly bool
	// FollowInterval is how often a following dataset reads its log (0:
	// served.DefaultFollowInterval).
	FollowInterval time.Duration
	// Compact is when the server compacts by itself (zero: only the
	// compact action and `snapbuild compact` do).
	Compact CompactPolicy
	// Shards, if not nil, are the shard indexes served of every sharded
	// dataset under the root (nil: every shard found); Cluster says where
	// the others are (shards.go).
	Shards  []int
	Cluster *shard.Cluster
	// LocationCheckInterval is how often the cluster file's locations are
	// health-checked (locations.go); 0: DefaultLocationCheckInterval, < 0:
	// never (every location is listed). LocationCheckTimeout bounds one
	// check (0: DefaultLocationCheckTimeout).
	LocationCheckInterval time.Duration
	LocationCheckTimeout  time.Duration
	// Vintages is how many retained vintages besides the live one each
	// dataset keeps open for tickets and statements that name one
	// (served.Options.Vintages: 0 the default, < 0 none).
	Vintages int
	// ColdCacheBytes is the memory budget of decoded cold rows, one LRU
	// (coldfile.Cache) for every tiered snapshot the server opens (at
	// start-up, reload, fallback and compaction), so the budget bounds
	// them all; 0 (or less): no cache, every cold read decodes.
	ColdCacheBytes int64
	// PrefetchBytes bounds what is read into the page cache in the
	// background at start (prefetch.go): the current snapshots' indexes,
	// then their data files, each whole or not at all. PrefetchAuto: a
	// quarter of MemAvailable; 0: nothing.
	PrefetchBytes int64
}

// Open discovers the datasets under root (each a directory with a valid
// dataset name and a CURRENT file; symlinks to directories are followed)
// and opens each one's current snapshot: maps its files and reads its index,
// nothing per row. A dataset directory without CURRENT (never published) is
// skipped with a log line; a snapshot that fails to open or validate is an
// error, so a server never starts with a dataset silently missing.
func Open(root string, opt Options) (*Service, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	answers := opt.Allocator
	if opt.Allocator == nil {
		opt.Allocator, answers = memory.DefaultAllocator, &answerBuffers
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("serve: root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("serve: root %s is not a directory", root)
	}
	s := &Service{
		root: root, datasets: map[string]*served.Dataset{}, limits: opt.Limits, log: opt.Logger,
		metrics: opt.Metrics, mem: opt.Allocator, answers: answers, started: time.Now(), version: opt.Version,
		reloadInterval: opt.ReloadInterval, readOnly: opt.ReadOnly, redact: newRedactor(root),
	}
	if opt.ColdCacheBytes > 0 {
		s.cold = coldfile.NewCache(opt.ColdCacheBytes)
	}
	s.stopping, s.stopNow = context.WithCancelCause(context.Background())
	putBytes := opt.Limits.MaxPutBytes
	if putBytes <= 0 {
		putBytes = math.MaxInt64
	}
	s.putSem = semaphore.NewWeighted(putBytes)
	var fm *flowMetrics
	if s.metrics != nil {
		fm = &s.metrics.flow
	}
	s.flow = newFlowControl(opt.Limits, s.log, fm)
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	skip, err := s.findShardMaps(root, ents, opt)
	if err != nil {
		return nil, err
	}
	hooks := served.Hooks{}
	if m := s.metrics; m != nil {
		hooks = served.Hooks{Swapped: m.snapshotServed, Reloaded: m.reloaded,
			Fault: func(name, kind string) { m.faults.WithLabelValues(name, kind).Inc() }}
	}
	s.host, err = served.OpenRoot(root, served.RootOptions{
		Options: served.Options{VerifyData: opt.VerifyData, ColdCache: s.cold, Logger: s.log,
			Version: s.version, ReadOnly: opt.ReadOnly, Hooks: hooks, Vintages: opt.Vintages},
		Skip:           func(name string) bool { return skip[name] },
		ReloadInterval: opt.ReloadInterval,
		Compact:        opt.Compact,
		FollowInterval: opt.FollowInterval,
	})
	if err != nil {
		return nil, err
	}
	for _, name := range s.host.Names() {
		d, _ := s.host.Dataset(name)
		s.datasets[name] = d
		s.names = append(s.names, name)
		if m := s.metrics; m != nil {
			m.initReload(d)
			m.initFault(d)
		}
	}
	sort.Strings(s.names)
	if err := s.linkShards(opt); err != nil {
		s.Close()
		return nil, err
	}
	s.startLocationChecks(opt)
	if m := s.metrics; m != nil {
		m.Registry.MustRegister(liveCollector{s})
		m.registerColdCache(s.cold)
	}
	s.host.Start()
	s.startPrefetch(opt.PrefetchBytes)
	return s, nil
}

// ReloadResult is one dataset's answer to a reload (served.ReloadResult).
type ReloadResult = served.ReloadResult

// Reload outcomes.
const (
	ReloadUnchanged = served.ReloadUnchanged
	ReloadSwapped   = served.ReloadSwapped
	ReloadFailed    = served.ReloadFailed
	ReloadSkipped   = served.ReloadSkipped
)

// Reload checks the CURRENT of one dataset (name) or of all (name ""), and
// serves each new snapshot once it is open and validated. Failures leave
// the previous snapshot served; they are in the results, the log, status
// and the metrics. An unknown dataset is a NotFound error.
func (s *Service) Reload(name string) ([]ReloadResult, error) {
	names := s.names
	if sd := s.shards.sharded[name]; sd != nil {
		names = sd.localNames() // a sharded dataset: the shards held here
	} else if name != "" {
		if _, err := s.lookup(name); err != nil {
			return nil, err
		}
		names = []string{name}
	}
	out := make([]ReloadResult, 0, len(names))
	for _, n := range names {
		out = append(out, s.datasets[n].Reload(true))
	}
	return out, nil
}

// Close stops reloading and drops the service's references on every
// snapshot. Streams still running keep theirs until they end.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		s.stopPrefetch()
		s.flow.close()
		if s.host != nil {
			s.host.Close()
		}
		s.closeRemotes()
		if c := s.shards.checker; c != nil {
			c.stop()
		}
	})
}

// Datasets lists the served dataset names.
func (s *Service) Datasets() []string { return append([]string(nil), s.names...) }

func (s *Service) lookup(name string) (*served.Dataset, error) {
	if err := manifest.ValidateDatasetName(name); err != nil {
		return nil, errf(codes.InvalidArgument, "%v", err)
	}
	d, ok := s.datasets[name]
	if !ok && s.shards.sharded[name] != nil {
		return nil, s.wholeNotAllowed(name)
	}
	if !ok {
		return nil, errf(codes.NotFound, "dataset %q not found (serving: %s)", name, strings.Join(s.names, ", "))
	}
	return d, nil
}

func (s *Service) acquire(name string) (*served.View, error) {
	d, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	return d.Acquire()
}

// acquireFor is the view a query reads: the dataset's live view, or with
// vintage != 0 that retained vintage as published (opened on first use,
// kept in the dataset's bounded cache; served.Dataset.AcquireVintage).
func (s *Service) acquireFor(name string, vintage uint64) (*served.View, error) {
	if vintage == 0 {
		return s.acquire(name)
	}
	d, err := s.lookup(name)
	if err != nil {
		return nil, err
	}
	v, err := d.AcquireVintage(vintage)
	switch {
	case errors.Is(err, served.ErrNoVintage):
		return nil, errf(codes.NotFound, "%v", err)
	case errors.Is(err, served.ErrVintagesOff):
		return nil, errf(codes.FailedPrecondition, "%v", err)
	}
	return v, err
}

// ticketFor is the ticket of a whole dataset: every series.
func ticketFor(name string) []byte {
	b, _ := json.Marshal(map[string]string{"dataset": name, "prefix": ""})
	return b
}

func (s *Service) datasetInfo(v *served.View, desc *flight.FlightDescriptor) *flight.FlightInfo {
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(v.DefaultSchema(), s.mem),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: ticketFor(v.Dataset())}}},
		TotalRecords:     v.Reader().Info().Rows,
		TotalBytes:       -1,
		Ordered:          true,
		AppMetadata:      appMetadata(v),
	}
}

func appMetadata(v *served.View) []byte {
	b, _ := json.Marshal(map[string]any{"dataset": v.Dataset(), "snapshot_id": v.ID()})
	return b
}

// ListFlights returns one FlightInfo per dataset. Criteria, when not empty,
// is a dataset name prefix, or a JSON object {"vintages": true, "prefix":
// P}: then one FlightInfo per retained vintage of each dataset (listVintages).
func (s *Service) ListFlights(c *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	prefix := string(c.GetExpression())
	if strings.HasPrefix(strings.TrimSpace(prefix), "{") {
		var crit struct {
			Vintages bool   `json:"vintages"`
			Prefix   string `json:"prefix"`
		}
		dec := json.NewDecoder(strings.NewReader(prefix))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&crit); err != nil || !crit.Vintages {
			return toStatus(invalid("list criteria: want a dataset name prefix or {\"vintages\": true, \"prefix\": \"P\"}"))
		}
		return s.listVintages(crit.Prefix, stream)
	}
	for _, name := range s.visible(stream.Context(), s.names) {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		v, err := s.datasets[name].Acquire()
		if err != nil {
			continue
		}
		info := s.datasetInfo(v, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}})
		v.Release()
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return s.listSharded(stream.Context(), prefix, stream)
}

// listVintages sends one FlightInfo per retained vintage of every dataset
// whose name starts with prefix, oldest first: a command descriptor and
// endpoint ticket reading the whole vintage ({"dataset", "prefix": "",
// "vintage": N}), its row count from the manifest, and app_metadata with
// dataset, snapshot_id, parent_id, created, series and current. Listing
// opens nothing: the schema is the served snapshot's for the current
// vintage and empty for the others (GetFlightInfo of the descriptor opens
// the vintage and gives its own).
func (s *Service) listVintages(prefix string, stream flight.FlightService_ListFlightsServer) error {
	for _, name := range s.visible(stream.Context(), s.names) {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		dir, err := dsdir.Open(s.datasets[name].Dir())
		if err != nil {
			return toStatus(err)
		}
		vs, err := dir.Vintages()
		if err != nil {
			return toStatus(err)
		}
		live, err := s.datasets[name].Acquire()
		if err != nil {
			continue
		}
		liveID, liveSchema := live.ID(), live.DefaultSchema()
		live.Release()
		for _, vt := range vs {
			if vt.Error != "" {
				continue
			}
			tkt, _ := json.Marshal(map[string]any{"dataset": name, "prefix": "", "vintage": vt.ID})
			md, _ := json.Marshal(map[string]any{"dataset": name, "snapshot_id": vt.ID, "parent_id": vt.Parent,
				"created": vt.Created, "series": vt.Series, "current": vt.Current, "served": vt.ID == liveID})
			sc := arrow.NewSchema(nil, nil)
			if vt.ID == liveID {
				sc = liveSchema
			}
			info := &flight.FlightInfo{
				Schema:           flight.SerializeSchema(sc, s.mem),
				FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: tkt},
				Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
				TotalRecords:     vt.Rows,
				TotalBytes:       -1,
				Ordered:          true,
				AppMetadata:      md,
			}
			if err := stream.Send(info); err != nil {
				return err
			}
		}
	}
	return nil
}

// GetFlightInfo describes a dataset (path descriptor [dataset]) or a query
// (command descriptor holding a ticket): schema, exact record count,
// and one endpoint whose ticket runs it on this server.
func (s *Service) GetFlightInfo(ctx context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	info, _, err := s.describe(ctx, desc)
	return info, toStatus(err)
}

// GetSchema is GetFlightInfo's schema alone.
func (s *Service) GetSchema(ctx context.Context, desc *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	_, sc, err := s.describe(ctx, desc)
	if err != nil {
		return nil, toStatus(err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sc, s.mem)}, nil
}

func (s *Service) describe(ctx context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, *arrow.Schema, error) {
	switch desc.GetType() {
	case flight.DescriptorPATH:
		if len(desc.Path) != 1 {
			return nil, nil, errf(codes.InvalidArgument, "path descriptor must be [dataset], got %d elements", len(desc.Path))
		}
		if err := s.permitDataset(ctx, desc.Path[0]); err != nil {
			return nil, nil, err
		}
		if s.shards.sharded[desc.Path[0]] != nil {
			return s.shardedInfo(ctx, wholeQuery(desc.Path[0]), ticketFor(desc.Path[0]), desc)
		}
		v, err := s.acquire(desc.Path[0])
		if err != nil {
			return nil, nil, err
		}
		defer v.Release()
		return s.datasetInfo(v, desc), v.DefaultSchema(), nil
	case flight.DescriptorCMD:
		q, err := ParseTicket(desc.Cmd, s.limits.MaxTicketBytes, s.limits.MaxSeries)
		if err != nil {
			return nil, nil, err
		}
		if err := s.permitDataset(ctx, q.Dataset); err != nil {
			return nil, nil, err
		}
		if q.Vintage != 0 && s.isShardQuery(q) {
			return nil, nil, invalid("\"vintage\" on sharded dataset %q: each shard is a dataset with its own vintages; name the shard's dataset", q.Dataset)
		}
		if s.isShardQuery(q) {
			return s.shardedInfo(ctx, q, desc.Cmd, desc)
		}
		v, err := s.acquireFor(q.Dataset, q.Vintage)
		if err != nil {
			return nil, nil, err
		}
		defer v.Release()
		p, err := s.plan(v, q)
		if err != nil {
			s.noteReadError(q.Dataset, v.ID(), err)
			return nil, nil, err
		}
		info := &flight.FlightInfo{
			Schema:           flight.SerializeSchema(p.Schema(), s.mem),
			FlightDescriptor: desc,
			Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
			TotalRecords:     p.Rows(),
			TotalBytes:       -1,
			Ordered:          true,
			AppMetadata:      appMetadata(v),
		}
		return info, p.Schema(), nil
	default:
		return nil, nil, errf(codes.InvalidArgument, "descriptor type %v not supported: use a path [dataset] or a command holding a JSON query", desc.GetType())
	}
}

// countingStream counts what a DoGet sends, and tells the flow watchdog
// when a Send is in progress (flow.go). It also encodes the answer's IPC
// messages, each sent as one FlightData: flat schemas (every answer of a
// snapshot's columns) through its flightenc.Writer, whose builder and body
// buffer are kept with the stream in a pool across requests; any other
// schema through arrow-go's ipc.Writer, with the stream as its payload
// writer and the body assembled in the pooled buffer (gRPC has serialised
// a message when Send returns).
type countingStream struct {
	flight.FlightService_DoGetServer
	bytes int64
	flow  *streamFlow
	fd    flight.FlightData
	body  bytes.Buffer
	enc   flightenc.Writer
	w     recordWriter // the stream's writer: &enc or an ipc.Writer
	// write is w.Write, made once per pooled stream (a method value of
	// an interface allocates each time it is taken).
	write func(arrow.RecordBatch) error
	stop  stopContext // the context the read layer polls, passed by address
}

// recordWriter is what streams an answer's batches: a flightenc.Writer or
// an ipc.Writer.
type recordWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// writer returns the stream's IPC writer for schema.
func (c *countingStream) writer(schema *arrow.Schema, mem memory.Allocator) (recordWriter, error) {
	if flightenc.Flat(schema) {
		if err := c.enc.Reset(c, schema); err != nil {
			return nil, err
		}
		c.w = &c.enc
		return c.w, nil
	}
	c.w = ipc.NewWriterWithPayloadWriter(c, ipc.WithSchema(schema), ipc.WithAllocator(mem), ipc.WithDictionaryDeltas(true))
	return c.w, nil
}

// SendMessage sends one encoded IPC message (flightenc.Sink).
func (c *countingStream) SendMessage(header, body []byte) error {
	c.fd.DataHeader, c.fd.DataBody = header, body
	err := c.Send(&c.fd)
	c.fd.DataHeader, c.fd.DataBody = nil, nil
	return err
}

var countingStreams = sync.Pool{New: func() any {
	c := new(countingStream)
	c.write = func(rec arrow.RecordBatch) error { return c.w.Write(rec) }
	return c
}}

// maxPooledBody is the largest body buffer put back in the pool: a large
// answer's buffer is left to the GC rather than held by an idle stream.
const maxPooledBody = 4 << 20

func newCountingStream(stream flight.FlightService_DoGetServer, fl *streamFlow) *countingStream {
	c := countingStreams.Get().(*countingStream)
	c.FlightService_DoGetServer, c.flow, c.bytes = stream, fl, 0
	return c
}

// free puts c back in the pool; c is not used afterwards.
func (c *countingStream) free() {
	c.FlightService_DoGetServer, c.flow, c.w, c.stop = nil, nil, nil, stopContext{}
	c.fd = flight.FlightData{}
	if c.body.Cap() > maxPooledBody {
		c.body = bytes.Buffer{}
	}
	c.body.Reset()
	countingStreams.Put(c)
}

func (c *countingStream) Start() error { return nil }
func (c *countingStream) Close() error { return nil }

// WritePayload sends one IPC message (ipc.PayloadWriter).
func (c *countingStream) WritePayload(p ipc.Payload) error {
	m := p.Meta()
	defer m.Release()
	c.body.Reset()
	if err := p.SerializeBody(&c.body); err != nil {
		return err
	}
	c.fd.DataHeader, c.fd.DataBody = m.Bytes(), c.body.Bytes()
	err := c.Send(&c.fd)
	c.fd.DataHeader, c.fd.DataBody = nil, nil
	return err
}

func (c *countingStream) Send(d *flight.FlightData) error {
	c.bytes += int64(len(d.DataHeader) + len(d.DataBody) + len(d.AppMetadata))
	c.flow.sendStart.Store(time.Now().UnixNano())
	err := c.FlightService_DoGetServer.Send(d)
	c.flow.sendStart.Store(0)
	if err != nil && c.flow.cut.Load() {
		return errf(codes.DeadlineExceeded, "stream ended: %v", c.flow.why.Load())
	}
	return err
}

// DoGet runs a ticket and streams its rows. The snapshot is pinned for the
// duration of the stream: every slice points into its mapping until the
// Flight writer has copied it into the gRPC message.
func (s *Service) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	err := s.doGet(t, stream)
	return toStatus(err)
}

func (s *Service) doGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	q, err := ParseTicket(t.GetTicket(), s.limits.MaxTicketBytes, s.limits.MaxSeries)
	if err != nil {
		return err
	}
	if err := s.permitDataset(stream.Context(), q.Dataset); err != nil {
		return err
	}
	if q.Vintage != 0 && s.isShardQuery(q) {
		return invalid("\"vintage\" on sharded dataset %q: each shard is a dataset with its own vintages; name the shard's dataset", q.Dataset)
	}
	if s.isShardQuery(q) {
		return s.shardedDoGet(q, stream)
	}
	v, err := s.acquireFor(q.Dataset, q.Vintage)
	if err != nil {
		return err
	}
	defer v.Release()
	p, err := s.plan(v, q)
	if err != nil {
		s.noteReadError(q.Dataset, v.ID(), err)
		return err
	}
	return s.stream(v, p, stream)
}

// stream sends a plan's rows on a DoGet stream (plain tickets and Flight
// SQL statements alike), with v pinned by the caller.
func (s *Service) stream(v *served.View, p *query.Plan, stream flight.FlightService_DoGetServer) error {
	budget := s.limits.BatchBytes
	if budget <= 0 {
		budget = DefaultLimits.BatchBytes
	}
	fl, err := s.flow.begin(stream.Context(), s.datasets[v.Dataset()], v, reserveFor(p, budget))
	if err != nil {
		return err
	}
	defer s.flow.end(fl)
	defer s.prefetch.answer()
	// The stream ends early when the client goes away, the shutdown
	// deadline passes or its lease expires: the read layer polls all three
	// through one context.
	cs := newCountingStream(stream, fl)
	defer cs.free()
	cs.stop = stopContext{Context: stream.Context(), stop: s.stopping, flow: fl}
	w, err := cs.writer(p.Schema(), s.answers)
	if err != nil {
		return err
	}
	st, err := p.Stream(&cs.stop, s.answers, budget, cs.write)
	if err != nil && cs.stop.Err() != nil {
		err = contextError(cs.stop)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if s.metrics != nil {
		s.metrics.sent(v.Dataset(), st.Rows, cs.bytes)
	}
	if err != nil {
		s.noteReadError(v.Dataset(), v.ID(), err)
		return err
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) { // its arguments cost allocations
		s.log.Debug("doget", "dataset", v.Dataset(), "snapshot_id", v.ID(), "series", p.Series(),
			"rows", st.Rows, "batches", st.Batches, "bytes", cs.bytes)
	}
	return nil
}

// answerBuffers is what DoGet builds its answers from when the server was
// given no allocator: the batches a plan assembles (a latest-values answer's
// ids, periods and values, a merge's columns) and the IPC writer's buffers
// live only until the stream has sent them, and every one is released, so
// the next request takes them back instead of allocating afresh. Fresh
// buffers were most of what a latest-values request allocated, and what the
// collector ran for: a collection every few dozen such requests with the
// server's few-MiB heap. The delta's buffers (DoPut) stay on the Go
// allocator: they live long, and a pool's power-of-two sizes would waste
// up to half of them.
var answerBuffers bufpool.Recycler

// errShuttingDown is the cause of a stream cut by the shutdown deadline.
var errShuttingDown = errors.New("server shutting down")

// stopContext is a stream's context that also ends, for Err, when the
// shutdown deadline passes. The read layer only polls Err between batches,
// so it needs no goroutine or registration per request (a derived
// cancellable context cost a few allocations and ~1 µs a DoGet).
type stopContext struct {
	context.Context
	stop context.Context
	flow *streamFlow // nil: no lease
}

func (c stopContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.stop.Err() != nil {
		return errShuttingDown
	}
	if c.flow != nil && c.flow.expired.Load() {
		return errLeaseExpired
	}
	return nil
}

// contextError is why a stream's context ended, as a status.
func contextError(ctx context.Context) error {
	if errors.Is(ctx.Err(), errShuttingDown) {
		return errf(codes.Unavailable, "server shutting down")
	}
	if errors.Is(ctx.Err(), errLeaseExpired) {
		sc, _ := ctx.(stopContext)
		id := uint64(0)
		if sc.flow != nil {
			id = sc.flow.v.ID()
		}
		return errf(codes.Unavailable, "stream ended: snapshot %d was replaced longer ago than the lease timeout (--lease-timeout); retry to read the snapshot served now", id)
	}
	return status.FromContextError(ctx.Err()).Err()
}

// plan resolves a ticket against a view through the read layer.
func (s *Service) plan(v *served.View, q *Query) (*query.Plan, error) {
	req := q.Request()
	return query.NewPlan(v.Reader(), &req, query.Limits{MaxSeries: s.limits.MaxSeries, MaxRows: s.limits.MaxRows})
}

// DatasetStatus is one dataset in the status action's answer.
type DatasetStatus = served.DatasetStatus

// DeltaStatus is a dataset's live-write state in DatasetStatus.
type DeltaStatus = served.DeltaStatus

// Status is the answer of the status action.
type Status struct {
	Version       string  `json:"version"`
	Started       string  `json:"started"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	MappedBytes   int64   `json:"mapped_bytes"`
	// ReloadIntervalSeconds is how often CURRENT is polled; 0: only the
	// reload action reloads.
	ReloadIntervalSeconds float64 `json:"reload_interval_seconds"`
	// ColdCache is the cache of decoded cold rows every tiered snapshot
	// shares (--cold-cache); absent when disabled.
	ColdCache *ColdCacheStatus `json:"cold_cache,omitempty"`
	Datasets  []DatasetStatus  `json:"datasets"`
	// Locations are the cluster file's shard locations and what their
	// last health check found (absent without a cluster file).
	Locations []LocationStatus `json:"locations,omitempty"`
}

// ColdCacheStatus is the cold cache's state (coldfile.CacheStats).
type ColdCacheStatus struct {
	BudgetBytes int64 `json:"budget_bytes"`
	UsedBytes   int64 `json:"used_bytes"`
	Entries     int64 `json:"entries"` // decoded series held
	Hits        int64 `json:"hits"`
	Misses      int64 `json:"misses"`
	Evictions   int64 `json:"evictions"`
}

// Status reports the served snapshots.
func (s *Service) Status() Status {
	st := Status{
		Version: s.version, Started: s.started.UTC().Format(time.RFC3339Nano),
		UptimeSeconds: time.Since(s.started).Seconds(), Datasets: []DatasetStatus{},
		ReloadIntervalSeconds: s.reloadInterval.Seconds(),
	}
	if s.cold != nil {
		c := s.cold.Stats()
		st.ColdCache = &ColdCacheStatus{BudgetBytes: c.Budget, UsedBytes: c.Used, Entries: c.Entries, Hits: c.Hits, Misses: c.Misses, Evictions: c.Evictions}
	}
	for _, name := range s.names {
		ds, ok := s.datasets[name].Status()
		if !ok {
			continue
		}
		st.Datasets = append(st.Datasets, ds)
		st.MappedBytes += ds.MappedBytes
	}
	st.Locations = s.shards.checker.status()
	return st
}

var actions = []*flight.ActionType{
	{Type: "status", Description: "JSON: served datasets, snapshot ids, row and series counts, mapped bytes, tiers (cold file bytes and rows) and the cold cache, uptime, reload state, and the health of the cluster file's shard locations"},
	{Type: "compact", Description: "body: a dataset name, or empty for all; fold the live delta into the next snapshot and serve it. JSON: per dataset the result (compacted, nothing, moved; skipped, with the reason, for a dataset another server writes or that is failing when every dataset is asked for), snapshot ids, rows and the WAL position folded in"},
	{Type: "discard", Description: "body: a dataset name (required), optionally followed by a newline and a reason for HISTORY; set the live writes aside (the log's checkpoint moves past them; recorded in HISTORY). JSON: per dataset the result (discarded, nothing), rows set aside and the WAL position"},
	{Type: "reload", Description: "body: a dataset name, or empty for all; serve what CURRENT names once it is open and validated. JSON: per dataset the result (reloaded, unchanged) and snapshot ids; FailedPrecondition if a new snapshot failed (the old one stays served)"},
}

// ListActions lists the actions DoAction runs.
func (s *Service) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range actions {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return nil
}

// DoAction runs an action of ListActions: "status", "reload", "compact"
// or "discard", each answering JSON. Unknown actions are Unimplemented.
func (s *Service) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	switch a.GetType() {
	case "reload":
		name := strings.TrimSpace(string(a.GetBody()))
		if err := s.permitActionOn(stream.Context(), "reload", name); err != nil {
			return toStatus(err)
		}
		res, err := s.Reload(name)
		if err != nil {
			return toStatus(err)
		}
		var failed []string
		for _, r := range res {
			if r.Result == ReloadFailed {
				failed = append(failed, fmt.Sprintf("dataset %q: snapshot %d not served (still serving %d): %s", r.Dataset, r.CurrentID, r.SnapshotID, r.Error))
			}
		}
		if len(failed) > 0 {
			return status.Error(codes.FailedPrecondition, truncate("reload failed: "+strings.Join(failed, "; "), 4096))
		}
		b, err := json.Marshal(map[string]any{"datasets": res})
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return stream.Send(&flight.Result{Body: b})
	case "compact":
		name := strings.TrimSpace(string(a.GetBody()))
		if err := s.permitActionOn(stream.Context(), "compact", name); err != nil {
			return toStatus(err)
		}
		res, err := s.Compact(stream.Context(), name)
		if err != nil {
			return toStatus(err)
		}
		b, err := json.Marshal(map[string]any{"datasets": res})
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return stream.Send(&flight.Result{Body: b})
	case "discard":
		name, reason, _ := strings.Cut(string(a.GetBody()), "\n")
		name = strings.TrimSpace(name)
		if name != "" {
			if err := s.permitDataset(stream.Context(), name); err != nil {
				return toStatus(err)
			}
		}
		res, err := s.Discard(stream.Context(), name, strings.TrimSpace(reason))
		if err != nil {
			return toStatus(err)
		}
		b, err := json.Marshal(map[string]any{"datasets": []DiscardResult{res}})
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return stream.Send(&flight.Result{Body: b})
	case "status":
		b, err := json.Marshal(s.statusFor(stream.Context()))
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		// the reasons a dataset fails name its files: relative to the root
		return stream.Send(&flight.Result{Body: []byte(s.redact.text(string(b)))})
	default:
		var names []string
		for _, x := range actions {
			names = append(names, x.Type)
		}
		return status.Errorf(codes.Unimplemented, "unknown action %q (actions: %s)", truncate(a.GetType(), 64), strings.Join(names, ", "))
	}
}

// permitActionOn checks an action's body: a dataset the caller's token
// may name, or empty (every dataset) for a token that may name all.
func (s *Service) permitActionOn(ctx context.Context, action, name string) error {
	if name == "" {
		return permitsAll(ctx, action)
	}
	return s.permitDataset(ctx, name)
}

// statusFor is Status as the caller's token may see it: only the
// datasets it may name (and their mapped bytes).
func (s *Service) statusFor(ctx context.Context) Status {
	st := s.Status()
	g := grantOf(ctx)
	if g == nil || g.Datasets == nil {
		return st
	}
	ds := st.Datasets[:0]
	st.MappedBytes = 0
	for _, d := range st.Datasets {
		if g.Permits(d.Name) {
			ds = append(ds, d)
			st.MappedBytes += d.MappedBytes
		}
	}
	st.Datasets = ds
	return st
}

// toStatus turns errors into gRPC status errors: ticket errors carry their
// code, the read layer's sentinels map to theirs, corruption is Internal,
// and anything already a status passes through.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return status.Error(e.Code, truncate(e.Msg, 1024))
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Internal
	msg := err.Error()
	switch {
	case errors.Is(err, query.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, query.ErrInvalid):
		code, msg = codes.InvalidArgument, "ticket: "+msg
	case errors.Is(err, query.ErrLimit):
		code = codes.ResourceExhausted
	case errors.Is(err, query.ErrStale):
		code = codes.FailedPrecondition
	case errors.Is(err, livedelta.ErrInvalid):
		code = codes.InvalidArgument
	case errors.Is(err, live.ErrClosed), errors.Is(err, served.ErrClosed), errors.Is(err, served.ErrFailing):
		code = codes.Unavailable
	case errors.Is(err, served.ErrReadOnly):
		code = codes.PermissionDenied
	case errors.Is(err, served.ErrWritesUnavailable):
		code = codes.Unavailable
	case errors.Is(err, served.ErrCompactFailing):
		code = codes.FailedPrecondition
	case errors.Is(err, wal.ErrFailed):
		// a full disk or an I/O error: the log heals by itself once the
		// cause is gone, so the client may retry
		code = codes.Unavailable
	case errors.Is(err, wal.ErrTooLarge):
		code, msg = codes.ResourceExhausted, msg+"; send batches of fewer rows"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	return status.Error(code, truncate(msg, 1024))
}

// panicked turns a panic recovered in a handler into the error the client
// gets: a memory fault in a served snapshot's mapping marks its dataset
// failing (served.Root.Panicked) and is Internal; nil for any other panic.
func (s *Service) panicked(where string, r any) error {
	if err := s.host.Panicked(where, r); err != nil {
		return errf(codes.Internal, "%v", err)
	}
	return nil
}

// noteReadError looks at the error a read of dataset name's snapshot id
// ended with: the client's own mistakes, limits and transport errors are
// the client's business; anything else may be damage in the served files,
// which the dataset checks (served.Dataset.ReadFailed).
func (s *Service) noteReadError(name string, id uint64, err error) {
	d, ok := s.datasets[name]
	if err == nil || !ok {
		return
	}
	var e *Error
	if errors.As(err, &e) || errors.Is(err, errShuttingDown) || errors.Is(err, errLeaseExpired) {
		return
	}
	if _, isStatus := status.FromError(err); isStatus && status.Code(err) != codes.Unknown {
		return // a transport error: the client went away
	}
	d.ReadFailed(id, err)
}
