package served

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// ErrReadOnly: the dataset takes no live writes (the server runs
// read-only).
var ErrReadOnly = errors.New("the server is read-only (--read-only)")

// ErrWritesUnavailable: the dataset serves its snapshot but takes no
// writes now (its log is held by another server, or could not be opened);
// *WritesError says why.
var ErrWritesUnavailable = errors.New("the dataset takes no writes now")

// WritesError says why a dataset takes no writes.
type WritesError struct {
	Dataset string
	Reason  string
}

func (e *WritesError) Error() string {
	return fmt.Sprintf("dataset %q takes no writes: %s", e.Dataset, e.Reason)
}

// Is makes errors.Is(err, ErrWritesUnavailable) hold.
func (e *WritesError) Is(target error) bool { return target == ErrWritesUnavailable }

// Writes modes: how a dataset's live writes are held (status).
const (
	WritesNone      = "none"      // no log: the dataset never took a write
	WritesWriter    = "writer"    // this server appends to the log
	WritesFollowing = "following" // a read-only server: it tails another's log
	WritesStandby   = "standby"   // another server holds the log; this one follows it and takes over when it is free
	WritesFailing   = "failing"   // the log could not be opened: the snapshot alone is served, read-only
)

// writesState is how the dataset holds its live writes. Guarded by liveMu.
type writesState struct {
	mode    string
	reason  string // why failing or standby
	since   time.Time
	retryAt time.Time // failing, standby: when Follow tries to open the log again
}

// standbyRetry is how often a standby tries to take the log over.
const standbyRetry = 250 * time.Millisecond

// liveTarget is the dataset as its write path sees it (live.Target).
type liveTarget struct{ d *Dataset }

func (t liveTarget) Base() livedelta.Base { return t.d.cur.Load().base }

// Publish swaps in a view of the same snapshot with st merged on read.
// Called with the writer's (or follower's) lock held, in log order.
func (t liveTarget) Publish(st *livedelta.State) {
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
func schemaOf(v *View) (*livedelta.Schema, error) {
	fields, _ := v.snap.Index().Attributes()
	return livedelta.NewSchema(v.snap.Schema(), fields)
}

func (d *Dataset) walDir() string { return filepath.Join(d.dir, dsdir.WALDir) }

// openLive opens the dataset's live writes at start-up, as the server's
// mode and the log allow: a read-only server follows the log; another
// opens it as its writer (replaying it) if it exists, and follows it in
// standby when another server holds it. Any other failure (damage, a
// schema the log's records cannot be carried to, an unreadable
// checkpoint) stays inside the dataset: it is served from its snapshot,
// read-only, and shows failing with the reason.
func (d *Dataset) openLive() {
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	if d.opt.ReadOnly {
		d.startFollowerLocked(WritesFollowing, "")
		return
	}
	if _, err := os.Stat(d.walDir()); err != nil {
		d.ws = writesState{mode: WritesNone, since: time.Now()}
		return
	}
	if err := d.openWriterLocked(); err != nil {
		d.liveFailedLocked(err)
	}
}

// liveFailedLocked puts the dataset's writes in standby (the log is held
// by another server: follow it) or failing (anything else). Requires
// liveMu.
func (d *Dataset) liveFailedLocked(err error) {
	if errors.Is(err, fileutil.ErrLocked) {
		holder := ""
		if pid := fileutil.LockHolder(filepath.Join(d.walDir(), "LOCK")); pid != 0 {
			holder = fmt.Sprintf(" (process %d)", pid)
		}
		d.startFollowerLocked(WritesStandby, "another server"+holder+" holds its write-ahead log; this one follows it and takes the writes over when it is free")
		d.ws.retryAt = time.Now().Add(standbyRetry)
		return
	}
	d.setFailingLocked(err)
}

func (d *Dataset) setFailingLocked(err error) {
	now := time.Now()
	d.ws = writesState{mode: WritesFailing, reason: err.Error(), since: now, retryAt: now.Add(failedRetry)}
	d.log.Error("live writes not served; the snapshot alone is served, read-only", "dataset", d.name, "error", err.Error())
}

// openWriterLocked opens the log as its writer and replays it onto the
// served snapshot. Requires liveMu.
func (d *Dataset) openWriterLocked() error {
	// Reloads wait (swapMu) while the log replays onto the served snapshot.
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	v := d.acquire()
	if v == nil {
		return fmt.Errorf("dataset %s: %w", d.name, ErrClosed)
	}
	defer v.Release()
	s, err := schemaOf(v)
	if err != nil {
		return err
	}
	cp, err := d.ds.CheckpointFor(v.Manifest())
	if err != nil {
		return err
	}
	w, info, err := live.Open(d.walDir(), s, cp.Folded, liveTarget{d}, live.Options{Logger: d.log, WAL: d.opt.WAL})
	if err != nil {
		return fmt.Errorf("dataset %s: %w", d.name, err)
	}
	if t := info.Truncated; t != nil {
		d.log.Warn("wal: torn tail cut", "dataset", d.name, "segment", t.Segment, "offset", t.Offset, "bytes", t.Bytes, "cause", fmt.Sprint(t.Cause))
	}
	if info.Records > 0 {
		d.log.Info("wal replayed", "dataset", d.name, "records", info.Records, "rows", info.Rows,
			"ms", float64(info.Duration.Microseconds())/1000, "checkpoint", wal.PositionFromUint64(cp.Folded).String())
	}
	if f := d.follow.Swap(nil); f != nil {
		f.Close()
	}
	d.live.Store(w)
	d.folded.Store(cp.Folded)
	d.ws = writesState{mode: WritesWriter, since: time.Now()}
	return nil
}

// startFollowerLocked follows the log read-only (mode WritesFollowing or
// WritesStandby). Requires liveMu.
func (d *Dataset) startFollowerLocked(mode, reason string) {
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	err := func() error {
		v := d.acquire()
		if v == nil {
			return fmt.Errorf("dataset %s: %w", d.name, ErrClosed)
		}
		defer v.Release()
		s, err := schemaOf(v)
		if err != nil {
			return err
		}
		cp, err := d.ds.CheckpointFor(v.Manifest())
		if err != nil {
			return err
		}
		f, info, err := live.OpenFollower(context.Background(), d.walDir(), s, cp.Folded, liveTarget{d}, d.log)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", d.name, err)
		}
		if info.Records > 0 {
			d.log.Info("wal followed", "dataset", d.name, "records", info.Records, "rows", info.Rows,
				"ms", float64(info.Duration.Microseconds())/1000, "checkpoint", wal.PositionFromUint64(cp.Folded).String())
		}
		d.follow.Store(f)
		d.folded.Store(cp.Folded)
		return nil
	}()
	if err != nil {
		d.setFailingLocked(err)
		return
	}
	d.ws = writesState{mode: mode, reason: reason, since: time.Now()}
}

// Writer returns the dataset's write path, opening (and replaying) its
// log first if need be: the first write of a dataset that never took one
// creates its log. A read-only server's datasets refuse (ErrReadOnly);
// one whose log another server holds or that failed to open refuses with
// a *WritesError naming why.
func (d *Dataset) Writer() (*live.Writer, error) {
	if d.opt.ReadOnly {
		return nil, fmt.Errorf("dataset %q: %w", d.name, ErrReadOnly)
	}
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	if w := d.live.Load(); w != nil {
		return w, nil
	}
	switch d.ws.mode {
	case WritesStandby, WritesFailing:
		// a last try now: the other server may have gone, the cause may be fixed
		if err := d.openWriterLocked(); err != nil {
			if d.ws.mode == WritesFailing && !errors.Is(err, fileutil.ErrLocked) {
				d.ws.reason = err.Error()
			}
			return nil, &WritesError{Dataset: d.name, Reason: d.ws.reason}
		}
		d.log.Info("live writes taken over", "dataset", d.name)
		return d.live.Load(), nil
	}
	if err := d.openWriterLocked(); err != nil {
		d.liveFailedLocked(err)
		return nil, &WritesError{Dataset: d.name, Reason: d.ws.reason}
	}
	return d.live.Load(), nil
}

// Follow is a step of the follow loop: a following dataset applies what
// the writer appended since the last step; one in standby, or failing,
// tries to open the log as its writer first (the other server stopped, the
// cause went away). It falls a compaction behind only when a reload is
// overdue: it then reloads, which refolds.
func (d *Dataset) Follow(ctx context.Context) {
	d.liveMu.Lock()
	mode, f := d.ws.mode, d.follow.Load()
	if mode == WritesNone && !d.opt.ReadOnly && time.Now().After(d.ws.retryAt) {
		// Another server may have started a log here since: follow it.
		d.ws.retryAt = time.Now().Add(standbyRetry)
		if wal.Held(d.walDir()) {
			d.liveFailedLocked(fileutil.ErrLocked)
			f = d.follow.Load()
		}
	}
	if (mode == WritesStandby || mode == WritesFailing) && time.Now().After(d.ws.retryAt) {
		err := d.openWriterLocked()
		switch {
		case err == nil:
			d.log.Info("live writes taken over", "dataset", d.name, "was", mode)
			f = nil
		case mode == WritesStandby && errors.Is(err, fileutil.ErrLocked):
			d.ws.retryAt = time.Now().Add(standbyRetry)
		case mode == WritesFailing && errors.Is(err, fileutil.ErrLocked):
			d.liveFailedLocked(err) // damage gone, but another server holds it: follow it
			f = d.follow.Load()
		default:
			d.ws.reason, d.ws.retryAt = err.Error(), time.Now().Add(failedRetry)
		}
	}
	d.liveMu.Unlock()
	if f == nil {
		return
	}
	if _, err := f.Poll(ctx); err != nil {
		if errors.Is(err, wal.ErrBehind) {
			d.Reload(true)
			d.swapMu.Lock()
			err = d.refoldLocked(d.cur.Load(), true)
			d.swapMu.Unlock()
		}
		if err != nil && !errors.Is(err, live.ErrClosed) {
			d.log.Warn("following the write-ahead log", "dataset", d.name, "error", err.Error())
		}
	}
}

// notWriterError is why a dataset that follows another server's log (or
// is read-only) does not compact or discard: its writer does.
func (d *Dataset) notWriterError() error {
	if d.opt.ReadOnly {
		return fmt.Errorf("dataset %q: %w", d.name, ErrReadOnly)
	}
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	return &WritesError{Dataset: d.name, Reason: d.ws.reason}
}

// liveWriter is the dataset's write path if it has one (nil: none).
func (d *Dataset) liveWriter() *live.Writer { return d.live.Load() }

// LiveWriter is the dataset's write path if it has one open (nil: it took
// no write since start-up and had no log to replay, or it follows one).
func (d *Dataset) LiveWriter() *live.Writer { return d.liveWriter() }

// follower is the dataset's follower of another server's log (nil: none).
func (d *Dataset) follower() *live.Follower { return d.follow.Load() }

// installBase serves a newly opened snapshot. With live writes, the
// delta moves over to it (its rows keep shadowing the new base until a
// compaction folds them), under the writer's lock so no write is lost in
// between; when the checkpoint moved with it (a superseding build) or its
// columns changed, the delta is rebuilt from the log instead (refold).
// Requires swapMu held.
func (d *Dataset) installBase(v *View) error {
	w, f := d.liveWriter(), d.follower()
	if w == nil && f == nil {
		_, err := d.install(v)
		return err
	}
	refold, err := d.needsRefold(v)
	if err != nil {
		return err
	}
	if refold {
		return d.refoldLocked(v, false)
	}
	if f != nil {
		return f.Rebase(v.base, func(st *livedelta.State) error {
			d.codes(v)
			v.setState(st)
			_, err := d.install(v)
			return err
		})
	}
	// The delta is counted over the new base off the writer's lock
	// (PrepareRebase), and caught up under it with the last writes.
	pre, done, release := w.PrepareRebase(func(st *livedelta.State) *livedelta.State { return st.Rebase(v.base) })
	defer release()
	return w.Do(func(st *livedelta.State) (*livedelta.State, error) {
		// writes go on over the new base: its code cache warms now,
		// before the next batch asks for it
		d.codes(v)
		st2, ok := st.CatchUp(pre, done)
		if !ok {
			st2 = st.Rebase(v.base)
		}
		v.setState(st2)
		if _, err := d.install(v); err != nil {
			return nil, err
		}
		return st2, nil
	})
}

// needsRefold reports whether the delta cannot simply be rebased onto v:
// the checkpoint moved past what the delta lies after, or v's columns are
// not the delta's. Requires swapMu held.
func (d *Dataset) needsRefold(v *View) (bool, error) {
	cp, err := d.ds.CheckpointFor(v.Manifest())
	if err != nil {
		return false, err
	}
	if cp.Folded > d.folded.Load() {
		return true, nil
	}
	s, err := schemaOf(v)
	if err != nil {
		return false, err
	}
	var cur *livedelta.Schema
	if w := d.liveWriter(); w != nil {
		cur = w.State().Schema()
	} else if f := d.follower(); f != nil {
		cur = f.Schema()
	}
	return cur != nil && !s.Write.Equal(cur.Write), nil
}

// refoldLocked rebuilds the delta from the log over v (the checkpoint
// CURRENT's manifest implies, v's columns) and serves v with it; v is the
// live view already when current is set, else a new one to install.
// Requires swapMu held.
func (d *Dataset) refoldLocked(v *View, current bool) error {
	if v == nil {
		return fmt.Errorf("dataset %s: %w", d.name, ErrClosed)
	}
	cp, err := d.ds.CheckpointFor(v.Manifest())
	if err != nil {
		return err
	}
	s, err := schemaOf(v)
	if err != nil {
		return err
	}
	target := v
	install := func(st *livedelta.State) error {
		if current {
			// the same snapshot, a new delta: a new view of it
			nv, ok := v.withState(st)
			if !ok {
				return fmt.Errorf("dataset %s: %w", d.name, ErrClosed)
			}
			target = nv
		} else {
			v.setState(st)
		}
		d.codes(target)
		if _, err := d.install(target); err != nil {
			if current {
				target.Release()
			}
			return err
		}
		return nil
	}
	var info live.ReplayInfo
	if w := d.liveWriter(); w != nil {
		info, err = w.Refold(context.Background(), cp.Folded, s, v.base, install)
	} else if f := d.follower(); f != nil {
		info, err = f.Refold(context.Background(), cp.Folded, s, v.base, install)
	}
	if err != nil {
		return fmt.Errorf("dataset %s: the live writes could not be carried over to snapshot %d: %w", d.name, v.ID(), err)
	}
	moved := cp.Folded != d.folded.Load()
	d.folded.Store(cp.Folded)
	d.log.Info("live writes refolded from the log", "dataset", d.name, "snapshot_id", v.ID(),
		"checkpoint", wal.PositionFromUint64(cp.Folded).String(), "checkpoint_moved", moved, "records", info.Records, "rows", info.Rows)
	if w := d.liveWriter(); w != nil && moved {
		if _, err := w.Log().TruncateBefore(wal.PositionFromUint64(cp.Folded)); err != nil {
			d.log.Warn("wal: segments retired were not removed", "dataset", d.name, "error", err.Error())
		}
	}
	return nil
}

// Put checks one batch of a client's write (batch is its number in the
// stream, for messages) against the served view, normalizes it and logs it
// through w, returning once it is durable and visible. The caller has
// validated the batch's Arrow data (it came off the wire) and counted it
// in flight (w.Incoming). Every allocation comes from mem.
func (d *Dataset) Put(ctx context.Context, w *live.Writer, mem memory.Allocator, rec arrow.RecordBatch, batch int) (live.Ack, error) {
	v := d.acquire()
	if v == nil {
		return live.Ack{}, fmt.Errorf("dataset %q: %w", d.name, ErrClosed)
	}
	k := newPutKnown(d, v)
	schema := w.State().Schema()
	norm, seriesCodes, err := livedelta.NormalizeCodes(ctx, mem, schema, rec, batch, k, k)
	if err != nil {
		v.Release()
		return live.Ack{}, err
	}
	checked := time.Now()
	// The write is sorted into a run on the caller's goroutine while the
	// committer logs it, which leaves the write path (one write at a time,
	// between the fsync and the ack) only the key index's bookkeeping.
	// Prepare reads the base's periods (which rows a write adds), so the
	// view stays held until it is done: a reload meanwhile must not unmap
	// the files under it.
	base := v.base
	release := sync.OnceFunc(v.Release)
	ack, err := w.PutPrepare(ctx, norm, func() (*livedelta.Prepared, error) {
		defer release()
		return livedelta.Prepare(ctx, mem, schema, norm, base, seriesCodes)
	})
	release() // PutPrepare may refuse the write before it prepares
	norm.Release()
	ack.Stages.Checked = checked
	if err != nil {
		return ack, fmt.Errorf("dataset %q: batch %d: %w", d.name, batch, err)
	}
	if ack.Rows > 0 { // a batch of no rows adds nothing for --compact-age to age
		d.stMu.Lock()
		if d.cs.since.IsZero() {
			d.cs.since = time.Now()
		}
		d.stMu.Unlock()
	}
	return ack, nil
}

// putKnown answers Normalize's attribute look-ups for one batch. The base
// index's attribute columns are fetched once per batch rather than once
// per series (index.Reader.Attributes copies its field list on every
// call, which was most of a DoPut's normalisation CPU); a series the base
// lacks is asked of the view's reader, which knows the delta's new series.
// It answers what query.SnapshotReader.Attr and query.Composite.Attr do:
// the base first. Base look-ups go through the dataset's codeCache.
type putKnown struct {
	codes codeReader
	cols  []arrow.Array
	rest  livedelta.Known // nil: no series beyond the base
}

func newPutKnown(d *Dataset, v *View) putKnown {
	x := v.snap.Index()
	k := putKnown{codes: d.codes(v).reader()}
	_, k.cols = x.Attributes()
	k.rest, _ = v.r.(livedelta.Known)
	return k
}

// BaseCode is the series' row in the base index (livedelta.BaseCoder).
func (k putKnown) BaseCode(id string) (int, bool) { return k.codes.lookup(id) }

// BaseCodes is BaseCode of every id (livedelta.BatchCoder).
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
