// Package snapshot is the read side of a published snapshot, shared by the
// server, snapinspect and snapverify: open a dataset's CURRENT (or a given
// vintage), validate it, and answer series lookups with zero-copy slices of
// the memory-mapped data file.
//
// Opening maps the data file and parses its footer (cost independent of the
// number of rows), maps the index sidecar the same way (format version 2;
// a version-1 index, which may hold dictionaries, is still loaded and
// checksummed as before), checks what arrow-go would trust in the index
// (one pass over the offsets of its string columns, index.New) and
// builds nothing per series: lookups binary-search the sorted ids in place.
// The checksums of both files are read only with Options.VerifyData
// (snapverify, reloads), and the offsets of the attribute columns are then
// checked at open too; otherwise each attribute column is checked on its
// first use (index.Reader.Attribute): docs/ARCHITECTURE.md invariant 3.
//
// Handles are reference counted so a server can swap snapshots under load:
// the opener holds one reference; every reader Acquires and Releases its
// own; the mappings are unmapped when the count reaches zero, never while a
// reader may still touch a slice of them. (Pebble's readState and
// Prometheus's pendingReaders follow the same pattern.)
package snapshot

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/snapwrite"
)

// ErrCorrupt marks a snapshot whose files disagree with their manifest or
// with the format. It is corrupt.ErrCorrupt, so a damaged manifest is
// ErrCorrupt too; errors about one file are *corrupt.FileError naming it
// (see corrupt.File). Test with errors.Is.
var ErrCorrupt = corrupt.ErrCorrupt

// ErrNotFound marks a named thing that does not exist: a series (a name or
// a code), a category, a snapshot. It is the module's one not-found
// sentinel: query.ErrNotFound, the kind of a request error, is this value,
// and snapinspect's lookups wrap it. Test with errors.Is.
var ErrNotFound = errors.New("not found")

// Options tune Open.
type Options struct {
	// VerifyData checksums the data file and the index at open, and checks
	// the offsets of every index column: a read of every byte of both, so
	// it is opt-in. snapverify and reloads turn it on; a (re)start of a
	// trusted snapshot leaves it off and opens without reading either file
	// whole: the index is then checked structurally, its attribute columns
	// on first use (index.New). A version-1 index is loaded (copied)
	// whatever this says, and so always checksummed and checked in full.
	VerifyData bool
	// ColdCache keeps a tiered snapshot's decoded cold rows (serve
	// --cold-cache; shared by every snapshot a server opens, so one budget
	// bounds them all). nil: every cold read decodes.
	ColdCache *coldfile.Cache
}

// Snapshot is an open, validated, read-only snapshot.
type Snapshot struct {
	Dataset  *dataset.Dir
	Manifest *manifest.Manifest

	lease   *dataset.Lease // keeps gc away while open
	refs    atomic.Int64
	closeMu sync.Mutex
	closed  bool

	data    *arrowfile.Mapped
	index   *arrowfile.Mapped
	batches []arrow.RecordBatch // data batches; buffers alias the mapping
	starts  []int64             // first global row of each batch
	periods [][]arrow.Date32    // each batch's period column (aliases the mapping)
	idxRec  arrow.RecordBatch
	idx     *index.Reader
	cold    *coldfile.File // a tiered snapshot's cold file, else nil
	stamps  []fileStamp    // the mapped files' stat at open (fault.go)
}

// Open opens the snapshot CURRENT names in the dataset directory.
func Open(dir string, opt Options) (*Snapshot, error) {
	ds, err := dataset.Open(dir)
	if err != nil {
		return nil, err
	}
	id, err := ds.CurrentID()
	if err != nil {
		return nil, err
	}
	return openID(ds, id, opt)
}

// OpenID opens vintage id of the dataset, whatever CURRENT says.
func OpenID(dir string, id uint64, opt Options) (*Snapshot, error) {
	ds, err := dataset.Open(dir)
	if err != nil {
		return nil, err
	}
	return openID(ds, id, opt)
}

func openID(ds *dataset.Dir, id uint64, opt Options) (_ *Snapshot, err error) {
	// The lease comes first: once held, gc cannot delete the snapshot, so
	// the manifest loaded next stays valid for the handle's life. A vintage
	// that does not exist gets no lease file created for it.
	if _, err := os.Stat(ds.Path(dataset.ManifestPath(id))); err != nil {
		return nil, fmt.Errorf("manifest %d: %w", id, err)
	}
	lease, err := ds.AcquireLease(id)
	if err != nil {
		return nil, err
	}
	m, err := ds.Load(id)
	if err != nil {
		lease.Release()
		return nil, err
	}
	s := &Snapshot{Dataset: ds, Manifest: m, lease: lease}
	s.refs.Store(1)
	defer func() {
		// arrow-go can panic on a damaged footer or batch header that the
		// size check did not catch (no data checksum at open): that is a
		// corrupt snapshot, not a crash.
		if r := recover(); r != nil {
			err = corrupt.Errorf("snapshot %d: malformed Arrow file: %v", id, r)
		}
		if err != nil {
			s.closeFiles()
		}
	}()
	if err := s.openFiles(opt); err != nil {
		return nil, err
	}
	df, _ := m.FileByRole(manifest.RoleData)
	xf, _ := m.FileByRole(manifest.RoleIndex)
	s.stampFiles(df, xf)
	if cf, ok := m.FileByRole(manifest.RoleCold); ok {
		s.stampFiles(cf)
	}
	trackLeaks(s)
	return s, nil
}

// openFiles maps and checks the data file and the index the manifest
// names: the part of opening after the lease and the manifest, shared by
// published (openID) and staged (OpenStaged) snapshots.
func (s *Snapshot) openFiles(opt Options) (err error) {
	ds, m := s.Dataset, s.Manifest
	df, _ := m.FileByRole(manifest.RoleData)
	xf, _ := m.FileByRole(manifest.RoleIndex)
	for _, f := range []manifest.File{df, xf} {
		if err := checkSize(ds, f); err != nil {
			return err
		}
	}
	// Checksums only when asked, as each costs a read of every byte; the
	// bytes are then hashed where they are mapped, before parsing. A
	// version-1 index may hold dictionaries, which arrow-go cannot map: it
	// is loaded, a copy of every byte anyway, so it is checksummed always.
	dataSum, indexSum := "", ""
	if opt.VerifyData {
		dataSum, indexSum = df.Checksum, xf.Checksum
	}
	// arrowfile's errors name the file already.
	if s.data, err = arrowfile.MapVerified(ds.Path(df.Path), dataSum); err != nil {
		return corrupt.InFile(df.Path, err)
	}
	if indexVersion(m) == index.VersionV1 {
		s.index, err = arrowfile.LoadVerified(ds.Path(xf.Path), xf.Checksum)
	} else {
		s.index, err = arrowfile.MapVerified(ds.Path(xf.Path), indexSum)
	}
	if err != nil {
		return corrupt.InFile(xf.Path, err)
	}
	// loadData reads the metadata of every record batch: one page at the
	// head of each, spread over the whole file. With the kernel's default
	// readahead each of those faults reads a window around its page (8 MiB
	// on this project's benchmark machine: a cold open of the seed's 402
	// batches read 3.4 GB and took 3.2 s), so open reads them as random
	// access and then hands the mapping back to normal readahead for the
	// queries' contiguous slices.
	s.data.Advise(arrowfile.AccessRandom)
	err = s.loadData(df)
	s.data.Advise(arrowfile.AccessNormal)
	if err != nil {
		return corrupt.InFile(df.Path, fmt.Errorf("%s: %w", df.Path, err))
	}
	if err := s.loadIndex(xf); err != nil {
		return corrupt.InFile(xf.Path, fmt.Errorf("%s: %w", xf.Path, err))
	}
	if err := s.openCold(opt); err != nil {
		return err
	}
	// The string columns' offsets are checked on first use (see
	// index.New), except where open reads every byte anyway: with
	// VerifyData, and for a version-1 index, which was copied.
	s.idx.SetFile(xf.Path)
	if opt.VerifyData || s.idx.Version() == index.VersionV1 {
		if err := s.idx.Check(); err != nil {
			return err
		}
	}
	return nil
}

// openCold opens a tiered snapshot's cold file: its trailer, footer and
// layout are read and checked (a few pages, whatever its size), its
// checksum only with VerifyData, like the data file's.
func (s *Snapshot) openCold(opt Options) error {
	cf, ok := s.Manifest.FileByRole(manifest.RoleCold)
	if !ok {
		if s.idx.Tiered() {
			xf, _ := s.Manifest.FileByRole(manifest.RoleIndex)
			return corrupt.InFile(xf.Path, fmt.Errorf("%s: a tiered index (version %s), but the manifest names no cold file", xf.Path, s.idx.Version()))
		}
		return nil
	}
	if !s.idx.Tiered() {
		return corrupt.InFile(cf.Path, fmt.Errorf("%s: a cold file but an index that does not locate cold rows", cf.Path))
	}
	if err := checkSize(s.Dataset, cf); err != nil {
		return err
	}
	sum := ""
	if opt.VerifyData {
		sum = cf.Checksum
	}
	f, err := coldfile.Open(s.Dataset.Path(cf.Path), s.data.Reader.Schema(), sum, opt.ColdCache)
	if err != nil {
		return corrupt.InFile(cf.Path, fmt.Errorf("%s: %w", cf.Path, err))
	}
	if f.NumRows() != cf.Rows {
		f.Close()
		return corrupt.InFile(cf.Path, fmt.Errorf("%s: %d rows, manifest says %d", cf.Path, f.NumRows(), cf.Rows))
	}
	s.cold = f
	return nil
}

// checkSize compares a file's size with the manifest's record.
func checkSize(ds *dataset.Dir, f manifest.File) error {
	st, err := os.Stat(ds.Path(f.Path))
	if err != nil {
		return corrupt.InFile(f.Path, fmt.Errorf("%s: %w", f.Path, err))
	}
	if st.Size() != f.Size {
		return corrupt.InFile(f.Path, fmt.Errorf("%s is %d bytes, manifest says %d", f.Path, st.Size(), f.Size))
	}
	return nil
}

// loadData checks the data file's schema and batch structure against the
// manifest: one page touched per batch, nothing per row.
func (s *Snapshot) loadData(f manifest.File) error {
	if err := datafile.CheckSchema(s.data.Reader.Schema()); err != nil {
		return err
	}
	if got, want := snapwrite.ColumnsOf(s.data.Reader.Schema()), s.Manifest.Schema.Data; !slices.Equal(got, want) {
		return fmt.Errorf("schema %v does not match the manifest's %v", got, want)
	}
	n := s.data.Reader.NumRecords()
	if n != f.Batches {
		return fmt.Errorf("%d record batches, manifest says %d", n, f.Batches)
	}
	var rows int64
	for i := 0; i < n; i++ {
		rec, err := s.data.Batch(i)
		if err != nil {
			return err
		}
		p, ok := rec.Column(datafile.ColumnPeriod).(*array.Date32)
		if !ok {
			rec.Release()
			return fmt.Errorf("batch %d: period column is %s", i, rec.Column(datafile.ColumnPeriod).DataType())
		}
		s.batches = append(s.batches, rec)
		s.periods = append(s.periods, p.Date32Values())
		s.starts = append(s.starts, rows)
		rows += rec.NumRows()
	}
	if rows != f.Rows {
		return fmt.Errorf("%d rows, manifest says %d", rows, f.Rows)
	}
	return nil
}

// loadIndex reads the single index batch and checks it against the
// manifest and the data file's shape.
func (s *Snapshot) loadIndex(f manifest.File) error {
	if n := s.index.Reader.NumRecords(); n != 1 {
		return fmt.Errorf("%d record batches, want exactly 1", n)
	}
	rec, err := s.index.Batch(0)
	if err != nil {
		return err
	}
	s.idxRec = rec
	if got, want := snapwrite.ColumnsOf(rec.Schema()), s.Manifest.Schema.Index; !slices.Equal(got, want) {
		return fmt.Errorf("schema %v does not match the manifest's %v", got, want)
	}
	x, err := index.New(rec)
	if err != nil {
		return err
	}
	if got, want := x.Version(), indexVersion(s.Manifest); got != want {
		return fmt.Errorf("index format version %s in a format_version %d snapshot, want %s", got, s.Manifest.FormatVersion, want)
	}
	if int64(x.Len()) != f.Rows || int64(x.Len()) != s.Manifest.Stats.Series {
		return fmt.Errorf("%d series, manifest says %d", x.Len(), f.Rows)
	}
	if vt, it := s.data.Reader.Schema().Field(datafile.ColumnValue).Type, x.LatestValues().DataType(); !arrow.TypeEqual(vt, it) {
		return fmt.Errorf("latest_value is %s but the data's value column is %s", it, vt)
	}
	s.idx = x
	return nil
}

// indexVersion is the index layout a manifest's format version implies:
// each manifest version has the index version of the same number
// (FORMAT.md, Versions); a version-4 index holds the tier columns when
// the manifest lists a cold file (openCold checks), and so does a
// version-5 one.
func indexVersion(m *manifest.Manifest) string {
	switch m.FormatVersion {
	case 1:
		return index.VersionV1
	case manifest.VersionV2:
		return index.VersionV2
	case manifest.VersionTiered:
		return index.VersionTiered
	case manifest.VersionV4:
		return index.VersionV4
	}
	return index.Version
}

// ID is the snapshot id.
func (s *Snapshot) ID() uint64 { return s.Manifest.SnapshotID }

// Index is the index sidecar.
func (s *Snapshot) Index() *index.Reader { return s.idx }

// Schema is the data file's schema.
func (s *Snapshot) Schema() *arrow.Schema { return s.data.Reader.Schema() }

// NumBatches is the number of data record batches.
func (s *Snapshot) NumBatches() int { return len(s.batches) }

// Batch returns data batch i (aliasing the mapping; do not Release it).
func (s *Snapshot) Batch(i int) arrow.RecordBatch { return s.batches[i] }

// BatchStart is the global row of batch i's first row.
func (s *Snapshot) BatchStart(i int) int64 { return s.starts[i] }

// MappedBytes is the size of the mapped data file.
func (s *Snapshot) MappedBytes() int64 { return int64(len(s.data.Data)) }

// Tiered reports whether the snapshot has a cold file.
func (s *Snapshot) Tiered() bool { return s.cold != nil }

// Cold is the cold file of a tiered snapshot, nil otherwise.
func (s *Snapshot) Cold() *coldfile.File { return s.cold }

// ColdRange locates series e's cold rows whose period lies in [from, to]:
// rows [lo, hi) of rec, the series' decoded cold rows (from the cache
// when it holds them; the batch belongs to the cold file and its cache,
// never released by the caller). rec is nil when the range misses the cold
// rows, or there are none: then nothing is decoded.
//
// Any failure to read or decode them (a short read, a damaged chunk, rows
// that disagree with the index, even a decoder's panic on bytes it does
// not expect) is an error marked corrupt naming cold.vortex, so a server
// treats it as it treats damage in a mapped file (pkg/serve, fault.go).
func (s *Snapshot) ColdRange(e index.Entry, from, to int32) (rec arrow.RecordBatch, lo, hi int64, err error) {
	if s.cold == nil || e.Cold.Rows == 0 {
		return nil, 0, 0, nil
	}
	loc := coldfile.Location{Start: e.Cold.Start, Rows: e.Cold.Rows, FirstPeriod: e.Cold.FirstPeriod, LastPeriod: e.Cold.LastPeriod}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding cold rows [%d,%d): panic: %v", loc.Start, loc.Start+loc.Rows, r)
		}
		if err != nil {
			cf, _ := s.Manifest.FileByRole(manifest.RoleCold)
			rec, lo, hi, err = nil, 0, 0, corrupt.InFile(cf.Path, fmt.Errorf("%s: series %q: %w", cf.Path, e.SeriesID, err))
		}
	}()
	return s.cold.Rows(loc, from, to)
}

// Lookup returns the series code of id.
func (s *Snapshot) Lookup(id string) (int, bool) { return s.idx.Lookup(id) }

// Periods is data batch i's period column (aliasing the mapping).
func (s *Snapshot) Periods(i int) []arrow.Date32 { return s.periods[i] }

// PeriodsAt are rows [off, off+n) of data batch b's periods (aliasing
// the mapping), or nil when they lie outside the data: a damaged entry
// yields none, never a panic.
func (s *Snapshot) PeriodsAt(b, off int, n int64) []arrow.Date32 {
	if b < 0 || b >= len(s.periods) || off < 0 || n < 0 || int64(off)+n > int64(len(s.periods[b])) {
		return nil
	}
	return s.periods[b][off : int64(off)+n]
}

// Range locates series e's rows whose period lies in [from, to] (date32
// days; math.MinInt32 / math.MaxInt32 for open bounds): data batch b, rows
// [lo, hi) of it. Periods are sorted within a series, so the range is two
// binary searches; when [from, to] covers the series' bounds (known from
// the index) no period is read at all. An entry that points outside the
// data is ErrCorrupt, never a panic.
func (s *Snapshot) Range(e index.Entry, from, to int32) (b int, lo, hi int64, err error) {
	if e.RowCount == 0 && s.idx.Tiered() {
		return 0, 0, 0, nil // every row of the series is cold (--format vortex)
	}
	b = e.Batch
	if b < 0 || b >= len(s.periods) {
		return 0, 0, 0, corrupt.Errorf("series %q in batch %d of %d", e.SeriesID, b, len(s.periods))
	}
	lo, hi = int64(e.BatchOffset), int64(e.BatchOffset)+e.RowCount
	if lo < 0 || hi < lo || hi > int64(len(s.periods[b])) {
		return 0, 0, 0, corrupt.Errorf("series %q rows [%d,%d) outside batch %d (%d rows)", e.SeriesID, lo, hi, b, len(s.periods[b]))
	}
	if from > e.FirstPeriod || to < e.LastPeriod {
		ps := s.periods[b][lo:hi]
		a := sort.Search(len(ps), func(i int) bool { return int32(ps[i]) >= from })
		z := a + sort.Search(len(ps)-a, func(i int) bool { return int32(ps[a+i]) > to })
		lo, hi = lo+int64(a), lo+int64(z)
	}
	return b, lo, hi, nil
}

// Rows returns series code's rows whose period lies in [from, to] as a
// slice of its data batch: no copy, no gather (see Range). The caller must
// Release the returned record, and must hold a reference on the snapshot
// until then.
func (s *Snapshot) Rows(code int, from, to int32) (arrow.RecordBatch, error) {
	if code < 0 || code >= s.idx.Len() {
		return nil, fmt.Errorf("series code %d: %w", code, ErrNotFound)
	}
	b, lo, hi, err := s.Range(s.idx.Entry(code), from, to)
	if err != nil {
		return nil, err
	}
	return s.batches[b].NewSlice(lo, hi), nil
}

// Acquire takes a reference for a reader. It returns false if the snapshot
// is already closed (its last reference gone); the caller must then look
// up the current snapshot again.
func (s *Snapshot) Acquire() bool {
	for {
		n := s.refs.Load()
		if n <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one unmaps the files.
func (s *Snapshot) Release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		s.closeFiles()
	case n < 0:
		panic("snapshot: Release without Acquire")
	}
}

// Refs is the current reference count (for tests and status).
func (s *Snapshot) Refs() int64 { return s.refs.Load() }

// Close drops the opener's reference. It is Release under a name that
// reads well at the opener's defer.
func (s *Snapshot) Close() { s.Release() }

func (s *Snapshot) closeFiles() {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, b := range s.batches {
		b.Release()
	}
	if s.idxRec != nil {
		s.idxRec.Release()
	}
	if s.data != nil {
		s.data.Close()
	}
	if s.index != nil {
		s.index.Close()
	}
	if s.cold != nil {
		s.cold.Close()
	}
	s.lease.Release()
}
