package serve

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/delta"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// dataset is the per-dataset state: a pointer to the live view, swapped
// atomically. Every request does
//
//	v := d.acquire()   // load the pointer, take a reference on its snapshot
//	defer v.Release()
//
// and never touches a snapshot it holds no reference on. A reload opens the
// snapshot CURRENT names, validates it completely (checksums of every file,
// structure, schema the server can stream) while the old one keeps being
// served, then swaps the pointer: the dataset's reference on the old
// snapshot is dropped and its files are unmapped when its last in-flight
// reader releases it (pebble's readState pattern). Readers never wait for
// a reload: acquire takes no lock.
type dataset struct {
	name    string
	dir     string
	version string // the server's, recorded in the manifests its compactions write
	ds      *dsdir.Dir
	cold    *coldfile.Cache // the server's cache of decoded cold rows (nil: none)

	cur    atomic.Pointer[view]
	swapMu sync.Mutex // serialises reloads and compactions (acquire never takes it)
	viewMu sync.Mutex // serialises pointer swaps; taken after live's lock, never before
	closed bool       // under viewMu: no view may be published after close

	// live is the write path (nil until the first DoPut, or when the
	// dataset has a WAL at start-up). Lock order: swapMu, then live's lock,
	// then viewMu.
	liveMu sync.Mutex
	live   *live.Writer
	// codeCache speeds DoPut's checks against the served base (codecache.go).
	codeCache atomic.Pointer[codeCache]

	// onSwap, if set, is told about each published view (metrics).
	onSwap func(*view)
	// onReload, if set, is told about each reload attempt that opened
	// something or failed (metrics): ok false is a failure.
	onReload func(ok bool, dur time.Duration)

	draining atomic.Int64 // replaced snapshots whose readers have not all released them

	stMu sync.Mutex // guards st, cs and fs; never held across I/O
	st   reloadState
	cs   compactState
	fs   faultState

	// fault is the live snapshot's damage (fault.go); nil: none.
	fault atomic.Pointer[faultInfo]
	// onFault, if set, is told about each damage found (metrics).
	onFault func(kind string)
	// mapped is every snapshot of this dataset whose files are mapped
	// (live and draining): a fault's address is looked up in it.
	mapMu  sync.Mutex
	mapped map[*snapshot.Snapshot]struct{}
}

// verified are the options of every open after start-up (reload,
// fallback, compaction): every file checksummed, cold rows cached in the
// server's one cache.
func (d *dataset) verified() snapshot.Options {
	return snapshot.Options{VerifyData: true, ColdCache: d.cold}
}

// reloadState is what status reports about a dataset's reloads.
type reloadState struct {
	reloads, failures int64
	lastReload        time.Time // last successful swap (zero: none since start-up)
	lastCheck         time.Time // last time CURRENT was read
	lastError         string    // the last attempt's error; "" once one succeeds or CURRENT names the live snapshot again
	lastErrorAt       time.Time
	currentID         uint64 // what CURRENT named at the last check
	failedID          uint64 // the id whose open failed last (0: none)
	retryAt           time.Time
}

// Reload outcomes.
const (
	ReloadUnchanged = "unchanged" // CURRENT names the live snapshot
	ReloadSwapped   = "reloaded"  // a new snapshot is now served
	ReloadFailed    = "failed"    // the old snapshot is still served
	ReloadSkipped   = "skipped"   // a poll did not retry a failed id yet
)

// ReloadResult is one dataset's answer to a reload.
type ReloadResult struct {
	Dataset    string  `json:"dataset"`
	Result     string  `json:"result"`
	SnapshotID uint64  `json:"snapshot_id"`           // served after the reload
	PreviousID uint64  `json:"previous_id,omitempty"` // served before, when it changed
	CurrentID  uint64  `json:"current_id"`            // what CURRENT names (0: unreadable)
	Error      string  `json:"error,omitempty"`
	OpenMS     float64 `json:"open_ms,omitempty"`
}

// failedRetry is how long a poll waits before it retries opening an id
// that failed, when CURRENT still names it (an explicit reload always
// retries). A broken snapshot is not re-checksummed every poll.
const failedRetry = 30 * time.Second

// acquire returns the live view with a reference taken on its snapshot; the
// caller must Release it. It returns nil only if the dataset was closed.
// Acquire fails only when the snapshot's last reference is already gone,
// which happens only after a swap replaced the pointer, so the retry sees
// the newer view.
func (d *dataset) acquire() *view {
	for {
		v := d.cur.Load()
		if v == nil {
			return nil
		}
		if v.Acquire() {
			return v
		}
	}
}

// swap makes s the dataset's live snapshot. It takes over the caller's
// (opener's) reference on s when it succeeds; the previous snapshot loses
// the dataset's reference and is unmapped once its in-flight readers are
// done. If s cannot be served (its schema has a column the server cannot
// stream) or the dataset is closed, swap returns an error, keeps serving the
// old snapshot and leaves s to the caller.
func (d *dataset) swap(s *snapshot.Snapshot) (old *view, err error) {
	v, err := newView(d.name, s)
	if err != nil {
		return nil, err
	}
	v.drained = d.drainedHook
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	return d.install(v)
}

// install publishes v, taking over its reference on its snapshot, and
// drops the dataset's reference on the view it replaces. A replaced
// snapshot (not a new delta State over the same one) is counted as
// draining until its last reader releases it.
func (d *dataset) install(v *view) (*view, error) {
	d.viewMu.Lock()
	defer d.viewMu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("dataset %s is closed", d.name)
	}
	old := d.cur.Swap(v)
	d.trackMapped(v.Snapshot)
	if d.onSwap != nil {
		d.onSwap(v)
	}
	if old != nil {
		if old.Snapshot != v.Snapshot {
			d.draining.Add(1)
		}
		old.Release()
	}
	return old, nil
}

// drainedHook runs once per view, when its snapshot's files are unmapped.
func (d *dataset) drainedHook(v *view) {
	d.untrackMapped(v.Snapshot)
	if d.cur.Load() != v { // the live view is never "draining"
		d.draining.Add(-1)
	}
}

// reload serves the snapshot CURRENT names if it is not the live one: open
// it with every file checksummed, build its view, swap. Any failure leaves
// the live snapshot in place and is recorded (status, metrics, log). force
// (an explicit reload action) retries an id that failed before; a poll
// waits failedRetry first.
func (d *dataset) reload(force bool, log *slog.Logger) ReloadResult {
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	now := time.Now()
	live := d.cur.Load()
	res := ReloadResult{Dataset: d.name}
	if live != nil {
		res.SnapshotID = live.ID()
	}
	if d.closed || live == nil {
		res.Result, res.Error = ReloadFailed, "dataset is closed"
		return res
	}
	id, err := d.ds.CurrentID()
	d.stMu.Lock()
	d.st.lastCheck = now
	d.st.currentID = id
	// A damaged live snapshot is reopened (verified) like a new id: its
	// file may have been restored.
	same := id == live.ID() && d.faultOf(id) == nil
	skip := err == nil && !same && !force && id == d.st.failedID && now.Before(d.st.retryAt)
	if err == nil && same {
		d.st.lastError, d.st.failedID = "", 0 // back on the live snapshot (a rollback)
	}
	d.stMu.Unlock()
	res.CurrentID = id
	switch {
	case err != nil:
		return d.failed(res, id, fmt.Errorf("read CURRENT: %w", err), 0, log)
	case same:
		// CURRENT names the served snapshot, which is not damaged: a
		// rollback to the fallback (or to any good vintage) ends the
		// failing state
		d.clearFailingLocked(log)
		res.Result = ReloadUnchanged
		return res
	case skip:
		res.Result = ReloadSkipped
		d.stMu.Lock()
		res.Error = d.st.lastError
		d.stMu.Unlock()
		return res
	}
	t0 := time.Now()
	s, err := snapshot.OpenID(d.dir, id, d.verified())
	if err == nil && s.Manifest.Dataset != d.name {
		err = fmt.Errorf("manifest %d names dataset %q", id, s.Manifest.Dataset)
	}
	var v *view
	if err == nil {
		if v, err = newView(d.name, s); err == nil {
			v.drained = d.drainedHook
		}
	}
	if err == nil {
		err = d.installBase(v)
	}
	if err != nil {
		if s != nil {
			s.Close()
		}
		return d.failed(res, id, err, time.Since(t0), log)
	}
	dur := time.Since(t0)
	d.clearFailingLocked(log) // what CURRENT names is served and verified
	d.stMu.Lock()
	d.st.reloads++
	d.st.lastReload = time.Now()
	d.st.lastError, d.st.failedID = "", 0
	d.stMu.Unlock()
	if d.onReload != nil {
		d.onReload(true, dur)
	}
	res.Result, res.PreviousID, res.SnapshotID = ReloadSwapped, live.ID(), id
	res.OpenMS = float64(dur.Microseconds()) / 1000
	log.Info("dataset reloaded", "dataset", d.name, "snapshot_id", id, "previous_id", live.ID(),
		"rows", s.Manifest.Stats.Rows, "series", s.Manifest.Stats.Series, "mapped_bytes", s.MappedBytes(), "open_ms", res.OpenMS)
	return res
}

func (d *dataset) failed(res ReloadResult, id uint64, err error, dur time.Duration, log *slog.Logger) ReloadResult {
	now := time.Now()
	d.stMu.Lock()
	d.st.failures++
	d.st.lastError = err.Error()
	d.st.lastErrorAt = now
	d.st.failedID = id
	d.st.retryAt = now.Add(failedRetry)
	d.stMu.Unlock()
	if d.onReload != nil {
		d.onReload(false, dur)
	}
	res.Result, res.Error = ReloadFailed, err.Error()
	log.Error("reload failed; still serving the previous snapshot", "dataset", d.name,
		"serving", res.SnapshotID, "current_id", id, "error", err.Error())
	return res
}

// reloadStatus copies the reload state.
func (d *dataset) reloadStatus() reloadState {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	return d.st
}

// close drops the dataset's reference on its live snapshot; readers still
// holding one finish first. No reload publishes after it.
func (d *dataset) close() {
	d.liveMu.Lock()
	if d.live != nil {
		d.live.Close()
	}
	d.liveMu.Unlock()
	d.viewMu.Lock()
	defer d.viewMu.Unlock()
	d.closed = true
	if old := d.cur.Swap(nil); old != nil {
		d.draining.Add(1)
		old.Release()
	}
}

// view is what a request reads: one snapshot (its reference count pins the
// mappings) and, when the dataset takes live writes, the delta State merged
// over it; the read layer over both is built once per view. Nothing in it
// is per series or per row of the snapshot.
type view struct {
	*snapshot.Snapshot
	base    *query.SnapshotReader
	r       query.Reader // base, or base and st merged on read
	st      *delta.State // nil or empty: no live writes
	dataset string
	opened  time.Time

	drained  func(*view) // called once, when the snapshot's files are unmapped
	doneOnce sync.Once
}

func newView(name string, s *snapshot.Snapshot) (*view, error) {
	r, err := query.FromSnapshot(name, s)
	if err != nil {
		return nil, err
	}
	return &view{Snapshot: s, base: r, r: r, dataset: name, opened: time.Now()}, nil
}

// withState is a view of the same snapshot with st merged on read. It
// takes a reference of its own on the snapshot; false if the snapshot is
// already gone.
func (v *view) withState(st *delta.State) (*view, bool) {
	if !v.Snapshot.Acquire() {
		return nil, false
	}
	nv := &view{Snapshot: v.Snapshot, base: v.base, r: v.base, st: st, dataset: v.dataset, opened: v.opened, drained: v.drained}
	if st != nil && len(st.Runs()) > 0 {
		nv.r = query.NewComposite(v.base, st)
	}
	return nv, true
}

// defaultSchema is the schema of a query with default columns.
func (v *view) defaultSchema() *arrow.Schema { return v.r.Shape().DefaultSchema() }

// Release drops a reference on the view's snapshot; the last one unmaps
// its files. A snapshot's count never rises again once it reached zero, so
// seeing zero after our own Release means the files are gone (the Once
// absorbs several releasers seeing it).
func (v *view) Release() {
	v.Snapshot.Release()
	if v.Refs() == 0 && v.drained != nil {
		v.doneOnce.Do(func() { v.drained(v) })
	}
}
