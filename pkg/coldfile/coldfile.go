// Package coldfile is the cold tier of a snapshot: cold.vortex, a Vortex
// file (pkg/vortexio) holding, for every series, the rows older than its
// hot window, in the data file's schema and (series, period) order, with
// chunks cut at series boundaries so that one series' cold rows are one
// contiguous row range that decodes without its neighbours' chunks.
//
// Why a tier: most queries ask for recent periods, and the old rows of a
// series are most of its bytes. Kept in the mapped Arrow file they cost
// page cache and disk at ~16 bytes a row; in Vortex they cost ~3, and the
// rare full-history query pays one decode of the series' chunks, which the
// Cache keeps so a repeated read does not decode again.
//
// The columns are the data file's (pkg/datafile's schema and positions), so
// a decoded cold piece and a hot slice are batches of one schema.
//
// The package owns the file's layout (this comment, docs/FORMAT.md) and
// both its Writer and its reader (File), and the policy that says which
// rows of a series are cold (Policy). Where each series' cold rows lie
// (Location) is for the index to record; this package does not know the
// index.
//
// The integer and date columns (series_code, period) carry exact zone maps
// (ZoneRows), so that the reference implementation, vortex-data, prunes a
// filtered scan of the file to the chunks that can match; our reader does
// not need them (the index locates every series) and skips them.
//
// Snapshot writers write the file through pkg/snapwrite's Splitter, which
// sends each series' cold prefix here; the index records each series'
// Location, and the read layer serves the decoded cold piece
// (File.Rows) before the hot slice (docs/FORMAT.md §9).
package coldfile

import (
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/vortexio"
)

// FileName is the cold file's name inside a snapshot directory.
const FileName = "cold.vortex"

// DefaultChunkRows is the rows a chunk holds before it is cut at the next
// series boundary. It trades size against the cost of a one-series read
// (BenchmarkTierSizes, BenchmarkTierRead on a 3M-row generated snapshot,
// 10% hot window: cold file 12.2 / 9.7 / 8.4 / 7.8 MiB at 1024 / 2048 /
// 4096 / 8192 rows, hot + cold 36 / 31 / 28 / 27% of the all-hot file).
// The read used to decode whole chunks (~230 / 205 / 600 / 530 µs, load
// ~7), which is what made 2048 the choice; it now decodes only the
// 1024-row blocks holding the series (pkg/vortexio range decoding), and
// the median over 5 interleaved runs at load ~9 on 2 cores was 99 / 100 /
// 80 / 88 µs (the old code in the same runs: 225 / 215 / 500 / 1255 µs);
// at 2048 rows and load ~4, 48 µs against the old code's 225.
// So a larger chunk no longer costs the read, and 4096 is the smallest
// chunk whose hot + cold size is within the 30% goal: the default.
// On a quiet machine (bench/results/2026-12-01-tiers.md, 15M-row lake,
// 5 runs): 196 / 112 / 77 / 74 µs uncached at 1024 / 2048 / 4096 / 8192
// rows, ~2 µs from the cache whatever the chunk; hot + cold 27.8% of the
// all-hot data file with a 10% window.
const DefaultChunkRows = 4096

// ZoneRows is the rows of one zone of the zone maps written for the
// integer and date columns (series_code, period): exact min, max and null
// count per zone, which vortex-data uses to skip the chunks a filtered scan
// cannot match (a scan for one series_code reads the one or two zones, and
// the chunks under them, that can hold it). 1024 keeps a zone near one
// chunk's half at the chunk target above; the zone tables cost ~0.1 byte
// a row.
const ZoneRows = 1024

// maxChunkRows bounds a chunk when one series alone is longer than the
// target: vortexio closes a chunk every that many rows on its own.
const maxChunkRows = 65536

// Location is where one series' cold rows lie: rows [Start, Start+Rows)
// of the file, with the periods of the first and last. Rows 0 means the
// series has no cold rows (Start is then where its rows would begin, so
// Start never decreases from one series to the next).
type Location struct {
	Start, Rows             int64
	FirstPeriod, LastPeriod int32
}

// Info describes a written cold file, for the manifest.
type Info struct {
	Size     int64
	Rows     int64
	Chunks   int
	Checksum string
}

// Options tune the Writer.
type Options struct {
	ChunkRows int // 0: DefaultChunkRows
}

// Writer writes cold.vortex one series at a time, hashing the bytes as
// they are written.
type Writer struct {
	path     string
	f        *os.File
	cw       *countWriter
	vw       *vortexio.Writer
	target   int64
	rows     int64 // rows written
	inChunk  int64 // rows since the last cut
	lastCode int64 // series code of the last series added, -1 before
	closed   bool
}

// Create starts a cold file at path with the data file's schema.
func Create(path string, schema *arrow.Schema, opt Options) (*Writer, error) {
	if opt.ChunkRows <= 0 {
		opt.ChunkRows = DefaultChunkRows
	}
	if schema.NumFields() < 3 || schema.Field(datafile.ColumnSeriesCode).Type.ID() != arrow.UINT32 || schema.Field(datafile.ColumnPeriod).Type.ID() != arrow.DATE32 {
		return nil, fmt.Errorf("cold file %s: schema %v is not a data file's (series_code uint32, period date32, value, …)", path, schema)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	cw := &countWriter{w: f, h: fileutil.NewHash()}
	vw, err := vortexio.NewWriter(cw, schema, vortexio.WriterOptions{ChunkRows: maxChunkRows, ZoneRows: ZoneRows})
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("cold file %s: %w", path, err)
	}
	return &Writer{path: path, f: f, cw: cw, vw: vw, target: int64(opt.ChunkRows), lastCode: -1}, nil
}

// Add appends rows [lo, hi) of rec, which must all be one series, with a
// code above the previous series' and strictly increasing periods, and
// returns where they went. A chunk is cut after the series once it holds
// the target rows, so no series is split between chunks unless it alone
// exceeds the writer's maximum chunk.
func (w *Writer) Add(rec arrow.RecordBatch, lo, hi int64) (Location, error) {
	if w.closed {
		return Location{}, errors.New("cold file: add after close")
	}
	if lo < 0 || hi < lo || hi > rec.NumRows() {
		return Location{}, fmt.Errorf("cold file: rows [%d,%d) outside a batch of %d", lo, hi, rec.NumRows())
	}
	if hi == lo {
		return Location{Start: w.rows}, nil
	}
	codes, ok1 := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32)
	periods, ok2 := rec.Column(datafile.ColumnPeriod).(*array.Date32)
	if !ok1 || !ok2 {
		return Location{}, fmt.Errorf("cold file: batch is not of the data schema")
	}
	code := int64(codes.Value(int(lo)))
	if code <= w.lastCode {
		return Location{}, fmt.Errorf("cold file: series code %d after %d: series must come in code order, once", code, w.lastCode)
	}
	for i := lo; i < hi; i++ {
		if int64(codes.Value(int(i))) != code || codes.IsNull(int(i)) || periods.IsNull(int(i)) {
			return Location{}, fmt.Errorf("cold file: row %d of the series' rows is not series code %d, or has a null key", i-lo, code)
		}
		if i > lo && periods.Value(int(i)) <= periods.Value(int(i-1)) {
			return Location{}, fmt.Errorf("cold file: series code %d: period at row %d does not increase", code, i-lo)
		}
	}
	part := rec.NewSlice(lo, hi)
	err := w.vw.Write(part)
	part.Release()
	if err != nil {
		return Location{}, fmt.Errorf("cold file %s: %w", w.path, err)
	}
	loc := Location{Start: w.rows, Rows: hi - lo, FirstPeriod: int32(periods.Value(int(lo))), LastPeriod: int32(periods.Value(int(hi - 1)))}
	w.rows += hi - lo
	w.inChunk += hi - lo
	w.lastCode = code
	if w.inChunk >= w.target {
		if err := w.vw.Cut(); err != nil {
			return Location{}, fmt.Errorf("cold file %s: %w", w.path, err)
		}
		w.inChunk = 0
	}
	return loc, nil
}

// Close finishes the file, fsyncs it and returns what the manifest records.
func (w *Writer) Close() (Info, error) {
	if w.closed {
		return Info{}, errors.New("cold file: closed twice")
	}
	w.closed = true
	err := w.vw.Close()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(w.path)
		return Info{}, fmt.Errorf("cold file %s: %w", w.path, err)
	}
	return Info{Size: w.cw.n, Rows: w.rows, Chunks: len(w.vw.ChunkRows()), Checksum: fileutil.FormatChecksum(w.cw.h)}, nil
}

// Abort removes a file that will not be closed (safe after Close).
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	w.f.Close()
	os.Remove(w.path)
}

type countWriter struct {
	w io.Writer
	h hash.Hash64
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// Policy says which rows of a series are hot: those with a period at or
// after HotSince (when set), and the last HotRows rows (when set); a row
// either keeps hot is hot. The last row of every series is always hot, so
// the hot data file keeps every series (its invariants: dense codes, no
// series without rows). AllCold (snapbuild build --format vortex) makes
// every row cold instead: the hot file then holds no row at all.
type Policy struct {
	HotSince    int32 // date32 days; used when HasHotSince
	HasHotSince bool
	HotRows     int64 // > 0: the last HotRows rows stay hot
	AllCold     bool
}

// Tiered reports whether the policy moves anything to the cold tier.
func (p Policy) Tiered() bool { return p.HasHotSince || p.HotRows > 0 || p.AllCold }

// ColdRows is how many leading rows of a series with these (ascending)
// periods are cold.
func (p Policy) ColdRows(periods []arrow.Date32) int64 {
	n := int64(len(periods))
	if n == 0 || !p.Tiered() {
		return 0
	}
	if p.AllCold {
		return n
	}
	cold := n - 1 // the last row is always hot
	if p.HotRows > 0 {
		cold = min(cold, max(0, n-p.HotRows))
	}
	if p.HasHotSince {
		first := int64(sort.Search(len(periods), func(i int) bool { return int32(periods[i]) >= p.HotSince }))
		cold = min(cold, first) // cold only where neither rule keeps it

	}
	return cold
}

// File is an open cold file.
type File struct {
	path  string
	vf    *vortexio.File
	cache *Cache
	id    uint64 // the file's key in the cache
}

// Open opens and validates a cold file (trailer, footer, layout; the
// schema must be want's). A non-empty checksum is compared with the whole
// file's first (one read of every byte). The cache may be nil: every read
// then decodes.
func Open(path string, want *arrow.Schema, checksum string, cache *Cache) (*File, error) {
	if checksum != "" {
		sum, _, err := fileutil.ChecksumFile(path)
		if err != nil {
			return nil, err
		}
		if sum != checksum {
			return nil, corrupt.Errorf("%s: checksum %s, manifest says %s", path, sum, checksum)
		}
	}
	vf, err := vortexio.OpenFile(path)
	if err != nil {
		return nil, corrupt.Errorf("%w", err)
	}
	got := vf.Schema()
	ok := got.NumFields() == want.NumFields()
	for i := 0; ok && i < got.NumFields(); i++ {
		ok = got.Field(i).Name == want.Field(i).Name && arrow.TypeEqual(got.Field(i).Type, want.Field(i).Type)
	}
	if !ok {
		vf.Close()
		return nil, corrupt.Errorf("%s: schema %v, the data file's is %v", path, got, want)
	}
	f := &File{path: path, vf: vf, cache: cache}
	if cache != nil {
		f.id = cache.newFile()
	}
	return f, nil
}

// NumRows is the file's row count.
func (f *File) NumRows() int64 { return f.vf.NumRows() }

// Close closes the file and drops its cached series.
func (f *File) Close() error {
	if f.cache != nil {
		f.cache.dropFile(f.id)
	}
	return f.vf.Close()
}

// Series returns a series' cold rows, decoded (from the cache when it
// holds them). The batch is never released by the caller: it is decoded
// with Go's allocator, so once neither the cache nor a reader holds it the
// garbage collector frees it, and an eviction never pulls buffers from
// under a stream still sending them. A location outside the file, or rows that are
// not one series in period order, is corrupt.ErrCorrupt.
func (f *File) Series(loc Location) (arrow.RecordBatch, error) {
	if loc.Rows <= 0 || loc.Start < 0 || loc.Start+loc.Rows > f.vf.NumRows() {
		return nil, corrupt.Errorf("%s: cold rows [%d,%d) outside the file's %d", f.path, loc.Start, loc.Start+loc.Rows, f.vf.NumRows())
	}
	if f.cache != nil {
		if rec, ok := f.cache.get(f.id, loc.Start); ok {
			return rec, nil
		}
	}
	rec, err := f.vf.ReadRange(nil, loc.Start, loc.Start+loc.Rows)
	if err != nil {
		return nil, corrupt.Errorf("%s: cold rows [%d,%d): %w", f.path, loc.Start, loc.Start+loc.Rows, err)
	}
	ps := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
	if int32(ps[0]) != loc.FirstPeriod || int32(ps[len(ps)-1]) != loc.LastPeriod {
		rec.Release()
		return nil, corrupt.Errorf("%s: cold rows [%d,%d) hold periods %d..%d, the index says %d..%d", f.path, loc.Start, loc.Start+loc.Rows, ps[0], ps[len(ps)-1], loc.FirstPeriod, loc.LastPeriod)
	}
	if f.cache != nil {
		return f.cache.put(f.id, loc.Start, rec), nil
	}
	return rec, nil
}

// Rows locates a series' cold rows whose period lies in [from, to]: rows
// [lo, hi) of the returned batch (Series). A range that misses the cold
// rows returns no batch and decodes nothing.
func (f *File) Rows(loc Location, from, to int32) (rec arrow.RecordBatch, lo, hi int64, err error) {
	if loc.Rows == 0 || from > loc.LastPeriod || to < loc.FirstPeriod {
		return nil, 0, 0, nil
	}
	rec, err = f.Series(loc)
	if err != nil {
		return nil, 0, 0, err
	}
	ps := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
	a := sort.Search(len(ps), func(i int) bool { return int32(ps[i]) >= from })
	z := a + sort.Search(len(ps)-a, func(i int) bool { return int32(ps[a+i]) > to })
	return rec, int64(a), int64(z), nil
}

// FormatVortex is the manifest's build.format of a snapshot whose rows are
// all cold (Policy.AllCold, snapbuild build --format vortex).
const FormatVortex = "vortex"

// Fields are the policy as a manifest's build section records it
// (hot_since as YYYY-MM-DD, hot_rows, format), so that a compaction can
// apply it again (PolicyOf).
func (p Policy) Fields() (hotSince string, hotRows int64, format string) {
	if p.AllCold {
		return "", 0, FormatVortex
	}
	if p.HasHotSince {
		hotSince = period.Format(p.HotSince)
	}
	return hotSince, p.HotRows, ""
}

// PolicyOf is the policy a manifest's build section records (Fields).
func PolicyOf(hotSince string, hotRows int64, format string) (Policy, error) {
	var p Policy
	switch format {
	case "", "arrow":
	case FormatVortex:
		p.AllCold = true
		return p, nil
	default:
		return p, fmt.Errorf("data format %q (want arrow or vortex)", format)
	}
	if hotRows < 0 {
		return p, fmt.Errorf("hot rows %d < 0", hotRows)
	}
	p.HotRows = hotRows
	if hotSince != "" {
		d, err := time.Parse(time.DateOnly, hotSince)
		if err != nil {
			return p, fmt.Errorf("hot-since %q is not YYYY-MM-DD", hotSince)
		}
		p.HotSince, p.HasHotSince = int32(d.Unix()/86400), true
	}
	return p, nil
}
