package served

// Faults in one dataset's files must not take the process down
// (docs/OPERATIONS.md "Faults").
//
// A snapshot's files are mapped. If one is truncated or rewritten in place
// while served (a restore, a cp over it, a partial rsync: published files
// are 0444, but root ignores that), reading a page past its new end is
// SIGBUS, and a rewritten page is garbage the reader trusts. So:
//
//   - every goroutine that touches mappings runs with
//     debug.SetPanicOnFault(true) (the gRPC handlers, through the call
//     middleware; the reload poller; the compaction loop), so a fault is a
//     panic the middleware recovers, not a crash. The fault's address says
//     which snapshot's mapping it was in (snapshot.Contains);
//   - the reload poller stats the served files every poll
//     (snapshot.FilesChanged), catching most changes before a reader
//     touches them;
//   - either way the dataset is marked failing (status, metrics, a log
//     line) and falls back to a good view: the snapshot CURRENT names if
//     that is another one and it verifies, else the newest older vintage
//     whose every file verifies. Without one, its requests fail with
//     Unavailable naming the damage while the other datasets keep
//     answering. The poller retries the damaged id (failedRetry), so a
//     restored file or a new publish ends the failing state by itself.
//
// Compaction is refused while a dataset is failing: folding the delta
// into a fallback (older) base would publish a snapshot without the rows
// the damaged one held.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// Fault kinds (the kind label of servingsnap_faults_total).
const (
	FaultMemory  = "memory_fault" // a read of a mapping faulted (SIGBUS)
	FaultChanged = "file_changed" // a served file changed size, mtime or inode
	FaultCorrupt = "corrupt_read" // a reader found the served bytes damaged (an error marked corrupt)
	// FaultUnopened: the snapshot CURRENT named could not be opened when
	// the server started (no view at all; not counted in the metric).
	FaultUnopened = "unopened"
)

// FaultKinds are every fault kind, for metrics that start at zero.
var FaultKinds = []string{FaultMemory, FaultChanged, FaultCorrupt}

// faultInfo is the damage found in one of a dataset's snapshots.
type faultInfo struct {
	id     uint64 // the damaged snapshot
	kind   string
	reason string
	at     time.Time
}

// faultState is what status reports about a dataset's damage. Guarded by
// the dataset's stMu.
type faultState struct {
	failing  bool // the snapshot CURRENT names is damaged; a fallback (or nothing) is served
	reason   string
	since    time.Time
	damaged  uint64 // the damaged snapshot's id
	fallback uint64 // the snapshot served instead (0: none)
	faults   int64  // damage found since start-up (memory faults, changed files)
}

// faultOf is the damage of snapshot id when it is the live one, nil
// otherwise. Requests check it after acquire, so it is one atomic load.
func (d *Dataset) faultOf(id uint64) *faultInfo {
	if f := d.fault.Load(); f != nil && f.id == id {
		return f
	}
	return nil
}

// ErrFailing is what FailingError matches: a dataset whose served snapshot
// is damaged and that has no good one to serve instead.
var ErrFailing = errors.New("dataset is failing")

// FailingError is what a request on a dataset whose live snapshot is
// damaged gets while no good snapshot could be found.
type FailingError struct {
	Dataset string
	ID      uint64 // the damaged snapshot
	Reason  string
	// Unopened: the snapshot could not be opened when the server started,
	// so nothing of the dataset is served yet.
	Unopened bool
}

func (e *FailingError) Error() string {
	if e.Unopened {
		return fmt.Sprintf("dataset %q is not served: snapshot %d could not be opened (%s); it is served once a good snapshot is published or restored", e.Dataset, e.ID, query.Truncate(e.Reason, 512))
	}
	return fmt.Sprintf("dataset %q is failing: snapshot %d is damaged (%s); no good snapshot to serve until it is restored or a new one is published", e.Dataset, e.ID, query.Truncate(e.Reason, 512))
}

// Is makes errors.Is(err, ErrFailing) hold.
func (e *FailingError) Is(target error) bool { return target == ErrFailing }

func (f *faultInfo) err(name string) error {
	return &FailingError{Dataset: name, ID: f.id, Reason: f.reason}
}

// markFailing records damage in snapshot id (if it is still served), logs
// it and switches to a good view if one exists. It returns at once if the
// damage is already known; the fallback runs under swapMu.
func (d *Dataset) markFailing(id uint64, kind string, cause error) {
	if d.faultOf(id) != nil {
		return
	}
	v := d.cur.Load()
	if v == nil || v.ID() != id {
		return // a replaced snapshot: its readers fail, the live one is fine
	}
	f := &faultInfo{id: id, kind: kind, reason: cause.Error(), at: time.Now()}
	if !d.fault.CompareAndSwap(nil, f) {
		if old := d.fault.Load(); old != nil && old.id == id {
			return
		}
		d.fault.Store(f)
	}
	d.stMu.Lock()
	d.fs.failing, d.fs.reason, d.fs.since, d.fs.damaged, d.fs.fallback = true, f.reason, f.at, id, 0
	d.fs.faults++
	// the poller re-verifies the damaged id only every failedRetry (a
	// reload action at once): a damaged file is not re-read every poll
	d.st.failedID, d.st.retryAt = id, f.at.Add(failedRetry)
	d.stMu.Unlock()
	if h := d.opt.Hooks.Fault; h != nil {
		h(d.name, kind)
	}
	d.log.Error("dataset failing: a served snapshot is damaged", "dataset", d.name, "snapshot_id", id,
		"kind", kind, "error", f.reason)
	d.fallBack()
}

// fallBack serves the best good snapshot in place of the damaged live
// one: what CURRENT names (if another id), then the other vintages, newest
// first; each is opened with every file checksummed. It runs with panics
// on faults turned into errors, as it reads files that may be damaged too.
func (d *Dataset) fallBack() {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	f := d.fault.Load()
	live := d.cur.Load()
	if f == nil || live == nil || live.ID() != f.id || d.closed {
		return
	}
	var cands []uint64
	if cur, err := d.ds.CurrentID(); err == nil && cur != f.id {
		cands = append(cands, cur)
	}
	ids, _ := d.ds.IDs()
	slices.Reverse(ids)
	for _, id := range ids {
		if id != f.id && !slices.Contains(cands, id) {
			cands = append(cands, id)
		}
	}
	for _, id := range cands {
		s, err := openSafely(d.dir, id, d.verified())
		if err == nil && s.Manifest.Dataset != d.name {
			err = fmt.Errorf("manifest %d names dataset %q", id, s.Manifest.Dataset)
		}
		var v *View
		if err == nil {
			if v, err = newView(d.name, s); err == nil {
				v.drained = d.drainedHook
				err = d.installBase(v)
			}
		}
		if err != nil {
			if s != nil {
				s.Close()
			}
			d.log.Warn("fallback snapshot not usable", "dataset", d.name, "snapshot_id", id, "error", err.Error())
			continue
		}
		d.stMu.Lock()
		d.fs.fallback = id
		d.st.failedID, d.st.retryAt = f.id, time.Now().Add(failedRetry)
		d.st.lastError, d.st.lastErrorAt = "snapshot "+fmt.Sprint(f.id)+" damaged: "+f.reason, time.Now()
		d.stMu.Unlock()
		d.log.Warn("dataset failing: serving a fallback snapshot", "dataset", d.name, "snapshot_id", id, "damaged_id", f.id)
		return
	}
	d.log.Error("dataset failing: no good snapshot to serve", "dataset", d.name, "damaged_id", f.id)
}

// openSafely opens vintage id with every file checksummed, on a goroutine
// whose faults are panics (snapshot.Open recovers them into corrupt
// errors).
func openSafely(dir string, id uint64, opt snapshot.Options) (*snapshot.Snapshot, error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return snapshot.OpenID(dir, id, opt)
}

// clearFailing ends the failing state: a snapshot that verified is served
// as what CURRENT names. Requires swapMu held.
func (d *Dataset) clearFailingLocked() {
	if d.fault.Swap(nil) == nil {
		return
	}
	d.stMu.Lock()
	was := d.fs
	d.fs.failing, d.fs.reason, d.fs.fallback = false, "", 0
	d.stMu.Unlock()
	d.log.Info("dataset no longer failing", "dataset", d.name, "damaged_id", was.damaged, "failing_for", time.Since(was.since).Round(time.Millisecond).String())
}

// CheckFiles is the poller's per-dataset check: a served file that
// changed marks the dataset failing before a reader faults on it.
func (d *Dataset) CheckFiles() {
	v := d.acquire()
	if v == nil {
		return
	}
	id, err := v.ID(), v.snap.FilesChanged()
	v.Release()
	if err != nil {
		d.markFailing(id, FaultChanged, err)
	}
}

// faultStatus copies the fault state.
func (d *Dataset) faultStatus() faultState {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	return d.fs
}

// FaultAddr is the address of a memory fault, if r (a recovered panic
// value) is one: with SetPanicOnFault, the runtime panics with a
// runtime.Error that has an Addr method.
func FaultAddr(r any) (uintptr, bool) {
	if _, ok := r.(runtime.Error); !ok {
		return 0, false
	}
	a, ok := r.(interface{ Addr() uintptr })
	if !ok {
		return 0, false
	}
	return a.Addr(), true
}

// Faulted looks for the snapshot of this dataset whose mapping holds addr,
// the address of a memory fault in where; if there is one, the dataset is
// marked failing (in the background: the fallback opens files) and the
// error to give the caller is returned, marked corrupt. nil: the address
// is not in this dataset's mappings.
func (d *Dataset) Faulted(addr uintptr, where string) error {
	snap := d.mappedAt(addr)
	if snap == 0 {
		return nil
	}
	err := corrupt.Errorf("dataset %s snapshot %d: memory fault at %#x reading its mapped files in %s (a file truncated or rewritten in place?)", d.name, snap, addr, where)
	go d.markFailing(snap, FaultMemory, err)
	return err
}

// mappedAt is the id of the dataset's snapshot whose mapping holds addr
// (0: none). Requires nothing; reads the set of mapped snapshots.
func (d *Dataset) mappedAt(addr uintptr) uint64 {
	d.mapMu.Lock()
	defer d.mapMu.Unlock()
	for s := range d.mapped {
		if s.Contains(addr) {
			return s.ID()
		}
	}
	return 0
}

// trackMapped and untrackMapped keep the set of this dataset's snapshots
// whose files are mapped (live and draining), for mappedAt.
func (d *Dataset) trackMapped(s *snapshot.Snapshot) {
	d.mapMu.Lock()
	if d.mapped == nil {
		d.mapped = map[*snapshot.Snapshot]struct{}{}
	}
	d.mapped[s] = struct{}{}
	d.mapMu.Unlock()
}

func (d *Dataset) untrackMapped(s *snapshot.Snapshot) {
	d.mapMu.Lock()
	delete(d.mapped, s)
	d.mapMu.Unlock()
}

// ReadFailed looks at the error a read of snapshot id ended with, when it
// was none of the client's doing (the transport decides that): one marked
// corrupt marks the dataset failing; any other unexpected one (an arrow-go
// error, say, that recovered a fault itself and lost its address) makes it
// check the served files.
func (d *Dataset) ReadFailed(id uint64, err error) {
	if err == nil {
		return
	}
	if corrupt.Is(err) {
		go d.markFailing(id, FaultCorrupt, err)
		return
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, query.ErrNotFound) || errors.Is(err, query.ErrInvalid) || errors.Is(err, query.ErrLimit) ||
		errors.Is(err, query.ErrStale) {
		return
	}
	go d.CheckFiles()
}

// ErrCompactFailing refuses compaction of a failing dataset.
var ErrCompactFailing = errors.New("dataset is failing (a served snapshot is damaged); compaction waits until it is restored")
