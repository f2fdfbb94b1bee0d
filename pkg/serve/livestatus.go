package serve

import (
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	WALPosition  string  `json:"wal_position"`  // durable through (segment:offset)
	WALFolded    string  `json:"wal_folded"`    // what the served snapshot folded in
	WALBytes     int64   `json:"wal_bytes"`     // size of the wal/ segments
	WALSegments  int     `json:"wal_segments"`  // segment files
	FsyncLastMS  float64 `json:"fsync_last_ms"` // the last group commit's append + fsync
	Compactions  int64   `json:"compactions"`   // since start-up
	LastCompact  string  `json:"last_compaction"`
	CompactError string  `json:"compaction_error"` // the last failed compaction's error, "" once one succeeds
}

// compactState is what a dataset remembers of its compactions.
type compactState struct {
	count     int64
	seconds   float64
	last      time.Time
	lastError string
	since     time.Time // first write not yet folded in (zero: none)
}

func (d *dataset) deltaStatus() *DeltaStatus {
	d.liveMu.Lock()
	w := d.live
	d.liveMu.Unlock()
	if w == nil {
		return nil
	}
	st, ws := w.State(), w.Stats()
	ds := &DeltaStatus{
		Rows: st.Rows(), AddedRows: st.Added(), Bytes: st.Bytes(), Runs: len(st.Runs()), FrozenRuns: len(st.Frozen()),
		Writes: ws.Writes, WALPosition: wal.PositionFromUint64(ws.WALPosition).String(),
		FsyncLastMS: float64(ws.FsyncLast.Microseconds()) / 1000,
	}
	if v := d.acquire(); v != nil {
		ds.WALFolded = wal.PositionFromUint64(v.Manifest.WALPosition).String()
		v.Release()
	}
	ds.WALBytes, ds.WALSegments = dirSize(filepath.Join(d.dir, WALDir))
	d.stMu.Lock()
	ds.Compactions, ds.CompactError = d.cs.count, d.cs.lastError
	if !d.cs.last.IsZero() {
		ds.LastCompact = d.cs.last.UTC().Format(time.RFC3339Nano)
	}
	d.stMu.Unlock()
	return ds
}

func dirSize(dir string) (int64, int) {
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
		d := c.s.datasets[name]
		d.liveMu.Lock()
		w := d.live
		d.liveMu.Unlock()
		if w == nil {
			continue
		}
		st, ws := w.State(), w.Stats()
		walBytes, _ := dirSize(filepath.Join(d.dir, WALDir))
		d.stMu.Lock()
		cs := d.cs
		d.stMu.Unlock()
		for _, m := range []struct {
			d *prometheus.Desc
			t prometheus.ValueType
			v float64
		}{
			{descDeltaRows, prometheus.GaugeValue, float64(st.Rows())},
			{descDeltaBytes, prometheus.GaugeValue, float64(st.Bytes())},
			{descDeltaRuns, prometheus.GaugeValue, float64(len(st.Runs()))},
			{descWALBytes, prometheus.GaugeValue, float64(walBytes)},
			{descWrites, prometheus.CounterValue, float64(ws.Writes)},
			{descWriteRows, prometheus.CounterValue, float64(ws.Rows)},
			{descFsync, prometheus.CounterValue, ws.FsyncTotal.Seconds()},
			{descCommits, prometheus.CounterValue, float64(ws.Groups)},
			{descCompactions, prometheus.CounterValue, float64(cs.count)},
			{descCompactSecs, prometheus.CounterValue, cs.seconds},
		} {
			ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v, name)
		}
	}
}
