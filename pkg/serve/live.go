package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/compact"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/delta"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// WALDir is the write-ahead log's directory inside a dataset.
const WALDir = dsdir.WALDir

// liveTarget is the dataset as its write path sees it (live.Target).
type liveTarget struct{ d *dataset }

func (t liveTarget) Base() delta.Base { return t.d.cur.Load().base }

// Publish swaps in a view of the same snapshot with st merged on read.
// Called with the writer's lock held, in log order.
func (t liveTarget) Publish(st *delta.State) {
	d := t.d
	cur := d.cur.Load()
	if cur == nil {
		return
	}
	nv, ok := cur.withState(st)
	if !ok {
		return
	}
	if _, err := d.install(nv); err != nil {
		nv.Release()
	}
}

// schemaOf is the delta schema a snapshot's rows imply.
func schemaOf(v *view) (*delta.Schema, error) {
	fields, _ := v.Index().Attributes()
	return delta.NewSchema(v.Schema(), fields)
}

// writer returns the dataset's write path, opening (and replaying) its
// WAL first if need be. create says whether a dataset without a WAL gets
// one (a DoPut) or not (start-up).
func (d *dataset) writer(create bool, log *slog.Logger) (*live.Writer, error) {
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	if d.live != nil {
		return d.live, nil
	}
	dir := filepath.Join(d.dir, WALDir)
	if _, err := os.Stat(dir); err != nil && !create {
		return nil, nil
	}
	// Reloads wait (swapMu) while the log replays onto the served snapshot.
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	v := d.acquire()
	if v == nil {
		return nil, fmt.Errorf("dataset %s is closed", d.name)
	}
	defer v.Release()
	s, err := schemaOf(v)
	if err != nil {
		return nil, err
	}
	folded := d.foldedPosition(v.Manifest, log)
	w, info, err := live.Open(dir, s, folded, liveTarget{d}, live.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", d.name, err)
	}
	if t := info.Truncated; t != nil {
		log.Warn("wal: torn tail cut", "dataset", d.name, "segment", t.Segment, "offset", t.Offset, "bytes", t.Bytes, "cause", fmt.Sprint(t.Cause))
	}
	if info.Records > 0 {
		log.Info("wal replayed", "dataset", d.name, "records", info.Records, "rows", info.Rows,
			"ms", float64(info.Duration.Microseconds())/1000, "folded", folded)
	}
	d.live = w
	return w, nil
}

// foldedPosition is dataset.Dir.FoldedPosition, logging a lineage that
// cannot be read (every record in the log is then replayed).
func (d *dataset) foldedPosition(m *manifest.Manifest, log *slog.Logger) uint64 {
	pos, err := d.ds.FoldedPosition(m)
	if err != nil {
		log.Warn("wal: replaying every record in the log", "dataset", d.name, "error", err.Error())
	}
	return pos
}

// installBase serves a newly opened snapshot. With live writes, the
// delta moves over to it (its rows keep shadowing the new base until a
// compaction folds them), under the writer's lock so no write is lost in
// between.
func (d *dataset) installBase(v *view) error {
	d.liveMu.Lock()
	w := d.live
	d.liveMu.Unlock()
	if w == nil {
		_, err := d.install(v)
		return err
	}
	// The delta is counted over the new base off the writer's lock
	// (PrepareRebase), and caught up under it with the last writes.
	pre, done, release := w.PrepareRebase(func(st *delta.State) *delta.State { return st.Rebase(v.base) })
	defer release()
	return w.Do(func(st *delta.State) (*delta.State, error) {
		if len(st.Runs()) > 0 {
			s, err := schemaOf(v)
			if err != nil {
				return nil, err
			}
			if !s.Write.Equal(st.Schema().Write) {
				return nil, fmt.Errorf("snapshot %d has other columns than the live delta (%d rows); compact before changing the schema", v.ID(), st.Rows())
			}
		}
		// writes go on over the new base: its code cache warms now,
		// before the next batch asks for it
		d.codes(v)
		st2, ok := st.CatchUp(pre, done)
		if !ok {
			st2 = st.Rebase(v.base)
		}
		v.st = st2
		if len(st2.Runs()) > 0 {
			v.r = query.NewComposite(v.base, st2)
		}
		if _, err := d.install(v); err != nil {
			return nil, err
		}
		return st2, nil
	})
}

// CompactResult is the answer of the compact action for one dataset.
type CompactResult struct {
	Dataset     string  `json:"dataset"`
	Result      string  `json:"result"` // compacted, nothing
	SnapshotID  uint64  `json:"snapshot_id"`
	ParentID    uint64  `json:"parent_id,omitempty"`
	Rows        int64   `json:"rows"`
	DeltaRows   int64   `json:"delta_rows"`
	WALPosition uint64  `json:"wal_position"`
	Seconds     float64 `json:"seconds"`
}

// compact folds the delta into the next snapshot: freeze the runs, write
// base + frozen runs as snapshot N+1 (recording the WAL position they hold),
// serve it with the runs written since merged over it, then delete the WAL
// segments wholly folded in. A crash at any step loses nothing: before
// CURRENT flips the old snapshot and the whole log are replayed, after it
// the new snapshot and the records after its position.
func (d *dataset) compact(ctx context.Context, log *slog.Logger) (CompactResult, error) {
	res := CompactResult{Dataset: d.name, Result: "nothing"}
	if d.faultStatus().failing {
		return res, errFailing
	}
	d.liveMu.Lock()
	w := d.live
	d.liveMu.Unlock()
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	v := d.acquire()
	if v == nil {
		return res, fmt.Errorf("dataset %s is closed", d.name)
	}
	res.SnapshotID = v.ID()
	if w == nil || w.State().Rows() == 0 {
		v.Release()
		return res, nil
	}
	var frozen *delta.State
	w.Do(func(st *delta.State) (*delta.State, error) {
		frozen = st.Freeze()
		return frozen, nil
	})
	pos := frozen.FrozenPosition()
	res.DeltaRows = frozen.Rows()
	base, closeBase, err := d.compactionBase(v)
	if err != nil {
		v.Release()
		return res, fmt.Errorf("compact %s: %w", d.name, err)
	}
	r := query.NewComposite(base, frozen)
	out, err := compact.Publish(ctx, d.ds, r, v.Manifest, pos, compact.Options{Tool: "servingsnap " + d.version, Yield: w.GiveWay})
	closeBase()
	v.Release()
	if err != nil {
		err = fmt.Errorf("compact %s: %w", d.name, err)
		d.stMu.Lock()
		d.cs.lastError = err.Error()
		d.stMu.Unlock()
		return res, err
	}
	s, err := snapshot.OpenID(d.dir, out.SnapshotID, d.verified())
	if err != nil {
		return res, fmt.Errorf("compact %s: open snapshot %d: %w", d.name, out.SnapshotID, err)
	}
	nv, err := newView(d.name, s)
	if err != nil {
		s.Close()
		return res, err
	}
	nv.drained = d.drainedHook
	// The writes since the freeze are counted over the new base off the
	// writer's lock (PrepareRebase) and caught up under it with the last
	// ones: made whole under it, the swap held every write ~90 ms with
	// 160k rows of 100k series in the delta (BenchmarkRebase).
	pre, done, release := w.PrepareRebase(func(st *delta.State) *delta.State { return st.DropFrozen(nv.base) })
	defer release() // (also released below, once the swap is done)
	err = w.Do(func(st *delta.State) (*delta.State, error) {
		st2, ok := st.CatchUp(pre, done)
		if !ok {
			st2 = st.DropFrozen(nv.base)
		}
		nv.st = st2
		if len(st2.Runs()) > 0 {
			nv.r = query.NewComposite(nv.base, st2)
		}
		if _, err := d.install(nv); err != nil {
			return nil, err
		}
		// counted as the new snapshot is served, so that a status that
		// shows it shows its compaction too
		d.stMu.Lock()
		d.st.currentID = out.SnapshotID
		d.cs.count++
		d.cs.seconds += out.Duration.Seconds()
		d.cs.last, d.cs.lastError = time.Now(), ""
		if len(st2.Runs()) == 0 {
			d.cs.since = time.Time{}
		} else {
			d.cs.since = time.Now() // the writes that arrived meanwhile
		}
		d.stMu.Unlock()
		return st2, nil
	})
	release()
	if err != nil {
		s.Close()
		return res, err
	}
	if _, err := w.Log().TruncateBefore(wal.PositionFromUint64(pos)); err != nil {
		log.Warn("wal: segments folded in were not removed", "dataset", d.name, "error", err.Error())
	}
	res.Result, res.SnapshotID, res.ParentID, res.Rows, res.WALPosition = "compacted", out.SnapshotID, out.ParentID, out.Rows, pos
	res.Seconds = out.Duration.Seconds()
	log.Info("compacted", "dataset", d.name, "snapshot_id", out.SnapshotID, "parent_id", out.ParentID,
		"delta_rows", res.DeltaRows, "rows", out.Rows, "wal_position", pos, "s", res.Seconds)
	return res, nil
}

// compactionBase is the reader a compaction of view v reads its base
// through: v's own, or for a tiered snapshot the same snapshot opened
// again with a private cold cache (compact.ColdCacheBytes), so that
// reading every series' old rows once does not evict from the server's
// shared cache (--cold-cache) the history queries keep reading. Opening
// maps the files again and reads the index in place: no per-row work.
// The caller holds v, so the files stay; close releases the second open.
func (d *dataset) compactionBase(v *view) (*query.SnapshotReader, func(), error) {
	if !v.Tiered() {
		return v.base, func() {}, nil
	}
	s, err := snapshot.OpenID(d.dir, v.ID(), snapshot.Options{ColdCache: coldfile.NewCache(compact.ColdCacheBytes)})
	if err != nil {
		return nil, nil, err
	}
	r, err := query.FromSnapshot(d.name, s)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return r, s.Close, nil
}

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
	d, err := s.lookup(desc.Path[0])
	if err != nil {
		return err
	}
	if s.readOnly {
		return errf(codes.PermissionDenied, "dataset %q: the server is read-only (--read-only)", d.name)
	}
	w, err := d.writer(true, s.log)
	if err != nil {
		return errf(codes.Unavailable, "dataset %q takes no writes: %v", d.name, err)
	}
	ctx := stream.Context()
	for batch := 0; rd.Next(); batch++ {
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

func (s *Service) putBatch(ctx context.Context, d *dataset, w *live.Writer, rec arrow.RecordBatch, batch int, stream flight.FlightService_DoPutServer, decoded time.Time) error {
	if lim := s.limits.MaxPutRows; lim > 0 && rec.NumRows() > lim {
		return errf(codes.ResourceExhausted, "do_put: batch %d has %d rows, limit %d per batch", batch, rec.NumRows(), lim)
	}
	if err := validatePut(rec, batch); err != nil {
		return err
	}
	// From here the write is in flight: the writer's merger gives way.
	defer w.Incoming()()
	size := delta.RecordBytes(rec)
	if err := s.acquirePut(ctx, size, batch); err != nil {
		return err
	}
	defer s.putSem.Release(size)
	v := d.acquire()
	if v == nil {
		return errf(codes.Unavailable, "dataset %q is closed", d.name)
	}
	k := newPutKnown(d, v)
	schema := w.State().Schema()
	norm, seriesCodes, err := delta.NormalizeCodes(ctx, s.mem, schema, rec, batch, k, k)
	if err != nil {
		v.Release()
		return err
	}
	checked := time.Now()
	// The write is sorted into a run on this stream's goroutine while the
	// committer logs it, which leaves the write path (one write at a time,
	// between the fsync and the ack) only the key index's bookkeeping.
	// Prepare reads the base's periods (which rows a write adds), so the
	// view stays held until it is done: a reload meanwhile must not unmap
	// the files under it.
	base := v.base
	release := sync.OnceFunc(v.Release)
	ack, err := w.PutPrepare(ctx, norm, func() (*delta.Prepared, error) {
		defer release()
		return delta.Prepare(ctx, s.mem, schema, norm, base, seriesCodes)
	})
	release() // PutPrepare may refuse the write before it prepares
	norm.Release()
	if err != nil {
		return fmt.Errorf("dataset %q: batch %d: %w", d.name, batch, err)
	}
	if ack.Rows > 0 { // a batch of no rows adds nothing for --compact-age to age
		d.stMu.Lock()
		if d.cs.since.IsZero() {
			d.cs.since = time.Now()
		}
		d.stMu.Unlock()
	}
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

// putKnown answers Normalize's attribute look-ups for one batch. The base
// index's attribute columns are fetched once per batch rather than once
// per series (sidecar.Index.Attributes copies its field list on every
// call, which was most of a DoPut's normalisation CPU); a series the base
// lacks is asked of the view's reader, which knows the delta's new series.
// It answers what query.SnapshotReader.Attr and query.Composite.Attr do:
// the base first. Base look-ups go through the dataset's codeCache.
type putKnown struct {
	codes codeReader
	cols  []arrow.Array
	rest  delta.Known // nil: no series beyond the base
}

func newPutKnown(d *dataset, v *view) putKnown {
	x := v.Index()
	k := putKnown{codes: d.codes(v).reader()}
	_, k.cols = x.Attributes()
	k.rest, _ = v.r.(delta.Known)
	return k
}

// BaseCode is the series' row in the base index (delta.BaseCoder).
func (k putKnown) BaseCode(id string) (int, bool) { return k.codes.lookup(id) }

// BaseCodes is BaseCode of every id (delta.BatchCoder).
func (k putKnown) BaseCodes(ids *array.String, codes []int32) { k.codes.lookupAll(ids, codes) }

func (k putKnown) Attr(id string, a int) (arrow.Array, int, bool) {
	if c, ok := k.codes.lookup(id); ok {
		if a >= len(k.cols) {
			return nil, 0, true
		}
		return k.cols[a], c, true
	}
	if k.rest == nil {
		return nil, 0, false
	}
	return k.rest.Attr(id, a)
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
		r, err := s.datasets[n].compact(ctx, s.log)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// CompactPolicy says when the server compacts a dataset by itself: when
// its delta holds at least Rows rows or Bytes bytes, or its oldest write not
// yet folded in is older than Age. Zero disables a threshold.
type CompactPolicy struct {
	Rows  int64
	Bytes int64
	Age   time.Duration
}

func (p CompactPolicy) enabled() bool { return p.Rows > 0 || p.Bytes > 0 || p.Age > 0 }

// due reports why d should be compacted now ("" if not).
func (d *dataset) due(p CompactPolicy) string {
	d.liveMu.Lock()
	w := d.live
	d.liveMu.Unlock()
	if w == nil {
		return ""
	}
	st := w.State()
	if st.Rows() == 0 {
		return ""
	}
	d.stMu.Lock()
	since := d.cs.since
	d.stMu.Unlock()
	switch {
	case p.Rows > 0 && st.Rows() >= p.Rows:
		return fmt.Sprintf("%d delta rows ≥ %d", st.Rows(), p.Rows)
	case p.Bytes > 0 && st.Bytes() >= p.Bytes:
		return fmt.Sprintf("%d delta bytes ≥ %d", st.Bytes(), p.Bytes)
	case p.Age > 0 && !since.IsZero() && time.Since(since) >= p.Age:
		return fmt.Sprintf("oldest write %s old ≥ %s", time.Since(since).Round(time.Second), p.Age)
	}
	return ""
}

// compactLoop compacts every dataset whose delta passes a threshold,
// checking once a second, until the service closes.
func (s *Service) compactLoop() {
	s.everyDataset(time.Second, s.compactDone, func(d *dataset) {
		if why := d.due(s.compactPolicy); why != "" {
			s.log.Info("compaction due", "dataset", d.name, "why", why)
			if _, err := d.compact(context.Background(), s.log); err != nil {
				s.log.Error("compaction failed; the delta stays served and logged", "dataset", d.name, "error", err.Error())
			}
		}
	})
}
