// Package live is the write path of a served dataset: a write is checked
// and normalized (pkg/livedelta), logged durably (pkg/wal, one fsync for every
// write waiting at that moment: group commit), applied to the dataset's
// delta State in log order, and only then acknowledged. At open it replays
// exactly the records after the position the served snapshot folded in.
//
// One committer goroutine per dataset takes every queued write, appends
// them to the log in one call and applies them in that order under the
// writer's lock, so the precedence of writes (later wins) is the log's
// order, and a replay rebuilds the same State. Readers never take the
// lock: they read the States the committer publishes.
package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// Target is the dataset as the write path sees it. Its methods are called
// with the writer's lock held, in log order.
type Target interface {
	// Base is the snapshot the delta lies over.
	Base() livedelta.Base
	// Publish makes st the State readers merge from now on.
	Publish(st *livedelta.State)
}

// Options tune a Writer.
type Options struct {
	WAL    wal.Options
	Logger *slog.Logger
	// MaxGroupBytes bounds the payload bytes one commit group takes.
	MaxGroupBytes int
}

// Ack is what a durable write is acknowledged with.
type Ack struct {
	Rows        int64  `json:"rows"`
	WALPosition uint64 `json:"wal_position"` // the log is durable through here
	// Stages say when the write passed each step of the write path (for
	// the per-stage latency metrics; not part of the acknowledgement).
	Stages Stages `json:"-"`
}

// Stages are the moments a write passed the steps of the write path, so
// that an acknowledgement's latency can be split into where it went:
// waiting for the committer, the log append and fsync, waiting for the
// applier, applying.
type Stages struct {
	// Checked is when the caller had checked and normalized the write,
	// before handing it to Put (set by the caller, zero otherwise).
	Checked  time.Time
	Queued   time.Time // encoded and handed to the committer's queue
	Taken    time.Time // taken into a commit group (the append starts)
	Logged   time.Time // its group is durable (append and fsync done)
	Prepared time.Time // its sorting into a run is done (PutPrepare; zero otherwise)
	Applied  time.Time // applied to the State and published
}

// ReplayInfo says what Open replayed.
type ReplayInfo struct {
	Records   int
	Rows      int64
	Duration  time.Duration
	Truncated *wal.Truncation // a torn tail cut at open, nil if none
}

// Writer is one dataset's write path.
type Writer struct {
	log    *wal.WAL
	schema *livedelta.Schema
	t      Target
	opt    Options
	mem    memory.Allocator

	mu    sync.Mutex // orders applies; held while Target methods run
	st    *livedelta.State
	seq   uint64
	fsync Stats // under mu

	queue  chan *write
	logged chan loggedGroup // from the committer to the applier, in log order
	merges chan struct{}    // wakes the merger (buffered: one wake-up pending at most)
	// inflight counts the writes between Put's start and its return; idle
	// (buffered: one signal pending at most) is signalled when it drops
	// to zero, for a merger waiting for the writes to pass (pauseMerge).
	inflight  atomic.Int64
	idle      chan struct{}
	mergeWait time.Duration // mergeWaitMax (tests: other bounds)
	runs      atomic.Int64  // w.st's unfrozen runs (set under mu), for pauseMerge
	held      int           // HoldMerges in effect (under mu): no merge is installed
	stop      chan struct{}
	done      chan struct{}
}

// loggedGroup is a commit group the log holds (or failed to append).
type loggedGroup struct {
	group []*write
	pos   wal.Position
	took  time.Duration
	err   error
}

// Stats are the writer's counters (status and metrics).
type Stats struct {
	Writes      int64
	Rows        int64
	Groups      int64
	FsyncTotal  time.Duration
	FsyncLast   time.Duration
	WALPosition uint64
}

type write struct {
	payload []byte
	norm    arrow.RecordBatch
	prep    *livedelta.Prepared // nil: sorted by the applier
	ready   chan struct{}       // nil, or closed once prep is set (PutPrepare)
	ack     Ack
	err     error
	done    chan struct{}
	stages  Stages
}

// Open opens (or creates) the log in dir, replays the records after
// folded onto an empty delta over t's base, publishes the result and
// starts the committer. A torn tail of the newest segment is cut and
// reported in the ReplayInfo; corruption anywhere else is an error naming
// the segment and offset, and nothing is served from a partial replay.
func Open(dir string, s *livedelta.Schema, folded uint64, t Target, opt Options) (*Writer, ReplayInfo, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.MaxGroupBytes <= 0 {
		opt.MaxGroupBytes = 64 << 20
	}
	t0 := time.Now()
	opt.WAL.After = wal.PositionFromUint64(folded)
	l, err := wal.Open(dir, opt.WAL)
	if err != nil {
		if errors.Is(err, wal.ErrCorrupt) {
			err = fmt.Errorf("%w; %s", err, repairHint)
		}
		return nil, ReplayInfo{}, err
	}
	w := &Writer{log: l, schema: s, t: t, opt: opt, mem: memory.DefaultAllocator, st: livedelta.Empty(s),
		queue: make(chan *write, 1024), logged: make(chan loggedGroup, 2), merges: make(chan struct{}, 1),
		idle: make(chan struct{}, 1), mergeWait: mergeWaitMax, stop: make(chan struct{}), done: make(chan struct{})}
	info := ReplayInfo{Truncated: l.Truncated()}
	rp, err := replay(context.Background(), l, w.mem, s, folded, 0, 0, t.Base())
	info.Records, info.Rows = rp.records, rp.rows
	if err != nil {
		l.Close()
		return nil, info, fmt.Errorf("replay %s: %w; %s", dir, err, repairHint)
	}
	w.st, w.seq = rp.st, uint64(rp.records)
	w.countRunsLocked()
	info.Duration = time.Since(t0)
	w.fsync.WALPosition = l.End().Uint64()
	w.mu.Lock()
	t.Publish(w.st)
	w.mu.Unlock()
	applied := make(chan struct{})
	merged := make(chan struct{})
	go w.commit(applied, merged)
	go w.apply(applied)
	go w.merge(merged)
	return w, info, nil
}

// repairHint ends the error of a log that cannot be replayed: the
// commands an operator repairs it with (docs/OPERATIONS.md "When the log
// is damaged").
const repairHint = "`snapbuild wal verify ROOT/DATASET` names every damaged record, " +
	"`snapbuild wal salvage --quarantine SEGMENT[:OFFSET] ROOT/DATASET` (server stopped) sets one aside and keeps the rest"

// payloadBufs recycles the buffers writes are encoded into for the log
// (*[]byte): a payload is needed only until the log has copied it into
// its own write buffer (wal.WAL.Append returns), and a new one for every
// write was ~50 B a row of garbage, a fifth of the write path's, which
// paces the GC. A buffer too small for a write is dropped for a larger
// one, so the pool holds buffers of about the writes' size.
var payloadBufs sync.Pool

// encode encodes rec as a log record (an Arrow IPC stream of one batch)
// into a buffer from payloadBufs; recycle returns it.
func encode(rec arrow.RecordBatch) ([]byte, error) {
	// the buffers, padding and the schema and batch messages: one
	// allocation rather than a doubling series of them
	need := int(livedelta.RecordBytes(rec)) + 64*int(rec.NumCols()) + 4096
	var b []byte
	if p, ok := payloadBufs.Get().(*[]byte); ok && cap(*p) >= need {
		b = (*p)[:0]
	} else {
		b = make([]byte, 0, need)
	}
	buf := bytes.NewBuffer(b)
	w := ipc.NewWriter(buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// recycle returns an encoded payload's buffer to payloadBufs. Only a buffer
// nothing reads any more may be recycled.
func recycle(payload []byte) {
	payload = payload[:0]
	payloadBufs.Put(&payload)
}

// ErrClosed: the writer was closed.
var ErrClosed = errors.New("live: writer closed")

// Put logs a normalized write and returns once it is durable and applied.
func (w *Writer) Put(ctx context.Context, norm arrow.RecordBatch) (Ack, error) {
	return w.put(ctx, norm, nil)
}

// PutPrepare is Put of a write whose sorting into a run (prepare, a
// livedelta.Prepare) runs on the caller's goroutine while the committer logs
// it, so the acknowledgement waits for the longer of the two rather than
// for both; the applier waits for prepare before counting the write in.
// If prepare fails or returns nil, the applier sorts the write itself.
func (w *Writer) PutPrepare(ctx context.Context, norm arrow.RecordBatch, prepare func() (*livedelta.Prepared, error)) (Ack, error) {
	return w.put(ctx, norm, prepare)
}

// Incoming counts a write its caller is about to Put as in flight from
// now on, until done is called: the merger gives way to writes in flight
// (pauseMerge), and the checks and normalisation a server does before Put
// are a write's work too (DoPut's are a third of its CPU). Put counts
// itself in flight in any case.
func (w *Writer) Incoming() (done func()) {
	w.inflight.Add(1)
	return sync.OnceFunc(w.leave)
}

// leave ends one write's count in flight, signalling idle at zero.
func (w *Writer) leave() {
	if w.inflight.Add(-1) == 0 {
		select {
		case w.idle <- struct{}{}:
		default:
		}
	}
}

func (w *Writer) put(ctx context.Context, norm arrow.RecordBatch, prepare func() (*livedelta.Prepared, error)) (Ack, error) {
	if norm.NumRows() == 0 {
		// Nothing to log or apply: a record and an fsync would change
		// nothing a replay rebuilds. Acknowledged at the log's durable end,
		// as every write before it on the caller's stream is.
		select {
		case <-w.stop:
			return Ack{}, ErrClosed
		default:
		}
		return Ack{WALPosition: w.log.End().Uint64()}, nil
	}
	w.inflight.Add(1)
	defer w.leave()
	payload, err := encode(norm)
	if err != nil {
		return Ack{}, err
	}
	// Refused here, alone: in the committer's append it would fail its
	// whole commit group, other clients' writes with it.
	if max := w.log.MaxRecordSize(); len(payload) > max {
		recycle(payload)
		return Ack{}, fmt.Errorf("live: a write of %d rows is %d bytes in the log: %w (at most %d bytes a write)", norm.NumRows(), len(payload), wal.ErrTooLarge, max)
	}
	wr := &write{payload: payload, norm: norm, done: make(chan struct{})}
	if prepare != nil {
		wr.ready = make(chan struct{})
	}
	wr.stages.Queued = time.Now()
	select {
	case w.queue <- wr:
	case <-w.stop:
		recycle(payload)
		return Ack{}, ErrClosed
	case <-ctx.Done():
		recycle(payload)
		return Ack{}, ctx.Err()
	}
	if prepare != nil {
		if p, err := runPrepare(prepare); err == nil {
			wr.prep = p
			wr.stages.Prepared = time.Now()
		} else {
			w.opt.Logger.Warn("live: preparing a write failed; the applier sorts it", "error", err)
		}
		close(wr.ready)
		defer func() {
			if wr.prep != nil {
				wr.prep.Release() // after the outcome: the applier is done with it
			}
		}()
	}
	// Once queued the write is the committer's: it will be logged (or
	// fail) whatever the client does, so wait for the outcome.
	select {
	case <-wr.done:
	case <-w.done:
		select {
		case <-wr.done:
		default: // queued after the committer's last drain
			return Ack{}, ErrClosed
		}
	}
	wr.ack.Stages = wr.stages
	return wr.ack, wr.err
}

// runPrepare runs prepare, a panic in it an error: the applier waits for
// every queued write's preparation, so it must end, whatever happens.
func runPrepare(prepare func() (*livedelta.Prepared, error)) (p *livedelta.Prepared, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	return prepare()
}

// commit is the committer: it takes every queued write and logs them in
// one append (one fsync); the applier applies each logged group while the
// next one is being logged, so the CPU of applying overlaps the fsync.
// At stop it refuses what is still queued, then waits for the applier and
// the merger (done closes when all three are finished).
func (w *Writer) commit(applied, merged chan struct{}) {
	defer func() {
		close(w.logged)
		<-applied
		<-merged
		close(w.done)
	}()
	for {
		var group []*write
		select {
		case wr := <-w.queue:
			group = append(group, wr)
		case <-w.stop:
			for {
				select {
				case wr := <-w.queue:
					wr.err = ErrClosed
					close(wr.done)
				default:
					return
				}
			}
		}
		bytes := len(group[0].payload)
	drain:
		for bytes < w.opt.MaxGroupBytes {
			select {
			case wr := <-w.queue:
				group = append(group, wr)
				bytes += len(wr.payload)
			default:
				break drain
			}
		}
		payloads := make([][]byte, len(group))
		for i, wr := range group {
			payloads[i] = wr.payload
		}
		t0 := time.Now()
		for _, wr := range group {
			wr.stages.Taken = t0
		}
		pos, err := w.log.Append(context.Background(), payloads...)
		t1 := time.Now()
		// The log copied the payloads before returning (never early: no
		// deadline), so their buffers can take the next writes.
		for i, wr := range group {
			recycle(wr.payload)
			wr.payload, payloads[i] = nil, nil
		}
		for _, wr := range group {
			wr.stages.Logged = t1
		}
		w.logged <- loggedGroup{group: group, pos: pos, took: t1.Sub(t0), err: err}
	}
}

// apply applies logged groups in log order, publishes the State and
// acknowledges. A write is appended to the delta as a run of its own;
// the merger folds runs together off this path, so no acknowledgement
// waits for a large merge.
func (w *Writer) apply(applied chan struct{}) {
	defer close(applied)
	for lg := range w.logged {
		w.mu.Lock()
		if lg.err == nil {
			st := w.st
			for _, wr := range lg.group {
				w.seq++
				if wr.ready != nil {
					<-wr.ready // its sorting, overlapping the fsync
				}
				var next *livedelta.State
				var aerr error
				if wr.prep != nil {
					next, aerr = st.AppendPrepared(context.Background(), w.mem, wr.prep, w.seq, lg.pos.Uint64(), w.t.Base())
				} else {
					next, aerr = st.Append(context.Background(), w.mem, wr.norm, w.seq, lg.pos.Uint64(), w.t.Base())
				}
				if aerr == nil {
					st = next // (a failed write leaves st as it was for the rest of the group)
				} else {
					// Logged but not applied: a replay will apply it. The
					// dataset must not serve a State that lacks an
					// acknowledged write, so this write fails loudly.
					wr.err = fmt.Errorf("live: applying a logged write: %w", aerr)
					w.opt.Logger.Error("logged write not applied; restart replays it", "error", aerr)
				}
				wr.ack = Ack{Rows: wr.norm.NumRows(), WALPosition: lg.pos.Uint64()}
				w.fsync.Writes++
				w.fsync.Rows += wr.norm.NumRows()
			}
			w.st = st
			w.countRunsLocked()
			w.fsync.Groups++
			w.fsync.FsyncTotal += lg.took
			w.fsync.FsyncLast = lg.took
			w.fsync.WALPosition = lg.pos.Uint64()
			w.t.Publish(st)
		}
		w.mu.Unlock()
		now := time.Now()
		for _, wr := range lg.group {
			wr.stages.Applied = now
			if lg.err != nil {
				wr.err = lg.err
			}
			close(wr.done)
		}
		select {
		case w.merges <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// mergeWaitMax bounds how long the merger waits for the writes in flight
// at one pause, and mergeBacklogRuns the unfrozen runs up to which it
// waits at all: beyond them the merges have fallen behind (a saturating
// load leaves no gap between writes) and run flat out, as before pausing
// existed, so the runs a read visits stay bounded. A State that merges
// keep up with holds fewer than MergeFanIn runs per size tier, 6–9 in
// all at the end of the ingest benchmarks; with waits but no backlog
// bound, 4 saturating writers left ~180 runs and lost a third of their
// throughput.
const (
	mergeWaitMax     = 2 * time.Millisecond
	mergeBacklogRuns = 4 * livedelta.MergeFanIn
)

// merge is the merger: woken after writes are applied, it merges the
// State's candidate runs (livedelta.MergeFanIn at a time) without the lock, installs
// each result if its runs are still there (a compaction may have frozen
// them, a reload rebased them), and publishes once it has nothing left.
//
// A merge pauses about every millisecond of its work (livedelta.MergePaced):
// while writes are in flight it waits for them, up to mergeWaitMax, then
// yields its core. On the 2-core servers we run, a merge of the largest
// runs otherwise held one core for tens of milliseconds, leaving every
// write meanwhile — check, sorting, applying — one core between them.
func (w *Writer) merge(merged chan struct{}) {
	defer close(merged)
	timer := time.NewTimer(w.mergeWait)
	timer.Stop()
	pause := func() { w.pauseMerge(timer) }
	for {
		select {
		case <-w.merges:
		case <-w.stop:
			return
		}
		changed := false
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			w.mu.Lock()
			st, held := w.st, w.held > 0
			w.mu.Unlock()
			rs, ok := st.MergeCandidate()
			if !ok || held {
				break
			}
			w.pauseMerge(timer) // (a merge starts only once writes have passed, too)
			m, err := st.MergePaced(context.Background(), w.mem, rs, pause)
			if err != nil {
				// The runs stay as they are: reads merge more of them.
				w.opt.Logger.Error("merging delta runs", "error", err)
				break
			}
			w.mu.Lock()
			if w.held > 0 {
				w.mu.Unlock()
				break // dropped: HoldMerges's release wakes the merger again
			}
			if next, ok := w.st.Replace(rs, m); ok {
				w.st, changed = next, true
				w.countRunsLocked()
			}
			w.mu.Unlock()
		}
		if changed {
			w.mu.Lock()
			w.t.Publish(w.st)
			w.mu.Unlock()
		}
	}
}

// pauseMerge is the merger's pause: unless merges are behind (over
// mergeBacklogRuns runs), it waits while writes are in flight, up to
// w.mergeWait (or until the writer stops), then yields the core. timer is
// the merger's own, stopped.
func (w *Writer) pauseMerge(timer *time.Timer) {
	if w.runs.Load() > mergeBacklogRuns {
		return
	}
	w.giveWay(timer)
}

// GiveWay is the merger's pause for other work beside the writes (a
// compaction's passes, between its data batches): while writes are in
// flight it waits for them to pass, up to the merger's bound, then yields
// the core. On two cores a compaction otherwise held one for its whole
// run, leaving every write meanwhile the other between its stages and the
// collector (BenchmarkIngestPaced -ingest.compact-rows: ack p99 through
// compactions 20-37 ms without, 12-21 with).
func (w *Writer) GiveWay() { w.giveWay(nil) }

// giveWay waits while writes are in flight, up to w.mergeWait (or until
// the writer stops), then yields the core. timer is a stopped one to wait
// with, or nil: one is made if there is a wait.
func (w *Writer) giveWay(timer *time.Timer) {
	select {
	case <-w.idle: // a stale signal: inflight below says whether to wait
	default:
	}
	if w.inflight.Load() > 0 {
		if timer == nil {
			timer = time.NewTimer(time.Hour)
			timer.Stop()
		}
		timer.Reset(w.mergeWait)
		select {
		case <-w.idle:
		case <-timer.C:
		case <-w.stop:
		}
		timer.Stop()
	}
	runtime.Gosched()
}

// HoldMerges keeps the merger from installing merges until release is
// called (a merge under way is dropped), so the runs of the State it
// returns stay the prefix of every State until then: writes only append.
// A rebase onto a new base (livedelta.State.Rebase, DropFrozen) is then made
// from that State without the writer's lock and caught up with the
// appended runs under it (livedelta.State.CatchUp), instead of made whole
// with every write waiting.
func (w *Writer) HoldMerges() (st *livedelta.State, release func()) {
	w.mu.Lock()
	w.held++
	st = w.st
	w.mu.Unlock()
	return st, sync.OnceFunc(func() {
		w.mu.Lock()
		w.held--
		w.mu.Unlock()
		select {
		case w.merges <- struct{}{}:
		default:
		}
	})
}

// PrepareRebase makes rebase (a State's Rebase or DropFrozen onto a new
// base) of the delta without the writer's lock: merges held, the current
// State pre is rebased, then caught up once with the writes meanwhile, so
// that what the caller counts in under the lock (done's CatchUp of the
// State then, in Do) is only the writes of the last moment. release ends
// the hold; call it after the Do.
func (w *Writer) PrepareRebase(rebase func(*livedelta.State) *livedelta.State) (pre, done *livedelta.State, release func()) {
	pre, release = w.HoldMerges()
	defer func() {
		if done == nil {
			release() // rebase panicked: merges must not stay held
		}
	}()
	done = rebase(pre)
	if later := w.State(); later != pre {
		// (refused, as a freeze meanwhile would be, done is untouched and
		// the caller's CatchUp refuses too)
		if caught, ok := later.CatchUp(pre, done); ok {
			pre, done = later, caught
		}
	}
	return pre, done, release
}

// State is the current delta.
func (w *Writer) State() *livedelta.State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// Stats are the writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fsync
}

// Log is the write-ahead log (for inspection and truncation).
func (w *Writer) Log() *wal.WAL { return w.log }

// Do runs fn with the writer's lock held, so no write is applied
// meanwhile: fn gets the current State and returns the one to keep. fn
// publishes whatever readers must see (a freeze, a new base).
func (w *Writer) Do(fn func(st *livedelta.State) (*livedelta.State, error)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, err := fn(w.st)
	if err != nil {
		return err
	}
	w.st = st
	w.countRunsLocked()
	return nil
}

// Refold rebuilds the delta from the log, for when what it lies over
// changed beyond a rebase: the checkpoint moved (a superseding build, a
// discard), or the snapshot's columns did (schema s). Under the writer's
// lock, so no write is applied meanwhile, the records after `after` up to
// the last one applied are replayed over base with schema s as one bulk
// load; install then serves the new State (it runs under the lock too,
// and its error leaves the delta as it was). Records logged but not yet
// applied are applied over the new State afterwards, as usual.
func (w *Writer) Refold(ctx context.Context, after uint64, s *livedelta.Schema, base livedelta.Base, install func(*livedelta.State) error) (ReplayInfo, error) {
	t0 := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	rp, err := replay(ctx, w.log, w.mem, s, after, w.fsync.WALPosition, w.seq, base)
	info := ReplayInfo{Records: rp.records, Rows: rp.rows, Duration: time.Since(t0)}
	if err != nil {
		return info, fmt.Errorf("refold %s after %s: %w", w.log.Dir(), wal.PositionFromUint64(after), err)
	}
	if err := install(rp.st); err != nil {
		return info, err
	}
	w.st, w.schema = rp.st, s
	w.countRunsLocked()
	return info, nil
}

// AppliedLocked is the log position through which every write is applied
// to the State (what Refold replays through). Requires the writer's lock
// (inside Do).
func (w *Writer) AppliedLocked() uint64 { return w.fsync.WALPosition }

// countRunsLocked records how many unfrozen runs w.st has. Requires w.mu
// held (or the writer not yet started).
func (w *Writer) countRunsLocked() {
	w.runs.Store(int64(len(w.st.Runs()) - len(w.st.Frozen())))
}

// Close stops the committer (writes queued after it are refused) and
// closes the log.
func (w *Writer) Close() error {
	select {
	case <-w.stop:
		return nil
	default:
		close(w.stop)
	}
	<-w.done
	return w.log.Close()
}
