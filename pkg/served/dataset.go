package served

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// ErrClosed: the dataset was closed (the server is stopping).
var ErrClosed = errors.New("dataset is closed")

// Options configure the datasets a server opens.
type Options struct {
	// VerifyData checksums every file of the snapshot opened at start-up
	// (reloads, fallbacks and compactions always do).
	VerifyData bool
	// ColdCache is the server's one cache of decoded cold rows, shared by
	// every tiered snapshot it opens (nil: none, every cold read decodes).
	ColdCache *coldfile.Cache
	Logger    *slog.Logger
	// Version is the server's, recorded in the manifests its compactions
	// write.
	Version string
	// ReadOnly: the dataset takes no live writes.
	ReadOnly bool
	// Vintages is how many retained vintages besides the live one are
	// kept open for requests that name one (AcquireVintage); 0:
	// DefaultVintages, < 0: none (such requests are refused).
	Vintages int
	// Hooks tell the server's metrics what happens.
	Hooks Hooks
	// WAL are the options the dataset's log is opened with (zero: the
	// defaults); tests set its fault seam (wal.Options.Fault).
	WAL wal.Options
}

// Hooks are told what happens to a dataset (metrics). Each may be nil.
type Hooks struct {
	// Swapped is told about each published view.
	Swapped func(v *View)
	// Reloaded is told about each reload attempt that opened something or
	// failed: ok false is a failure.
	Reloaded func(dataset string, ok bool, dur time.Duration)
	// Fault is told about each damage found, by kind (FaultMemory, …).
	Fault func(dataset, kind string)
}

// Dataset is one served dataset over its life: a pointer to the live
// view, swapped atomically. Every request does
//
//	v, err := d.Acquire() // load the pointer, take a reference on its snapshot
//	defer v.Release()
//
// and never touches a snapshot it holds no reference on. A reload opens the
// snapshot CURRENT names, validates it completely (checksums of every file,
// structure, schema the server can stream) while the old one keeps being
// served, then swaps the pointer: the dataset's reference on the old
// snapshot is dropped and its files are unmapped when its last in-flight
// reader releases it (pebble's readState pattern). Readers never wait for
// a reload: Acquire takes no lock.
type Dataset struct {
	name string
	dir  string
	ds   *dsdir.Dir
	opt  Options
	log  *slog.Logger

	cur    atomic.Pointer[View]
	swapMu sync.Mutex // serialises reloads and compactions (acquire never takes it)
	viewMu sync.Mutex // serialises pointer swaps; taken after live's lock, never before
	closed bool       // under viewMu: no view may be published after close

	// live is the write path (nil until the first write, or when the
	// dataset has a WAL at start-up); follow, a read-only server's (or a
	// standby's) follower of another process's log. liveMu serialises
	// opening, closing and taking over them, and guards ws; readers load
	// the pointers. Lock order: liveMu, then swapMu, then the writer's or
	// follower's lock, then viewMu.
	liveMu sync.Mutex
	live   atomic.Pointer[live.Writer]
	follow atomic.Pointer[live.Follower]
	ws     writesState
	// folded is the log checkpoint the delta lies after; changed with
	// swapMu held.
	folded atomic.Uint64
	// codeCache speeds a write's checks against the served base (codecache.go).
	codeCache atomic.Pointer[codeCache]

	draining atomic.Int64 // replaced snapshots whose readers have not all released them

	stMu sync.Mutex // guards st, cs and fs; never held across I/O
	st   reloadState
	cs   compactState
	fs   faultState

	// vint holds the vintages requests named (vintages.go).
	vintMu sync.Mutex
	vint   vintageCache

	// fault is the live snapshot's damage (fault.go); nil: none.
	fault atomic.Pointer[faultInfo]
	// mapped is every snapshot of this dataset whose files are mapped
	// (live and draining): a fault's address is looked up in it.
	mapMu  sync.Mutex
	mapped map[*snapshot.Snapshot]struct{}

	// unopened is why the dataset has no view at all: the snapshot CURRENT
	// named could not be opened at start-up (nil: it was). The poller tries
	// again; requests are refused with the reason meanwhile.
	unopened atomic.Pointer[faultInfo]
}

// Open opens the dataset in dir (named name): its current snapshot, mapped
// and checked as opt says, and its live writes if it has a write-ahead
// log (replayed before it serves: a server never starts without an
// acknowledged write).
func Open(dir string, opt Options) (*Dataset, error) {
	if opt.Logger == nil {
		opt.Logger = discard
	}
	if opt.Version == "" {
		opt.Version = "dev"
	}
	mds, err := dsdir.Open(dir)
	if err != nil {
		return nil, err
	}
	snap, err := snapshot.Open(dir, snapshot.Options{VerifyData: opt.VerifyData, ColdCache: opt.ColdCache})
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", mds.Name, err)
	}
	d := &Dataset{name: mds.Name, dir: dir, ds: mds, opt: opt, log: opt.Logger}
	d.st.currentID = snap.ID()
	d.st.lastCheck = time.Now()
	if _, err := d.swap(snap); err != nil {
		snap.Close()
		return nil, fmt.Errorf("dataset %s: %w", d.name, err)
	}
	d.openLive()
	return d, nil
}

// Unopened is a dataset whose snapshot could not be opened (cause): it is
// registered all the same, so the failure stays inside it
// (docs/ARCHITECTURE.md, invariant 11): its requests are refused with the reason, status shows
// it failing, and Reload opens what CURRENT names once it can.
func Unopened(dir string, opt Options, cause error) (*Dataset, error) {
	if opt.Logger == nil {
		opt.Logger = discard
	}
	if opt.Version == "" {
		opt.Version = "dev"
	}
	mds, err := dsdir.Open(dir)
	if err != nil {
		return nil, err
	}
	d := &Dataset{name: mds.Name, dir: dir, ds: mds, opt: opt, log: opt.Logger}
	now := time.Now()
	id, _ := mds.CurrentID()
	d.unopened.Store(&faultInfo{id: id, kind: FaultUnopened, reason: cause.Error(), at: now})
	d.st.currentID, d.st.lastCheck = id, now
	d.st.lastError, d.st.lastErrorAt, d.st.failedID, d.st.retryAt = cause.Error(), now, id, now.Add(failedRetry)
	d.fs = faultState{failing: true, reason: cause.Error(), since: now, damaged: id}
	d.ws = writesState{mode: WritesNone, since: now}
	d.log.Error("dataset not served: its snapshot could not be opened; the other datasets are served", "dataset", d.name, "error", cause.Error())
	return d, nil
}

// Name is the dataset's name.
func (d *Dataset) Name() string { return d.name }

// Dir is the dataset's directory.
func (d *Dataset) Dir() string { return d.dir }

// verified are the options of every open after start-up (reload,
// fallback, compaction): every file checksummed, cold rows cached in the
// server's one cache.
func (d *Dataset) verified() snapshot.Options {
	return snapshot.Options{VerifyData: true, ColdCache: d.opt.ColdCache}
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

// Acquire returns the live view with a reference taken on its snapshot;
// the caller must Release it. It fails with ErrClosed once the dataset is
// closed, and with a *FailingError while the live snapshot is damaged and
// no good one could be served instead.
func (d *Dataset) Acquire() (*View, error) {
	v := d.acquire()
	if v == nil {
		if u := d.unopened.Load(); u != nil {
			return nil, &FailingError{Dataset: d.name, ID: u.id, Reason: u.reason, Unopened: true}
		}
		return nil, fmt.Errorf("dataset %q: %w", d.name, ErrClosed)
	}
	if f := d.faultOf(v.ID()); f != nil {
		v.Release()
		return nil, f.err(d.name)
	}
	return v, nil
}

// acquire returns the live view with a reference taken on its snapshot; the
// caller must Release it. It returns nil only if the dataset was closed.
// Acquire fails only when the snapshot's last reference is already gone,
// which happens only after a swap replaced the pointer, so the retry sees
// the newer view.
func (d *Dataset) acquire() *View {
	for {
		v := d.cur.Load()
		if v == nil {
			return nil
		}
		if v.acquire() {
			return v
		}
	}
}

// Serves reports whether v's snapshot is still the one the dataset serves,
// or a vintage it keeps open (a stream's lease ends some time after it is
// neither).
func (d *Dataset) Serves(v *View) bool {
	live := d.cur.Load()
	return live != nil && live.snap == v.snap || d.servesVintage(v)
}

// swap makes s the dataset's live snapshot. It takes over the caller's
// (opener's) reference on s when it succeeds; the previous snapshot loses
// the dataset's reference and is unmapped once its in-flight readers are
// done. If s cannot be served (its schema has a column the server cannot
// stream) or the dataset is closed, swap returns an error, keeps serving the
// old snapshot and leaves s to the caller.
func (d *Dataset) swap(s *snapshot.Snapshot) (old *View, err error) {
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
func (d *Dataset) install(v *View) (*View, error) {
	d.viewMu.Lock()
	defer d.viewMu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("dataset %s: %w", d.name, ErrClosed)
	}
	old := d.cur.Swap(v)
	d.trackMapped(v.snap)
	if h := d.opt.Hooks.Swapped; h != nil {
		h(v)
	}
	if old != nil {
		if old.snap != v.snap {
			d.draining.Add(1)
		}
		old.Release()
	}
	return old, nil
}

// drainedHook runs once per view, when its snapshot's files are unmapped.
func (d *Dataset) drainedHook(v *View) {
	d.untrackMapped(v.snap)
	if d.cur.Load() != v { // the live view is never "draining"
		d.draining.Add(-1)
	}
}

// Reload serves the snapshot CURRENT names if it is not the live one: open
// it with every file checksummed, build its view, swap. Any failure leaves
// the live snapshot in place and is recorded (status, metrics, log). force
// (an explicit reload action) retries an id that failed before; a poll
// waits failedRetry first.
func (d *Dataset) Reload(force bool) ReloadResult {
	d.swapMu.Lock()
	res, opened := d.reloadLocked(force), false
	if res.Result == ReloadSwapped && d.unopened.Swap(nil) != nil {
		opened = true
		d.stMu.Lock()
		d.fs.failing, d.fs.reason = false, ""
		d.stMu.Unlock()
	}
	d.swapMu.Unlock()
	if opened {
		// a dataset unopened at start-up: now its live writes (liveMu
		// before swapMu, so after the reload)
		d.log.Info("dataset served: its snapshot opened", "dataset", d.name, "snapshot_id", res.SnapshotID)
		d.openLive()
	}
	return res
}

// reloadLocked is Reload with swapMu held.
func (d *Dataset) reloadLocked(force bool) ReloadResult {
	now := time.Now()
	live := d.cur.Load()
	res := ReloadResult{Dataset: d.name}
	if live != nil {
		res.SnapshotID = live.ID()
	}
	if d.closed || (live == nil && d.unopened.Load() == nil) {
		res.Result, res.Error = ReloadFailed, "dataset is closed"
		return res
	}
	id, err := d.ds.CurrentID()
	d.stMu.Lock()
	d.st.lastCheck = now
	d.st.currentID = id
	// A damaged live snapshot is reopened (verified) like a new id: its
	// file may have been restored.
	same := live != nil && id == live.ID() && d.faultOf(id) == nil
	skip := err == nil && !same && !force && id == d.st.failedID && now.Before(d.st.retryAt)
	if err == nil && same {
		d.st.lastError, d.st.failedID = "", 0 // back on the live snapshot (a rollback)
	}
	d.stMu.Unlock()
	res.CurrentID = id
	switch {
	case err != nil:
		return d.failed(res, id, fmt.Errorf("read CURRENT: %w", err), 0)
	case same:
		// CURRENT names the served snapshot, which is not damaged: a
		// rollback to the fallback (or to any good vintage) ends the
		// failing state
		d.clearFailingLocked()
		res.Result = ReloadUnchanged
		// A follower's writer may have moved the checkpoint alone (a
		// discard): the writes it retired are not served here either.
		if d.follower() != nil {
			if cp, err := d.ds.CheckpointFor(live.Manifest()); err == nil && cp.Folded > d.folded.Load() {
				if err := d.refoldLocked(live, true); err != nil {
					res.Result, res.Error = ReloadFailed, err.Error()
				}
			}
		}
		return res
	case skip:
		res.Result = ReloadSkipped
		d.stMu.Lock()
		res.Error = d.st.lastError
		d.stMu.Unlock()
		return res
	}
	t0 := time.Now()
	v, err := d.openView(id)
	if err == nil {
		v.drained = d.drainedHook
		if err = d.installBase(v); err != nil {
			v.snap.Close()
		}
	}
	if err != nil {
		return d.failed(res, id, err, time.Since(t0))
	}
	s := v.snap
	dur := time.Since(t0)
	d.clearFailingLocked() // what CURRENT names is served and verified
	d.stMu.Lock()
	d.st.reloads++
	d.st.lastReload = time.Now()
	d.st.lastError, d.st.failedID = "", 0
	d.stMu.Unlock()
	if h := d.opt.Hooks.Reloaded; h != nil {
		h(d.name, true, dur)
	}
	var prev uint64
	if live != nil {
		prev = live.ID()
	}
	res.Result, res.PreviousID, res.SnapshotID = ReloadSwapped, prev, id
	res.OpenMS = float64(dur.Microseconds()) / 1000
	d.log.Info("dataset reloaded", "dataset", d.name, "snapshot_id", id, "previous_id", prev,
		"rows", s.Manifest.Stats.Rows, "series", s.Manifest.Stats.Series, "mapped_bytes", s.MappedBytes(), "open_ms", res.OpenMS)
	return res
}

func (d *Dataset) failed(res ReloadResult, id uint64, err error, dur time.Duration) ReloadResult {
	now := time.Now()
	d.stMu.Lock()
	d.st.failures++
	d.st.lastError = err.Error()
	d.st.lastErrorAt = now
	d.st.failedID = id
	d.st.retryAt = now.Add(failedRetry)
	d.stMu.Unlock()
	if h := d.opt.Hooks.Reloaded; h != nil {
		h(d.name, false, dur)
	}
	res.Result, res.Error = ReloadFailed, err.Error()
	d.log.Error("reload failed; still serving the previous snapshot", "dataset", d.name,
		"serving", res.SnapshotID, "current_id", id, "error", err.Error())
	return res
}

// Close drops the dataset's reference on its live snapshot; readers still
// holding one finish first. No reload publishes after it.
func (d *Dataset) Close() {
	d.closeVintages()
	d.liveMu.Lock()
	if w := d.live.Load(); w != nil {
		w.Close()
	}
	if f := d.follow.Load(); f != nil {
		f.Close()
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
