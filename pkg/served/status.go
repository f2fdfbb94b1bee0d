package served

import (
	"os"
	"path/filepath"
	"time"

	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// DeltaStatus is a dataset's live-write state in the status action's
// answer (absent for datasets that never took a write).
type DeltaStatus struct {
	Rows         int64   `json:"rows"`          // rows held in memory (revisions included)
	AddedRows    int64   `json:"added_rows"`    // rows they add to the snapshot's count
	Bytes        int64   `json:"bytes"`         // memory the rows hold
	Runs         int     `json:"runs"`          // sorted runs (generations) merged on read
	FrozenRuns   int     `json:"frozen_runs"`   // runs a compaction is folding
	Writes       int64   `json:"writes"`        // batches acknowledged since start-up
	WALPosition  string  `json:"wal_position"`  // durable through (segment:offset); a follower: applied through
	WALFolded    string  `json:"wal_folded"`    // the log's checkpoint the delta lies after (writes through it belong to vintages or were retired)
	WALBytes     int64   `json:"wal_bytes"`     // size of the wal/ segments
	WALSegments  int     `json:"wal_segments"`  // segment files
	FsyncLastMS  float64 `json:"fsync_last_ms"` // the last group commit's append + fsync
	Compactions  int64   `json:"compactions"`   // since start-up
	LastCompact  string  `json:"last_compaction"`
	CompactError string  `json:"compaction_error"` // the last failed compaction's error, "" once one succeeds
}

func (d *Dataset) deltaStatus() *DeltaStatus {
	var ds *DeltaStatus
	var after uint64
	if w := d.liveWriter(); w != nil {
		st, ws := w.State(), w.Stats()
		ds = &DeltaStatus{
			Rows: st.Rows(), AddedRows: st.Added(), Bytes: st.Bytes(), Runs: len(st.Runs()), FrozenRuns: len(st.Frozen()),
			Writes: ws.Writes, WALPosition: wal.PositionFromUint64(ws.WALPosition).String(),
			FsyncLastMS: float64(ws.FsyncLast.Microseconds()) / 1000,
		}
		after = d.folded.Load()
	} else if f := d.follower(); f != nil {
		st, fs := f.State(), f.Stats()
		ds = &DeltaStatus{
			Rows: st.Rows(), AddedRows: st.Added(), Bytes: st.Bytes(), Runs: len(st.Runs()),
			Writes: fs.Records, WALPosition: wal.PositionFromUint64(fs.Position).String(),
		}
		after = f.After()
	} else {
		return nil
	}
	ds.WALFolded = wal.PositionFromUint64(after).String()
	ds.WALBytes, ds.WALSegments = walSize(filepath.Join(d.dir, dsdir.WALDir))
	d.stMu.Lock()
	ds.Compactions, ds.CompactError = d.cs.count, d.cs.lastError
	if !d.cs.last.IsZero() {
		ds.LastCompact = d.cs.last.UTC().Format(time.RFC3339Nano)
	}
	d.stMu.Unlock()
	return ds
}

func walSize(dir string) (int64, int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	var n int64
	segs := 0
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && filepath.Ext(e.Name()) == ".wal" {
			n += fi.Size()
			segs++
		}
	}
	return n, segs
}

// DatasetStatus is one dataset in the status action's answer.
type DatasetStatus struct {
	Name        string `json:"name"`
	SnapshotID  uint64 `json:"snapshot_id"`
	ParentID    uint64 `json:"parent_id"`
	Rows        int64  `json:"rows"`
	Series      int64  `json:"series"`
	FirstPeriod string `json:"first_period"`
	LastPeriod  string `json:"last_period"`
	MappedBytes int64  `json:"mapped_bytes"`
	Created     string `json:"created"`
	OpenedAt    string `json:"opened_at"`
	Readers     int64  `json:"readers"` // in-flight references besides the server's own

	// Tiers (docs/OPERATIONS.md "Tiered snapshots"): a tiered snapshot
	// keeps each series' older rows in cold.vortex, decoded on demand.
	Tiered    bool  `json:"tiered"`
	ColdBytes int64 `json:"cold_bytes"` // size of cold.vortex (0: not tiered)
	ColdRows  int64 `json:"cold_rows"`  // rows in cold.vortex (all of them with --format vortex)

	// Reloads (docs/FLIGHT.md "Reload").
	CurrentID      uint64 `json:"current_id"`      // what CURRENT named at the last check (differs from snapshot_id while a reload fails)
	Reloads        int64  `json:"reloads"`         // snapshots swapped in since start-up
	ReloadFailures int64  `json:"reload_failures"` // reload attempts that failed since start-up
	LastReload     string `json:"last_reload"`     // time of the last swap, "" if none
	LastCheck      string `json:"last_check"`      // time CURRENT was last read
	LastError      string `json:"last_error"`      // the last failed attempt's error; "" once a reload succeeds or CURRENT names the served snapshot again
	LastErrorAt    string `json:"last_error_at"`   // when it failed, "" if never
	Draining       int64  `json:"draining"`        // replaced snapshots still mapped because readers hold them

	// Faults (docs/OPERATIONS.md "Faults"): damage found in a served
	// snapshot's files (a memory fault reading them, or a file changed
	// under the server).
	Failing       bool   `json:"failing"`                  // the snapshot CURRENT names is damaged; a fallback, or nothing, is served
	FailingReason string `json:"failing_reason,omitempty"` // what was found, naming the file when known
	FailingSince  string `json:"failing_since,omitempty"`
	DamagedID     uint64 `json:"damaged_id,omitempty"`  // the damaged snapshot
	FallbackID    uint64 `json:"fallback_id,omitempty"` // served instead of it (0: none found; requests are Unavailable)
	Faults        int64  `json:"faults"`                // damage found since start-up

	// Writes is how the dataset holds its live writes: "writer" (it takes
	// them), "following" (a read-only server tailing another's log),
	// "standby" (another server holds the log; this one follows it and
	// takes over when it is free), "failing" (the log could not be opened:
	// the snapshot alone is served, read-only; WritesReason says why), or
	// "none" (no log yet).
	Writes       string `json:"writes"`
	WritesReason string `json:"writes_reason,omitempty"`
	WritesSince  string `json:"writes_since,omitempty"`

	// Delta is the live-write state; absent when the dataset took none.
	Delta *DeltaStatus `json:"delta,omitempty"`
}

// Status reports the dataset's served snapshot, reloads, faults and live
// writes; false once it is closed.
func (d *Dataset) Status() (DatasetStatus, bool) {
	v := d.acquire()
	if v == nil {
		u := d.unopened.Load()
		if u == nil {
			return DatasetStatus{}, false
		}
		d.stMu.Lock()
		rs := d.st
		d.stMu.Unlock()
		return DatasetStatus{Name: d.name, Failing: true, FailingReason: "not served: " + u.reason,
			FailingSince: u.at.UTC().Format(time.RFC3339Nano), DamagedID: u.id, CurrentID: rs.currentID,
			ReloadFailures: rs.failures, LastError: rs.lastError, Writes: WritesNone}, true
	}
	defer v.Release()
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	m := v.Manifest()
	d.stMu.Lock()
	rs, fs := d.st, d.fs
	d.stMu.Unlock()
	info := v.r.Info()
	ws := d.writesStatus()
	st := DatasetStatus{
		Writes: ws.mode, WritesReason: ws.reason, WritesSince: ts(ws.since),
		Failing: fs.failing, FailingReason: fs.reason, DamagedID: fs.damaged, FallbackID: fs.fallback, Faults: fs.faults,
		Name: d.name, SnapshotID: v.ID(), ParentID: m.ParentID, Rows: info.Rows, Series: info.Series,
		FirstPeriod: m.Stats.FirstPeriod, LastPeriod: m.Stats.LastPeriod, MappedBytes: v.snap.MappedBytes(),
		Created: m.Created, OpenedAt: ts(v.opened), Readers: v.Readers(),
		CurrentID: rs.currentID, Reloads: rs.reloads, ReloadFailures: rs.failures,
		LastReload: ts(rs.lastReload), LastCheck: ts(rs.lastCheck), LastError: rs.lastError,
		LastErrorAt: ts(rs.lastErrorAt), Draining: d.draining.Load(),
		Delta: d.deltaStatus(),
	}
	if fs.failing {
		st.FailingSince = ts(fs.since)
	}
	if cf, ok := m.FileByRole(manifest.RoleCold); ok && v.snap.Tiered() {
		st.Tiered, st.ColdBytes, st.ColdRows = true, cf.Size, cf.Rows
	}
	return st, true
}

// ReloadFailing reports whether the snapshot CURRENT names is not served
// because its reload failed (metrics).
func (d *Dataset) ReloadFailing() bool {
	d.stMu.Lock()
	defer d.stMu.Unlock()
	return d.st.lastError != ""
}

// Failing reports whether the snapshot CURRENT names is damaged (metrics).
func (d *Dataset) Failing() bool { return d.faultStatus().failing }

// WritesFailing reports whether the dataset takes no writes for a fault:
// its log could not be opened (it serves its snapshot alone, read-only),
// or the open log refuses appends after a failed write (a full disk)
// until it heals (metrics).
func (d *Dataset) WritesFailing() bool { return d.writesStatus().mode == WritesFailing }

// writesStatus is the dataset's writes state, with a writer whose log
// refuses appends shown as failing, naming the cause.
func (d *Dataset) writesStatus() writesState {
	d.liveMu.Lock()
	ws := d.ws
	d.liveMu.Unlock()
	if ws.mode != WritesWriter {
		return ws
	}
	if w := d.live.Load(); w != nil {
		if err := w.Log().Failing(); err != nil {
			ws.mode = WritesFailing
			ws.reason = "the log refuses appends until the cause is gone (it retries by itself, no restart needed): " + err.Error()
		}
	}
	return ws
}

// Draining is the number of replaced snapshots still mapped because
// in-flight readers hold them (metrics).
func (d *Dataset) Draining() int64 { return d.draining.Load() }

// LiveStats are a dataset's live-write figures at one moment (metrics).
type LiveStats struct {
	Rows, Bytes       int64
	Runs              int
	WALBytes          int64
	Writes, WriteRows int64
	FsyncTotal        time.Duration
	Commits           int64
	Compactions       int64
	CompactSeconds    float64
}

// LiveStats returns the live-write figures; false when the dataset has
// taken no write.
func (d *Dataset) LiveStats() (LiveStats, bool) {
	w := d.liveWriter()
	if w == nil {
		if f := d.follower(); f != nil {
			st, fs := f.State(), f.Stats()
			return LiveStats{Rows: st.Rows(), Bytes: st.Bytes(), Runs: len(st.Runs()), Writes: fs.Records, WriteRows: fs.Rows}, true
		}
		return LiveStats{}, false
	}
	st, ws := w.State(), w.Stats()
	walBytes, _ := walSize(filepath.Join(d.dir, dsdir.WALDir))
	d.stMu.Lock()
	cs := d.cs
	d.stMu.Unlock()
	return LiveStats{Rows: st.Rows(), Bytes: st.Bytes(), Runs: len(st.Runs()), WALBytes: walBytes,
		Writes: ws.Writes, WriteRows: ws.Rows, FsyncTotal: ws.FsyncTotal, Commits: ws.Groups,
		Compactions: cs.count, CompactSeconds: cs.seconds}, true
}
