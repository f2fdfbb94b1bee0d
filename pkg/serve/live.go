package serve

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"

	"github.com/energyscope/servingsnap/internal/gctune"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/served"
)

// WALDir is the write-ahead log's directory inside a dataset.
const WALDir = dsdir.WALDir

// CompactPolicy says when the server compacts a dataset by itself
// (served.CompactPolicy).
type CompactPolicy = served.CompactPolicy

// CompactResult is the compact action's answer for one dataset.
type CompactResult = served.CompactResult

// DiscardResult is the discard action's answer for one dataset.
type DiscardResult = served.DiscardResult

// DoPut appends the record batches of a stream on descriptor path
// [dataset] to the dataset's delta. Each batch is checked before anything
// of it is logged; it is acknowledged (a PutResult whose app_metadata is
// {"rows": N, "wal_position": P}) only once it is durable in the WAL and
// visible to queries. A refused batch ends the stream with
// InvalidArgument; the batches acknowledged before it stay.
func (s *Service) DoPut(stream flight.FlightService_DoPutServer) error {
	return toStatus(s.doPut(stream))
}

func (s *Service) doPut(stream flight.FlightService_DoPutServer) error {
	var src flight.DataStreamReader = stream
	if putTrace != nil {
		src = &tracedRecv{stream: stream}
	}
	rd, err := flight.NewRecordReader(src)
	if err != nil {
		return errf(codes.InvalidArgument, "do_put: %v", err)
	}
	defer rd.Release()
	desc := rd.LatestFlightDescriptor()
	if desc == nil || desc.GetType() != flight.DescriptorPATH || len(desc.Path) != 1 {
		return errf(codes.InvalidArgument, "do_put: the descriptor must be a path [dataset]")
	}
	if err := s.permitDataset(stream.Context(), desc.Path[0]); err != nil {
		return err
	}
	d, err := s.lookup(desc.Path[0])
	if err != nil {
		return err
	}
	w, err := d.Writer()
	if errors.Is(err, served.ErrReadOnly) {
		return errf(codes.PermissionDenied, "dataset %q: the server is read-only (--read-only)", d.Name())
	}
	var we *served.WritesError
	if errors.As(err, &we) { // it names the dataset already
		return errf(codes.Unavailable, "%v", err)
	}
	if err != nil {
		return errf(codes.Unavailable, "dataset %q takes no writes: %v", d.Name(), err)
	}
	ctx := stream.Context()
	for batch := 0; rd.Next(); batch++ {
		gctune.Wrote() // a write load: the collector's headroom applies
		rec := rd.RecordBatch()
		if err := s.putBatch(ctx, d, w, rec, batch, stream, time.Now()); err != nil {
			return err
		}
	}
	if err := rd.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return errf(codes.InvalidArgument, "do_put: %v", err)
	}
	return nil
}

func (s *Service) putBatch(ctx context.Context, d *served.Dataset, w *live.Writer, rec arrow.RecordBatch, batch int, stream flight.FlightService_DoPutServer, decoded time.Time) error {
	if lim := s.limits.MaxPutRows; lim > 0 && rec.NumRows() > lim {
		return errf(codes.ResourceExhausted, "do_put: batch %d has %d rows, limit %d per batch", batch, rec.NumRows(), lim)
	}
	if err := validatePut(rec, batch); err != nil {
		return err
	}
	// From here the write is in flight: the writer's merger gives way.
	defer w.Incoming()()
	size := livedelta.RecordBytes(rec)
	if err := s.acquirePut(ctx, size, batch); err != nil {
		return err
	}
	defer s.putSem.Release(size)
	ack, err := d.Put(ctx, w, s.mem, rec, batch)
	if err != nil {
		return err
	}
	checked := ack.Stages.Checked
	md, _ := json.Marshal(ack)
	if err := stream.Send(&flight.PutResult{AppMetadata: md}); err != nil {
		return err
	}
	acked := time.Now()
	if s.metrics != nil {
		s.metrics.put.observe(decoded, checked, acked, ack.Stages)
	}
	if putTrace != nil {
		putTrace.Acked(ctx, batch, decoded, checked, acked, ack.Stages)
	}
	return nil
}

// putTrace, when set, is told when each DoPut message arrived and each
// acknowledged batch's stage moments. Only the ingest benchmarks' helper
// server sets it (their -ingest.trace), to match a client's slow
// acknowledgements with what the server did meanwhile; it is nil in a real
// server.
var putTrace interface {
	// Received: the stream's message msg (0: the schema; batch b is
	// message b+1) was read from gRPC, before its decoding.
	Received(ctx context.Context, msg int, at time.Time)
	Acked(ctx context.Context, batch int, decoded, checked, acked time.Time, st live.Stages)
}

// tracedRecv tells putTrace when each message of a DoPut stream arrives.
type tracedRecv struct {
	stream flight.FlightService_DoPutServer
	n      int
}

func (r *tracedRecv) Recv() (*flight.FlightData, error) {
	fd, err := r.stream.Recv()
	if err == nil {
		putTrace.Received(r.stream.Context(), r.n, time.Now())
		r.n++
	}
	return fd, err
}

// acquirePut takes size bytes of the in-flight write budget.
func (s *Service) acquirePut(ctx context.Context, size int64, batch int) error {
	if size > s.limits.MaxPutBytes && s.limits.MaxPutBytes > 0 {
		return errf(codes.ResourceExhausted, "do_put: batch %d is %d bytes, more than the %d bytes all writes may hold at once", batch, size, s.limits.MaxPutBytes)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.putSem.Acquire(cctx, size); err != nil {
		return errf(codes.ResourceExhausted, "do_put: batch %d waited 30 s for room among in-flight writes", batch)
	}
	return nil
}

// Compact folds the delta of one dataset (name) or of all (name "").
func (s *Service) Compact(ctx context.Context, name string) ([]CompactResult, error) {
	names := s.names
	if name != "" {
		if _, err := s.lookup(name); err != nil {
			return nil, err
		}
		names = []string{name}
	}
	var out []CompactResult
	for _, n := range names {
		r, err := s.datasets[n].Compact(ctx)
		if err != nil && name == "" && (errors.Is(err, served.ErrWritesUnavailable) || errors.Is(err, served.ErrReadOnly) || errors.Is(err, served.ErrFailing)) {
			// compacting every dataset: one that another server writes,
			// or that is failing, is said so and skipped
			r.Result, r.Error = "skipped", err.Error()
			err = nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Discard sets one dataset's live writes aside (DoAction discard): name is
// required, so no call discards every dataset's writes by mistake.
func (s *Service) Discard(ctx context.Context, name, reason string) (DiscardResult, error) {
	if name == "" {
		return DiscardResult{}, invalid("discard: the body names the dataset whose live writes to set aside")
	}
	d, err := s.lookup(name)
	if err != nil {
		return DiscardResult{}, err
	}
	if s.readOnly {
		return DiscardResult{}, errf(codes.PermissionDenied, "dataset %q: the server is read-only (--read-only)", name)
	}
	return d.Discard(ctx, "servingsnap "+s.version, reason)
}
