// Package sortwrite cooks a serving snapshot from a lake: it reads every
// Parquet file of the input, unifies their schemas, normalises periods,
// sorts all rows by (series id, period) through dictionary codes and a
// radix sort, splits per-series constants into the index, and writes the
// data file, the index sidecar and the manifest, published atomically.
//
// The work is done once, offline, so that a server only maps files.
package sortwrite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/progress"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/snapwrite"
)

// Duplicate policies.
const (
	OnDuplicateError = "error"
	OnDuplicateLast  = "last"
)

// Options configure a build.
type Options struct {
	Input string // directory of Parquet files, a Delta or Iceberg table, local or s3:// (see pkg/lake/source)
	// Lake selects the table version and says how to reach it; its Input
	// is taken from Input.
	Lake source.Options
	// IfChanged skips the build, returning ErrUnchanged, when the input
	// is a lake table whose snapshot is the one CURRENT was built from.
	IfChanged    bool
	Out          string // the dataset directory, ROOT/DATASET
	SeriesColumn string // default "series_id"
	PeriodColumn string // default "period"
	ValueColumn  string // default "value"
	OnDuplicate  string // "error" (default) or "last"
	BatchRows    int    // target rows per data batch; default datafile.DefaultBatchRows
	Parallel     int    // reader goroutines; default GOMAXPROCS
	Tool         string // recorded in the manifest, e.g. "servingsnap v0.1.0"
	// MemoryLimit is the memory budget of the build, in bytes (snapbuild
	// build --memory). When the in-memory build's estimate (about 28 bytes
	// a row for the key columns and the sort, plus each other column, from
	// the footers) fits, every row is held in memory and sorted at once;
	// otherwise the build switches to an external sort (external.go) that
	// spills sorted runs sized to the budget into the dataset's staging
	// area and merges them, so peak memory stays near the budget whatever
	// the input's size. 0 means 90% of the machine's available memory.
	MemoryLimit int64
	// Progress receives the phases' progress (nil: none).
	Progress progress.Reporter
	Now      func() time.Time
	// Lock says how to wait for another writer of the dataset (taken once
	// the rows are sorted, just before writing).
	Lock dataset.LockOptions
	// Shard, when Count > 0, keeps only the series of shard Index of Count
	// (shard.Of). Every row of the files read is read and attribute columns
	// are chosen over all their series: over the whole input, so all shards
	// of one input share one schema, unless the build reads only its
	// buckets' files (an Iceberg bucket partition, ShardPartition).
	Shard shard.Spec
	// ShardPartition, with Shard, names the lake's partition column that
	// holds each row's bucket of its series among Buckets under Shard's
	// function (Shard.Count dividing Buckets): the build reads only the
	// files of the shard's buckets and checks every row it reads is in its
	// file's bucket. Delta tables and hive-style Parquet folders; the zero
	// value reads every file.
	ShardPartition shard.Partition
	// Extra write more files into the staged snapshot once its data and
	// index are written, before it is published: the portable copy
	// (export.PortableStep, for --portable). Each gets the manifest as
	// it will be published but for the files, whose paths are relative to
	// the staging directory, and returns the entry of the file it wrote.
	// They are steps rather than options because they read the snapshot
	// back through the read side, which the builder does not import.
	Extra []ExtraFile
	// Published, when set, runs after CURRENT flips to the new snapshot,
	// still under the dataset's write lock, so whatever follows the flip
	// (the Iceberg table's commit, pkg/icebergtable) sees no other flip
	// first. Not called with NoPublish. Its error is returned with the
	// snapshot published (Summary.Published true).
	Published func(ctx context.Context, d *dataset.Dir, m *manifest.Manifest) error

	// MixedPeriodTypes accepts a period column that is integer in some
	// files and text or a date in others (refused by default as a type
	// conflict: see Unify).
	MixedPeriodTypes bool
	// AllowEmpty lets an input of no rows become an (empty) snapshot;
	// without it Build refuses one with ErrEmpty.
	AllowEmpty bool
	// MaxChange bounds how far the new snapshot's series and row counts
	// may move from CURRENT's, as a ratio in [0, 1): see checkChange.
	// 0 (the zero value) disables the check; the CLI's default is
	// DefaultMaxChange. Beyond it Build returns ErrImplausible.
	MaxChange float64
	// NoPublish writes the snapshot completely (files fsynced, manifest
	// written: a vintage) but does not flip CURRENT; `snapbuild publish`
	// (dataset.Writer.PublishInstalled) does that after verification.
	NoPublish bool
	// Tiers splits every series between the hot data file and the cold
	// file (--hot-since, --hot-rows; AllCold for --format vortex): see
	// coldfile.Policy. The zero Policy writes no cold file.
	Tiers coldfile.Policy
	// SupersedeWrites makes the new snapshot retire the dataset's live
	// writes acknowledged before the build started (their log position
	// is read first thing): once it is CURRENT they no longer shadow it;
	// later writes still do. Without it every live write keeps shadowing
	// the new snapshot until a compaction folds it (docs/OPERATIONS.md
	// "One truth for a dataset").
	SupersedeWrites bool

	// FromSplit builds shard Shard from its pieces in the split directory
	// a `snapbuild split` of every part wrote (split.go), reading no lake
	// file: Input and Lake are not used.
	FromSplit string

	// split is set by Split: no dataset directory, always the external
	// sort's runs.
	split bool

	// onPhase, when set (tests), is called as each phase begins: "scan",
	// "read", "sort", "write", "publish".
	onPhase func(phase string)
}

// ExtraFile writes one more file of a staged snapshot (see Options.Extra).
type ExtraFile func(ctx context.Context, staged string, m *manifest.Manifest) (manifest.File, error)

func (o *Options) defaults() error {
	if (o.Input == "" && o.Lake.Catalog.URI == "" && o.FromSplit == "") || (o.Out == "" && !o.split) {
		return fmt.Errorf("both an input directory and an output dataset directory are required")
	}
	if o.SeriesColumn == "" {
		o.SeriesColumn = "series_id"
	}
	if o.PeriodColumn == "" {
		o.PeriodColumn = "period"
	}
	if o.ValueColumn == "" {
		o.ValueColumn = "value"
	}
	if o.SeriesColumn == o.PeriodColumn || o.SeriesColumn == o.ValueColumn || o.PeriodColumn == o.ValueColumn {
		return fmt.Errorf("series, period and value columns must differ (got %q, %q, %q)", o.SeriesColumn, o.PeriodColumn, o.ValueColumn)
	}
	switch o.OnDuplicate {
	case "":
		o.OnDuplicate = OnDuplicateError
	case OnDuplicateError, OnDuplicateLast:
	default:
		return fmt.Errorf("on-duplicate %q: want %q or %q", o.OnDuplicate, OnDuplicateError, OnDuplicateLast)
	}
	if o.BatchRows == 0 {
		o.BatchRows = datafile.DefaultBatchRows
	}
	if o.BatchRows < 1 {
		return fmt.Errorf("batch rows must be positive, got %d", o.BatchRows)
	}
	if o.Shard.Count > 0 && (o.Shard.Index < 0 || o.Shard.Index >= o.Shard.Count) {
		return fmt.Errorf("shard %s: the index must be from 0 to %d", o.Shard, o.Shard.Count-1)
	}
	if _, err := shard.Func(o.Shard.Hash); o.Shard.Count > 0 && err != nil {
		return err
	}
	if o.ShardPartition.Column != "" {
		if err := o.ShardPartition.Fits(o.Shard); err != nil {
			return err
		}
	}
	if o.Parallel <= 0 {
		o.Parallel = runtime.GOMAXPROCS(0)
	}
	if err := checkMaxChange(o.MaxChange); err != nil {
		return err
	}
	if o.onPhase == nil {
		o.onPhase = func(string) {}
	}
	if o.Tool == "" {
		o.Tool = "servingsnap dev"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Summary reports a finished build; its JSON form is what `snapbuild build
// --json` prints (field names are stable, see docs/CLI.md).
type Summary struct {
	SnapshotID        uint64 `json:"snapshot_id"`
	ParentID          uint64 `json:"parent_id"`
	Dataset           string `json:"dataset"`
	Manifest          string `json:"manifest"`
	Rows              int64  `json:"rows"`
	Series            int64  `json:"series"`
	DuplicatesDropped int64  `json:"duplicates_dropped"`
	Inputs            int    `json:"inputs"`
	InputBytes        int64  `json:"input_bytes"`
	// BytesRead is what the build read: the input files (each counted
	// once, though it checksums them as well as decodes them), or with
	// --from-split its pieces, their manifests and the parts' meta files.
	BytesRead   int64         `json:"bytes_read"`
	Attributes  []string      `json:"attributes"`
	DataColumns []string      `json:"data_columns"`
	Files       []SummaryFile `json:"files"`
	// InputsPruned and InputBytesPruned are the data files a shard build
	// did not read: an Iceberg table partitioned by bucket(B, series
	// column), split by --shard-function iceberg-bucket into N shards with
	// N dividing B, holds the other shards' rows in other files; so does a
	// table read with ShardPartition.
	InputsPruned     int     `json:"inputs_pruned"`
	InputBytesPruned int64   `json:"input_bytes_pruned"`
	IndexDataRatio   float64 `json:"index_data_ratio"`
	Phases           Phases  `json:"phases"`
	Seconds          float64 `json:"seconds"`
	// Lineage of the input: its kind, location and lake snapshot.
	Lineage manifest.Lineage `json:"lineage"`
	// Unchanged is true when --if-changed skipped the build: the table's
	// snapshot is the one snapshot SnapshotID (CURRENT) was built from.
	Unchanged bool `json:"unchanged"`
	// Memory: the budget, whether the external sort ran, its runs and the
	// bytes it spilled, and the process's peak resident memory (VmHWM, 0
	// where unknown) when the build ended.
	MemoryBudget int64 `json:"memory_budget"`
	External     bool  `json:"external"`
	Runs         int   `json:"runs"`
	SpillBytes   int64 `json:"spill_bytes"`
	PeakRSS      int64 `json:"peak_rss"`
	// Published is true when CURRENT now names the snapshot; false after
	// --no-publish (the snapshot is a vintage waiting for `snapbuild
	// publish`) or when nothing was built.
	Published bool `json:"published"`
	// WALPosition is the live writes' checkpoint the snapshot records:
	// the writes logged after it shadow the snapshot (the manifest's
	// wal_position). With --supersede-writes, Superseded is the log's end
	// when the build started, which the checkpoint moves to (0: the build
	// superseded nothing).
	WALPosition uint64 `json:"wal_position"`
	Superseded  uint64 `json:"superseded_wal_position,omitempty"`
}

// ErrUnchanged is returned by Build with IfChanged when the lake table's
// snapshot equals the one CURRENT was built from; nothing was written.
var ErrUnchanged = errors.New("the table has not changed since the current snapshot was built")

// SummaryFile is one written file: the manifest's entry (FORMAT.md §2) in
// short. Tier and Rows say how a tiered build split the rows (data: hot,
// cold: cold; data.rows + cold.rows = rows).
type SummaryFile struct {
	Path string `json:"path"`
	Role string `json:"role"`
	Tier string `json:"tier,omitempty"`
	Size int64  `json:"size"`
	Rows int64  `json:"rows"`
}

// Phases are wall-clock seconds per build phase.
type Phases struct {
	Scan    float64 `json:"scan"`    // list inputs, read footers, unify schemas
	Read    float64 `json:"read"`    // decode Parquet into columns, checksum inputs
	Sort    float64 `json:"sort"`    // rank ids, radix sort, duplicates, series bounds
	Write   float64 `json:"write"`   // gather and write data and index files
	Publish float64 `json:"publish"` // fsync, rename, manifest, CURRENT
	// Extra is the time Options.Extra took (the portable copy); counted
	// here, not in Write.
	Extra float64 `json:"extra,omitempty"`
	// Published is the time Options.Published took (the Iceberg commit).
	Published float64 `json:"published,omitempty"`
}

// Build reads the lake at opt.Input and publishes a new snapshot of the
// dataset at opt.Out (with NoPublish: installs it as a vintage CURRENT does
// not name). On error nothing becomes visible. Build stops at the next
// row group, batch or phase once ctx is done (SIGINT, SIGTERM), removes
// what it staged and returns an error wrapping ctx's.
func Build(ctx context.Context, opt Options) (*Summary, error) {
	r, err := startBuild(opt)
	if err != nil {
		return nil, err
	}
	var t *table
	var fromSplit *external
	if r.opt.FromSplit != "" {
		if t, fromSplit, err = r.scanSplit(); err != nil {
			return nil, err
		}
		if sum, ok := r.unchanged(); ok {
			return sum, ErrUnchanged
		}
	} else {
		tbl, err := r.openInput(ctx)
		if err != nil {
			return nil, err
		}
		defer tbl.Close()
		if sum, ok := r.unchanged(); ok {
			return sum, ErrUnchanged
		}
		if t, err = r.scanInput(ctx, tbl); err != nil {
			return nil, err
		}
		defer t.mem.release() // nothing read from the stores outlives Build
	}

	// The staging directory is removed by this one deferred cleanup unless
	// the publish moved it into place; it runs before the lock is released.
	defer r.closeWriter()
	published := false
	defer func() {
		if !published && r.staged != "" {
			os.RemoveAll(r.staged)
		}
	}()
	var b *built
	switch {
	case fromSplit != nil:
		b, err = r.sortFromSplit(ctx, t, fromSplit)
	case t.external:
		b, err = r.sortExternal(ctx, t)
	default:
		b, err = r.sortInMemory(ctx, t)
	}
	if err != nil {
		return nil, err
	}
	r.opt.onPhase("publish")
	m := r.manifestOf(t, b)
	files, err := r.runExtra(ctx, m, b.files)
	if err != nil {
		return nil, err
	}
	r.listFiles(m, files)
	if err := r.publish(ctx, m); err != nil {
		return nil, err
	}
	published = true
	var afterErr error
	if r.opt.Published != nil && !r.opt.NoPublish {
		afterErr = r.opt.Published(ctx, r.ds, m)
		r.phase(&r.sum.Phases.Published)
	}
	sum := r.summarize(t, b, m)
	if afterErr != nil {
		return sum, fmt.Errorf("snapshot %d of %s is published (CURRENT names it), but what follows the flip failed: %w", r.id, r.ds.Name, afterErr)
	}
	return sum, nil
}

// builder is one run of Build: what its steps share, from the options to
// the staging directory a publish moves into place.
type builder struct {
	opt    Options
	ds     *dataset.Dir
	sum    *Summary
	start  time.Time
	lap    time.Time // end of the last timed phase
	rep    progress.Reporter
	lin    manifest.Lineage
	sums   []string // input checksums, by input
	w      *dataset.Writer
	staged string // the snapshot's staging directory; "" until staged
	id     uint64
	parent uint64
	prev   *manifest.Manifest // the current snapshot, nil when none or unreadable
	// buckets is each kept data file's bucket, read from the partition
	// column of Options.ShardPartition; nil without one.
	buckets map[*source.File]int
	split   *splitSet // the pieces of a build with FromSplit
}

// startBuild checks the options and opens the dataset, noting the log
// position a build with SupersedeWrites replaces.
func startBuild(opt Options) (*builder, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	ds, err := dataset.Open(opt.Out)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	r := &builder{opt: opt, ds: ds, sum: &Summary{Dataset: ds.Name}, start: now, lap: now, rep: progress.Or(opt.Progress)}
	if opt.SupersedeWrites {
		// Every write acknowledged before this moment is in the log by now.
		if r.sum.Superseded, err = ds.LiveEnd(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// phase stores the seconds since the last timed phase in dst.
func (r *builder) phase(dst *float64) {
	now := time.Now()
	*dst = now.Sub(r.lap).Seconds()
	r.lap = now
}

// openInput opens the lake table and keeps this shard's files, refusing a
// table (or shard) with no data file: there would be nothing to build.
func (r *builder) openInput(ctx context.Context) (*source.Table, error) {
	lo := r.opt.Lake
	lo.Input = r.opt.Input
	tbl, err := source.Open(ctx, lo)
	if err != nil {
		return nil, err
	}
	if len(tbl.Files) == 0 {
		tbl.Close()
		return nil, fmt.Errorf("%s at version %s holds no data files: nothing to build", tbl.Location, tbl.SnapshotID)
	}
	if r.opt.ShardPartition.Column != "" {
		r.buckets, r.sum.InputsPruned, r.sum.InputBytesPruned, err = prunePartitions(tbl, r.opt)
		if err != nil {
			tbl.Close()
			return nil, err
		}
	} else {
		r.sum.InputsPruned, r.sum.InputBytesPruned = pruneBuckets(tbl, r.opt)
	}
	if len(tbl.Files) == 0 {
		tbl.Close()
		return nil, fmt.Errorf("%s at version %s holds no data file of shard %s: nothing to build", tbl.Location, tbl.SnapshotID, r.opt.Shard)
	}
	r.lin = lineageOf(tbl, r.opt)
	r.sum.Lineage = r.lin
	return tbl, nil
}

// unchanged answers IfChanged: the summary of the current snapshot when it
// was built from the same input with the same tiers, so nothing is built.
func (r *builder) unchanged() (*Summary, bool) {
	if !r.opt.IfChanged {
		return nil, false
	}
	cur, ok := unchanged(r.ds, r.lin, r.opt.Tiers)
	if !ok {
		return nil, false
	}
	sum := r.sum
	sum.SnapshotID, sum.Unchanged = cur, true
	sum.Manifest = filepath.Join(r.ds.Dir, filepath.FromSlash(dataset.ManifestPath(cur)))
	sum.Seconds = time.Since(r.start).Seconds()
	return sum, true
}

// scanInput reads the inputs' footers and unifies their schemas, choosing
// between the in-memory and the external sort; it refuses an empty input.
func (r *builder) scanInput(ctx context.Context, tbl *source.Table) (*table, error) {
	opt := r.opt
	opt.onPhase("scan")
	ph := r.rep.Phase("scan", 0, 0)
	t, err := scan(ctx, opt, tbl)
	if err != nil {
		return nil, interrupted(ctx, err) // the phase stays open: drawn as stopped
	}
	ph.Done()
	if err := checkEmpty(int64(t.rows), len(t.inputs), tbl.Location, opt); err != nil {
		t.mem.release()
		return nil, err
	}
	r.phase(&r.sum.Phases.Scan)
	r.sum.MemoryBudget, r.sum.External = t.budget, t.external
	r.sums = make([]string, len(t.inputs))
	return t, nil
}

// stage takes the dataset's write lock, the next snapshot id and a
// staging directory, and loads the current snapshot to compare with.
func (r *builder) stage(ctx context.Context) error {
	var err error
	if r.w, err = r.ds.LockForWriteWith(ctx, r.opt.Lock); err != nil {
		return interrupted(ctx, err)
	}
	if r.id, err = r.w.NextID(); err != nil {
		return err
	}
	if cur, err := r.ds.CurrentID(); err == nil {
		r.parent = cur
		r.prev, _ = r.ds.Load(cur) // unreadable: nothing to compare with
	}
	r.staged, err = r.w.Stage()
	return err
}

// checkMerged is what every external merge (of spilled runs, or of a
// split's pieces) is checked for once its rows are written: the merge's
// own error, an interruption, the series ids, and the change against the
// current snapshot (--max-change). The error says whether the build was
// interrupted.
func (r *builder) checkMerged(ctx context.Context, t *table, res *extResult, err error) error {
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		err = t.checkSeriesIDs()
	}
	if err == nil {
		err = checkChange(r.prev, res.rows, res.series, r.opt)
	}
	if err != nil {
		return interrupted(ctx, err)
	}
	return nil
}

// closeWriter releases the write lock, if stage took it.
func (r *builder) closeWriter() {
	if r.w != nil {
		r.w.Close()
	}
}

// sortExternal reads, sorts and writes an input over the memory budget in
// spilled runs merged into the staging directory.
func (r *builder) sortExternal(ctx context.Context, t *table) (*built, error) {
	// The spill files live in a second staging directory: removed
	// when the build ends either way, and by the next writer's lock
	// (which clears the staging area) after a crash.
	r.opt.onPhase("read")
	if err := r.stage(ctx); err != nil {
		return nil, err
	}
	spill, err := r.w.Stage()
	if err != nil {
		return nil, err
	}
	res, err := t.buildExternal(ctx, r.opt, t.budget, r.staged, spill, r.sums, r.rep)
	os.RemoveAll(spill)
	if err := r.checkMerged(ctx, t, res, err); err != nil {
		return nil, err
	}
	var total float64
	r.phase(&total)
	// Runs are read and sorted together; the merge writes.
	r.sum.Phases.Read, r.sum.Phases.Write = res.runSeconds, total-res.runSeconds
	r.sum.Runs, r.sum.SpillBytes = res.runs, res.spilled
	return &res.built, nil
}

// sortInMemory reads every input into memory, sorts it there, then stages
// and writes the data and index files.
func (r *builder) sortInMemory(ctx context.Context, t *table) (*built, error) {
	opt := r.opt
	opt.onPhase("read")
	if err := t.readAll(ctx, opt.Parallel, r.sums, r.rep); err != nil {
		return nil, interrupted(ctx, err)
	}
	if err := t.checkSeriesIDs(); err != nil {
		return nil, err
	}
	if err := t.checkBuckets(r.buckets, opt); err != nil {
		return nil, err
	}
	t.value.noteNulls()
	for _, s := range t.others {
		s.noteNulls()
	}
	r.phase(&r.sum.Phases.Read)

	lay, err := r.sortLayout(ctx, t)
	if err != nil {
		return nil, err
	}
	if err := r.stage(ctx); err != nil {
		return nil, err
	}
	if err := checkChange(r.prev, int64(lay.rows()), int64(len(lay.series)), opt); err != nil {
		return nil, err
	}
	opt.onPhase("write")
	ph := r.rep.Phase("write", int64(lay.rows()), 0)
	files, schemas, err := t.write(ctx, r.staged, lay, opt, ph)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	ph.Done()
	r.phase(&r.sum.Phases.Write)
	return &built{files: files, schemas: schemas, attrs: lay.attrNames(t), rows: int64(lay.rows()),
		series: int64(len(lay.series)), dropped: lay.dropped, minP: lay.minPeriod, maxP: lay.maxPeriod,
		otherShards: lay.otherShards}, nil
}

// sortLayout ranks the series and sorts the rows in memory: the order the
// data file is written in.
func (r *builder) sortLayout(ctx context.Context, t *table) (*layout, error) {
	r.opt.onPhase("sort")
	if err := ctx.Err(); err != nil {
		return nil, interrupted(ctx, err)
	}
	ph := r.rep.Phase("sort", int64(t.rows), 0)
	lay, err := t.layout(ctx, r.opt)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	ph.Done()
	r.phase(&r.sum.Phases.Sort)
	return lay, nil
}

// manifestOf assembles the new snapshot's manifest, all but its files.
func (r *builder) manifestOf(t *table, b *built) *manifest.Manifest {
	opt := r.opt
	s := snapwrite.Snapshot{
		ID:         r.id,
		ParentID:   r.parent,
		Dataset:    r.ds.Name,
		Created:    opt.Now(),
		Tool:       opt.Tool,
		Data:       b.schemas.data,
		Index:      b.schemas.index,
		Attributes: b.attrs,
		Stats:      manifest.Stats{Rows: b.rows, Series: b.series, DuplicatesDropped: b.dropped},
		First:      b.minP,
		Last:       b.maxP,
		Tiers:      opt.Tiers,
		Build: manifest.Build{
			SeriesColumn: opt.SeriesColumn,
			PeriodColumn: opt.PeriodColumn,
			ValueColumn:  opt.ValueColumn,
			OnDuplicate:  opt.OnDuplicate,
			BatchRows:    opt.BatchRows,
		},
		Lineage: r.lin,
	}
	s.Build.HotSince, s.Build.HotRows, s.Build.DataFormat = opt.Tiers.Fields()
	if opt.Shard.Count > 0 {
		s.Shard = &manifest.Shard{Index: opt.Shard.Index, Count: opt.Shard.Count, Hash: opt.Shard.HashName(), OtherShardRows: b.otherShards}
	}
	s.Lineage.Inputs = nil
	for i, in := range t.inputs {
		s.Lineage.Inputs = append(s.Lineage.Inputs, manifest.Input{Path: in.Rel, Size: in.Size, Rows: in.Rows, Checksum: r.sums[i]})
		r.sum.InputBytes += in.Size
	}
	return s.Manifest()
}

// runExtra runs Options.Extra (the portable copy) over the staged
// snapshot; each step sees the files written so far and adds one.
func (r *builder) runExtra(ctx context.Context, m *manifest.Manifest, files []manifest.File) ([]manifest.File, error) {
	if len(r.opt.Extra) == 0 {
		return files, nil
	}
	for _, step := range r.opt.Extra {
		m.Files = files
		f, err := step(ctx, r.staged, m)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	m.Files = nil
	r.phase(&r.sum.Phases.Extra)
	return files, nil
}

// listFiles names the files in the manifest by their place in the
// published snapshot, and in the summary.
func (r *builder) listFiles(m *manifest.Manifest, files []manifest.File) {
	snapwrite.PlaceFiles(m, files)
	for _, f := range m.Files {
		r.sum.Files = append(r.sum.Files, SummaryFile{Path: f.Path, Role: f.Role, Tier: f.Tier, Size: f.Size, Rows: f.Rows})
	}
}

// publish records the live-write boundary and moves the staged snapshot
// into place: published (CURRENT names it) or, with NoPublish, installed.
func (r *builder) publish(ctx context.Context, m *manifest.Manifest) error {
	if err := ctx.Err(); err != nil {
		return interrupted(ctx, err)
	}
	if err := liveBoundary(r.w, r.ds, m, r.sum.Superseded); err != nil {
		return err
	}
	r.sum.WALPosition = m.WALPosition
	// From here the publish runs to its end: it takes milliseconds, and
	// each of its steps leaves the dataset consistent anyway.
	ph := r.rep.Phase("publish", 0, 0)
	var err error
	if r.opt.NoPublish {
		err = r.w.Install(r.staged, m)
	} else {
		err = r.w.Publish(r.staged, m, dataset.Change{Action: dataset.ActionBuild})
	}
	if err != nil {
		return err
	}
	ph.Done()
	r.sum.Published = !r.opt.NoPublish
	r.phase(&r.sum.Phases.Publish)
	return nil
}

// summarize fills the summary of a published snapshot.
func (r *builder) summarize(t *table, b *built, m *manifest.Manifest) *Summary {
	sum := r.sum
	sum.SnapshotID, sum.ParentID = r.id, r.parent
	sum.Manifest = filepath.Join(r.ds.Dir, filepath.FromSlash(dataset.ManifestPath(r.id)))
	sum.Rows, sum.Series, sum.DuplicatesDropped = m.Stats.Rows, m.Stats.Series, b.dropped
	sum.Inputs = len(t.inputs)
	sum.BytesRead = sum.InputBytes
	if r.split != nil {
		sum.BytesRead = r.split.bytesRead
	}
	sum.Attributes = m.Schema.Attributes
	sum.Lineage = m.Lineage
	for _, c := range m.Schema.Data {
		sum.DataColumns = append(sum.DataColumns, c.Name)
	}
	// The ratio is to the files holding rows: with --format vortex the hot
	// file holds only a schema, and the index is compared with cold.vortex.
	d, _ := m.FileByRole(manifest.RoleData)
	x, _ := m.FileByRole(manifest.RoleIndex)
	c, _ := m.FileByRole(manifest.RoleCold)
	if rowBytes := d.Size + c.Size; rowBytes > 0 {
		sum.IndexDataRatio = float64(x.Size) / float64(rowBytes)
	}
	sum.Seconds = time.Since(r.start).Seconds()
	sum.PeakRSS = peakRSS()
	return sum
}

// built is what either path (in memory, external) wrote.
type built struct {
	files       []manifest.File
	schemas     schemas
	attrs       []string
	rows        int64
	series      int64
	dropped     int64
	minP        int32
	maxP        int32
	otherShards int64 // rows of other shards' series, left out
}

// peakRSS is the process's VmHWM from /proc/self/status, in bytes (0 if
// unknown).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// ErrInterrupted is returned (wrapping the context's error) when Build
// stopped because its context was done: nothing was published and what it
// staged was removed.
var ErrInterrupted = errors.New("build interrupted")

// interrupted marks err as an interruption when ctx is done: an error a
// reader returned because its context was cancelled says more about the
// signal than about the file it was reading.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return fmt.Errorf("%w (%w): nothing published, staging removed", ErrInterrupted, context.Cause(ctx))
}

// scan lists the inputs, reads their footers and unifies their schemas.
func scan(ctx context.Context, opt Options, tbl *source.Table) (*table, error) {
	ins := discover(tbl)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opt.Parallel * 2)
	for _, in := range ins {
		g.Go(func() error { return in.readFooter(gctx) })
	}
	if err := g.Wait(); err != nil {
		for _, in := range ins {
			in.release()
		}
		return nil, err
	}
	schemas := make([]FileSchema, len(ins))
	var rows int64
	for i, in := range ins {
		in.FirstRow = rows
		rows += in.Rows
		schemas[i] = in.Schema
	}
	if rows >= noRow {
		return nil, fmt.Errorf("input holds %d rows; one snapshot holds at most %d", rows, uint32(noRow-1))
	}
	unify := Unify
	if opt.MixedPeriodTypes {
		unify = UnifyMixedPeriods
	}
	u, err := unify(schemas, map[string]bool{opt.PeriodColumn: true})
	if err != nil {
		return nil, err
	}
	find := func(name, role string) (Column, error) {
		i := u.Index(name)
		if i < 0 {
			var names []string
			for _, c := range u.Columns {
				names = append(names, c.Name)
			}
			return Column{}, fmt.Errorf("no %s column %q in any input file (columns: %s); choose one with --%s-column", role, name, strings.Join(names, ", "), role)
		}
		return u.Columns[i], nil
	}
	sc, err := find(opt.SeriesColumn, "series")
	if err != nil {
		return nil, err
	}
	if sc.Type.ID() != arrow.STRING {
		return nil, fmt.Errorf("series column %q has type %s (in %s); want a string", sc.Name, sc.Type, sc.From)
	}
	if _, err := find(opt.PeriodColumn, "period"); err != nil {
		return nil, err
	}
	vc, err := find(opt.ValueColumn, "value")
	if err != nil {
		return nil, err
	}
	if !datafile.IsNumeric(vc.Type) {
		return nil, fmt.Errorf("value column %q has type %s (in %s); want a numeric type", vc.Name, vc.Type, vc.From)
	}
	if err := checkColumnNames(u, opt); err != nil {
		return nil, err
	}
	t := &table{inputs: ins, unified: u, rows: int(rows), periodCol: opt.PeriodColumn}
	t.budget, t.external = planMemory(u, rows, opt.MemoryLimit)
	if opt.split {
		t.external = true
		if t.budget <= 0 {
			t.budget = 1 << 30
		}
	}
	n := t.rows
	if t.external {
		n = 0 // the external sort sizes its runs itself
	}
	t.mem = &bigArena{}
	t.series = newStore(sc, n, t.mem)
	t.value = newStore(vc, n, t.mem)
	t.periods = bigSlice[int32](t.mem, n)
	for _, c := range u.Columns {
		if c.Name != opt.SeriesColumn && c.Name != opt.PeriodColumn && c.Name != opt.ValueColumn {
			s := newStore(c, n, t.mem)
			if s.kind == kindString && !t.external {
				s.att = newAttrRead(n, t.mem)
			}
			t.others = append(t.others, s)
		}
	}
	return t, nil
}

// periodName is the input's period column name.
func (t *table) periodName() string { return t.periodCol }

// planMemory returns the memory budget and whether the in-memory build's
// estimate exceeds it (see Options.MemoryLimit). Without /proc/meminfo
// and without a limit, the build stays in memory.
func planMemory(u *Unified, rows int64, limit int64) (budget int64, external bool) {
	if limit == 0 {
		limit = availableMemory() / 10 * 9
	}
	if limit <= 0 {
		return 0, false
	}
	return limit, inMemoryNeed(u, rows) > limit
}

// inMemoryNeed estimates the in-memory build's peak RSS: series code,
// period, sort keys and scratch (8+8), batch buffers, and each column's
// store, times 1.6 for what the count leaves out (the collector's
// headroom, decoded row groups in flight, the gathered batch; measured
// 15M rows of a lakegen lake: 61 bytes a row counted, 92 resident),
// plus the program itself.
func inMemoryNeed(u *Unified, rows int64) int64 {
	perRow := int64(4 + 4 + 16 + 4)
	for _, c := range u.Columns {
		switch kindOf(c.Type) {
		case kindString:
			perRow += 4
		case kindFixed:
			perRow += int64(c.Type.(arrow.FixedWidthDataType).BitWidth()/8) + 1
		case kindBool:
			perRow += 2
		}
	}
	return rows*perRow*8/5 + 64<<20
}

// availableMemory reads MemAvailable from /proc/meminfo (0 if unknown).
func availableMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// lineageOf is the manifest lineage of a table (inputs are added later).
func lineageOf(tbl *source.Table, opt Options) manifest.Lineage {
	l := manifest.Lineage{Kind: tbl.Kind, Source: tbl.Source, LakeSnapshotID: tbl.SnapshotID}
	if tbl.Kind == source.KindParquet {
		return l
	}
	l.Location = tbl.Location
	v := tbl.Version
	l.TableVersion = &v
	if !tbl.Timestamp.IsZero() {
		l.SnapshotTimestamp = tbl.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	l.Ref = tbl.Ref
	l.MetadataLocation = tbl.MetadataLocation
	return l
}

// unchanged reports whether CURRENT's snapshot was built from the same
// table snapshot with the same tier policy, and its id. The policy counts
// because it decides the snapshot's format (version 3, cold.vortex): a
// nightly `build --if-changed` that gains --hot-since must tier the
// dataset at its next run, not when the table next changes.
func unchanged(ds *dataset.Dir, lin manifest.Lineage, p coldfile.Policy) (uint64, bool) {
	if lin.Kind == source.KindParquet || lin.LakeSnapshotID == "" {
		return 0, false
	}
	m, err := ds.Current()
	if err != nil {
		return 0, false
	}
	l := m.Lineage
	hs, hr, f := p.Fields()
	samePolicy := m.Build.HotSince == hs && m.Build.HotRows == hr && m.Build.DataFormat == f
	return m.SnapshotID, samePolicy && l.Kind == lin.Kind && l.Location == lin.Location && l.LakeSnapshotID == lin.LakeSnapshotID
}
