package verify

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lake/parquetdir"
	"github.com/energyscope/servingsnap/pkg/manifest"

	"github.com/energyscope/servingsnap/pkg/progress"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// seriesHash is an order-independent digest of a series' rows: the number
// of rows and the sum and xor of one xxhash64 per row over (period, null
// flag, value bytes). Equal multisets of rows give equal digests whatever
// the order they are read in; a changed, missing or extra row changes the
// count or, except with probability ~2^-64, both sums.
type seriesHash struct {
	rows int64
	sum  uint64
	xor  uint64
}

func (h *seriesHash) add(x uint64) {
	h.rows++
	h.sum += x
	h.xor ^= x
}

func (h *seriesHash) merge(o seriesHash) {
	h.rows += o.rows
	h.sum += o.sum
	h.xor ^= o.xor
}

// rowHash hashes one row. val is the value's little-endian bytes as Arrow
// stores them (nil for null), so the input and the snapshot hash alike
// exactly when their value types agree. A value of up to 8 bytes (every
// numeric type but decimals) is mixed in registers: for a fixed period
// the hash is a bijection of the value bits, for a fixed value one of the
// period, width and null flag; wider values go through xxhash64.
func rowHash(buf *[64]byte, p int32, val []byte, valid bool) uint64 {
	if len(val) <= 8 {
		var x uint64
		if len(val) == 8 {
			x = binary.LittleEndian.Uint64(val)
		} else {
			for i, b := range val {
				x |= uint64(b) << (8 * i)
			}
		}
		k := uint64(uint32(p)) | uint64(len(val))<<32
		if valid {
			k |= 1 << 40
		}
		return splitmix64(splitmix64(x^0x9e3779b97f4a7c15) ^ k*0xd6e8feb86659fd93)
	}
	binary.LittleEndian.PutUint32(buf[:4], uint32(p))
	n := 5
	buf[4] = 0
	if valid {
		buf[4] = 1
		n += copy(buf[5:], val)
	}
	return xxhash.Sum64(buf[:n])
}

// splitmix64 is SplitMix64's finaliser: a bijection of uint64 whose
// output bits each depend on every input bit.
func splitmix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// valueBytes gives raw access to a fixed-width value column.
type valueBytes struct {
	arr   arrow.Array
	data  []byte
	w     int
	off   int
	nulls bool // some value is null
}

func newValueBytes(a arrow.Array) (valueBytes, error) {
	vb := valueBytes{arr: a}
	if a == nil || a.DataType().ID() == arrow.NULL {
		return vb, nil
	}
	fw, ok := a.DataType().(arrow.FixedWidthDataType)
	if !ok || fw.BitWidth() < 8 || fw.BitWidth()%8 != 0 || fw.BitWidth() > 8*(64-5) {
		return vb, fmt.Errorf("value column type %s is not a fixed-width numeric type", a.DataType())
	}
	vb.w = fw.BitWidth() / 8
	vb.off = a.Data().Offset()
	vb.nulls = a.NullN() > 0
	if bufs := a.Data().Buffers(); len(bufs) > 1 && bufs[1] != nil {
		vb.data = bufs[1].Bytes()
	}
	return vb, nil
}

// at returns row i's bytes and whether it is valid.
func (vb valueBytes) at(i int) ([]byte, bool) {
	if vb.w == 0 || vb.nulls && vb.arr.IsNull(i) {
		return nil, false
	}
	o := (vb.off + i) * vb.w
	if o+vb.w > len(vb.data) {
		return nil, false
	}
	return vb.data[o : o+vb.w], true
}

// lakeFile is one data file of the input.
type lakeFile struct {
	rel, abs string
	size     int64
	table    int // its index in a table's files, read through lakeInput.tbl; -1 in a folder
}

// lakeInput is what --against names: a folder of Parquet files, or one
// snapshot of a Delta or Iceberg table (tbl), its files in the builder's
// order.
type lakeInput struct {
	files []lakeFile
	tbl   TableReader
}

// TableFile is one data file of a table --against compares with.
type TableFile struct {
	Rel  string
	Size int64
}

// TableReader reads the data files of one table snapshot: file is an
// index into the files its opener listed.
type TableReader interface {
	EachBatch(ctx context.Context, file int, columns []string, fn func(arrow.RecordBatch) error) error
	Close() error
}

// TableOpener opens the Delta or Iceberg table in dir for --against, at
// the snapshot built names when it is that table and the snapshot is
// still there, else at its latest; note says which was read.
type TableOpener func(ctx context.Context, dir string, built manifest.Lineage) (files []TableFile, r TableReader, note string, err error)

// tableOpener reads tables for --against; package verify/tables registers
// it. It is apart so that what links pkg/verify for the fast and deep
// checks (a compaction does) does not link the lake readers (iceberg-go):
// only snapverify imports verify/tables.
var tableOpener TableOpener

// RegisterTableOpener makes --against read Delta and Iceberg tables with
// f.
func RegisterTableOpener(f TableOpener) { tableOpener = f }

// against re-reads the input lake and compares it with the snapshot series
// by series. Problems reading the input are errors (nothing can be said
// about the snapshot); differences are findings. The steps: read the lake
// (started by startLake, alongside the deep checks), check the value
// types agree, merge the input's digests, hash the snapshot alike,
// compare.
func (v *verifier) against(lake *lakeJob) error {
	v.ran()
	lr, err := v.joinLake(lake)
	if err != nil {
		return err
	}
	if lr.in.tbl != nil {
		defer lr.in.tbl.Close()
	}
	if !v.checkValueTypes(lr) {
		return nil
	}
	in := v.mergeInput(lr)
	snap, ok := v.hashSnapshot()
	if !ok {
		return nil
	}
	v.compareDigests(lr, in, snap)
	return nil
}

// lakeJob is a lake being read on other goroutines while the snapshot's
// own checks run: it touches nothing of the verifier's report until
// joinLake.
type lakeJob struct {
	cancel context.CancelFunc
	done   chan struct{}
	lr     *lakeRead
	notes  []string
	err    error
	joined bool // against owns lr (and closes its table reader)
}

// startLake starts reading the input lake (readLake) and returns at once.
func (v *verifier) startLake() *lakeJob {
	ctx, cancel := context.WithCancel(context.Background())
	j := &lakeJob{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(j.done)
		defer func() {
			if r := recover(); r != nil {
				j.lr, j.err = nil, fmt.Errorf("%w: reading the input failed: %v", ErrCannotVerify, r)
			}
		}()
		j.lr, j.err = v.readLake(ctx, &j.notes)
	}()
	return j
}

// stop abandons the read unless joined, and waits for it.
func (j *lakeJob) stop() {
	j.cancel()
	<-j.done
	if !j.joined && j.lr != nil && j.lr.in.tbl != nil {
		j.lr.in.tbl.Close()
	}
}

// joinLake waits for the lake and records what its read says: notes, the
// number of files, how the input differs from the recorded lineage.
func (v *verifier) joinLake(j *lakeJob) (*lakeRead, error) {
	<-j.done
	j.cancel()
	j.joined = true
	for _, n := range j.notes {
		v.note(n)
	}
	if j.err != nil {
		return nil, j.err
	}
	lr := j.lr
	v.r.InputFiles = len(lr.in.files)
	v.noteLineage(lr.in.files, lr.footers)
	if v.m.Lineage.Kind == dataset.LineageCompaction {
		v.note(fmt.Sprintf("snapshot %d is a compaction (%s): it differs from the input by the live writes it folded in", v.r.SnapshotID, v.m.Lineage.Source))
	}
	return lr, nil
}

// lakeRead is the input as against read it: its files and what they
// hold, summed by series code (lakeread.go).
type lakeRead struct {
	in        *lakeInput
	cols      buildColumns
	keep      bool // --on-duplicate=last: the last row of a key wins
	attrNames []string
	// shard is the snapshot's shard of a sharded dataset (nil: none): the
	// input's rows of the other shards' series are skipped, not missing.
	shard *shard.Spec
	ph    progress.Phase

	plans      []*lakePlan      // by file: a folder's files' footers and columns
	mu         sync.Mutex       // guards valueTypes and footers
	valueTypes []arrow.DataType // by file; nil: no value column, or an all-null one
	footers    []int64          // by file: rows its footer (or its reader) gives

	digest *inputDigest
	kept   []*keptRows // keep: every unit's rows, in input order
}

// readLake reads the input's units (row groups, or a table's files) in
// parallel into digests by series code, showing a "read lake" phase. It
// reads the manifest and the index and changes nothing of v: notes go to
// notes, for joinLake.
func (v *verifier) readLake(ctx context.Context, notes *[]string) (*lakeRead, error) {
	b := v.m.Build
	lr := &lakeRead{
		cols:      buildColumns{series: or(b.SeriesColumn, "series_id"), period: or(b.PeriodColumn, "period"), value: or(b.ValueColumn, "value")},
		keep:      b.OnDuplicate == "last",
		attrNames: v.m.Schema.Attributes,
	}
	if sh := v.m.Shard; sh != nil {
		// A manifest naming a function this build does not know is a
		// finding of the manifest's checks; here it only means the input
		// cannot be split by shard (Spec.Of would panic on it).
		if _, err := shard.Func(sh.Hash); err != nil {
			return nil, fmt.Errorf("%w: manifest shard: %v", ErrCannotVerify, err)
		}
		lr.shard = &shard.Spec{Index: sh.Index, Count: sh.Count, Hash: sh.Hash}
	}
	in, err := v.openInput(ctx, notes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCannotVerify, err)
	}
	lr.in = in
	files := in.files
	parallel := v.opt.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	lr.plans = make([]*lakePlan, len(files))
	lr.valueTypes = make([]arrow.DataType, len(files))
	lr.footers = make([]int64, len(files))
	var inBytes int64
	for _, f := range files {
		inBytes += f.size
	}
	lr.ph = progress.Or(v.opt.Progress).Phase("read lake", 0, inBytes)
	var units []lakeUnit
	for i, f := range files {
		if f.table >= 0 {
			units = append(units, lakeUnit{fi: i, rows: -1})
			continue
		}
		us, err := lr.planFile(i)
		if err != nil {
			err = fmt.Errorf("%w: input %s: %v", ErrCannotVerify, f.rel, err)
			progress.Finish(lr.ph, err)
			if in.tbl != nil {
				in.tbl.Close()
			}
			return nil, err
		}
		units = append(units, us...)
	}
	err = lr.readUnits(ctx, v.snap.Index(), units, parallel, lr.ph)
	progress.Finish(lr.ph, err)
	if err != nil {
		if in.tbl != nil {
			in.tbl.Close()
		}
		return nil, err
	}
	return lr, nil
}

// checkValueTypes proves every input file's value column has the
// snapshot's type: otherwise no row can hash alike. False after a finding.
func (v *verifier) checkValueTypes(lr *lakeRead) bool {
	vt := v.snap.Schema().Field(datafile.ColumnValue).Type
	for i, t := range lr.valueTypes {
		if t != nil && !arrow.TypeEqual(t, vt) {
			v.add(CheckAgainst, filepath.ToSlash(filepath.Join(v.opt.Against, lr.in.files[i].rel)), "column "+lr.cols.value,
				"value column has type %s, the snapshot stores %s", t, vt)
			return false
		}
	}
	return true
}

// inputDigest is the whole input, by series code: [0,n) the index's
// series, n+k the input's series k that the index lacks (extra).
type inputDigest struct {
	n       int
	extra   []string
	hashes  []seriesHash
	attrs   []uint64 // per series: the attributes of its first row in input order
	seen    []bool   // the input has rows of the series
	rawRows int64    // rows read, duplicates included (of this shard's series)
	// otherRows are the rows read of series another shard holds (a
	// sharded snapshot's input is the whole lake): skipped
	otherRows int64
}

// mergeInput completes the input's digest: with --on-duplicate=last,
// duplicates resolved as the builder did; the input's counts.
func (v *verifier) mergeInput(lr *lakeRead) *inputDigest {
	d := lr.digest
	if lr.keep {
		v.mergeKeepLast(lr, d)
	}
	v.r.InputRows = d.rawRows
	v.r.InputOtherShardRows = d.otherRows
	var series int64
	for _, s := range d.seen {
		if s {
			series++
		}
	}
	v.r.InputSeries = series
	return d
}

// mergeKeepLast hashes the input's rows with --on-duplicate=last: among
// the rows of one (series, period), only the last in input order counts;
// the others are counted as InputDuplicates.
func (v *verifier) mergeKeepLast(lr *lakeRead, d *inputDigest) {
	var total int
	for _, k := range lr.kept {
		total += len(k.sid)
	}
	sid := make([]int32, 0, total)
	per := make([]int32, 0, total)
	hs := make([]uint64, 0, total)
	for _, k := range lr.kept {
		sid = append(sid, k.sid...)
		per = append(per, k.per...)
		hs = append(hs, k.h...)
	}
	lr.kept = nil
	// Stable by (series, period): among rows of one key, the last in
	// input order wins, as the builder's --on-duplicate=last does.
	ord := make([]int32, len(sid))
	for i := range ord {
		ord[i] = int32(i)
	}
	sort.SliceStable(ord, func(a, b int) bool {
		x, y := ord[a], ord[b]
		if sid[x] != sid[y] {
			return sid[x] < sid[y]
		}
		return per[x] < per[y]
	})
	for j, o := range ord {
		if j+1 < len(ord) {
			if n := ord[j+1]; sid[n] == sid[o] && per[n] == per[o] {
				v.r.InputDuplicates++
				continue
			}
		}
		d.hashes[sid[o]].add(hs[o])
	}
}

// snapDigest is the snapshot hashed as the input is: per index series.
type snapDigest struct {
	hashes []seriesHash
	rows   int64 // rows of both tiers
	buf    [64]byte
}

// addBatch hashes one batch's rows into the series' digests, returning
// the count of rows whose series code is outside the index (n series).
func (sd *snapDigest) addBatch(rec arrow.RecordBatch, n int) (badCodes int64, err error) {
	codes := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32).Uint32Values()
	periods := rec.Column(datafile.ColumnPeriod).(*array.Date32).Date32Values()
	vb, err := newValueBytes(rec.Column(datafile.ColumnValue))
	if err != nil {
		return 0, err
	}
	for i, c := range codes {
		sd.rows++
		if int(c) >= n {
			badCodes++
			continue
		}
		val, ok := vb.at(i)
		sd.hashes[c].add(rowHash(&sd.buf, int32(periods[i]), val, ok))
	}
	return badCodes, nil
}

// hashSnapshot hashes the hot rows and (tiered) the cold rows, one window
// at a time, into the same digests: a series' rows are the multiset of
// both tiers'. False when the snapshot could not be read to the end.
func (v *verifier) hashSnapshot() (*snapDigest, bool) {
	df, _ := v.m.FileByRole(manifest.RoleData)
	s := v.snap
	n := s.Index().Len()
	sd := &snapDigest{hashes: make([]seriesHash, n)}
	var badCodes int64
	for bi := 0; bi < s.NumBatches(); bi++ {
		bad, err := sd.addBatch(s.Batch(bi), n)
		if err != nil {
			v.add(CheckAgainst, df.Path, fmt.Sprintf("batch %d", bi), "%v", err)
			return nil, false
		}
		badCodes += bad
	}
	if badCodes > 0 {
		v.add(CheckSeriesCode, df.Path, "", "%d rows have a series_code outside the index and match no input series", badCodes)
	}
	if v.cold == nil {
		return sd, true
	}
	cf := v.cold.file
	var coldBad int64
	var verr error
	done := v.eachColdWindow(func(rec arrow.RecordBatch, start int64) bool {
		bad, err := sd.addBatch(rec, n)
		coldBad += bad
		verr = err
		return err == nil
	})
	switch {
	case verr != nil:
		v.add(CheckAgainst, cf.Path, "", "%v", verr)
		return nil, false
	case !done:
		v.note("comparison with the input skipped: the cold file did not decode")
		return nil, false
	case coldBad > 0:
		v.add(CheckSeriesCode, cf.Path, "", "%d cold rows have a series_code outside the index and match no input series", coldBad)
	}
	return sd, true
}

// compareDigests compares the input and the snapshot: the row counts,
// the duplicates the manifest says were dropped, then series by series.
func (v *verifier) compareDigests(lr *lakeRead, in *inputDigest, snap *snapDigest) {
	df, _ := v.m.FileByRole(manifest.RoleData)
	inRows := in.rawRows - v.r.InputDuplicates
	if inRows != snap.rows {
		if !v.add(CheckAgainst, df.Path, "", "the snapshot holds %d rows, the input %d (%d read, %d shadowed by later duplicates)", snap.rows, inRows, in.rawRows, v.r.InputDuplicates) {
			return
		}
	}
	if lr.keep && v.r.InputDuplicates != v.m.Stats.DuplicatesDropped {
		if !v.add(CheckAgainst, v.r.Manifest, "stats.duplicates_dropped", "manifest says %d duplicates were dropped, the input has %d", v.m.Stats.DuplicatesDropped, v.r.InputDuplicates) {
			return
		}
	}
	if !v.compareSeries(lr, in, snap) {
		return
	}
	v.reportMissing(in)
}

// compareSeries compares each index series with the input's: present,
// same attributes, same rows. False when the findings are full.
func (v *verifier) compareSeries(lr *lakeRead, in *inputDigest, snap *snapDigest) bool {
	df, _ := v.m.FileByRole(manifest.RoleData)
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	x := v.snap.Index()
	snapAttr, fields := v.attrHasherOf(xf.Path, lr)
	for c := 0; c < x.Len(); c++ {
		k := c
		got := snap.hashes[c]
		if !in.seen[k] {
			if !v.add(CheckAgainst, df.Path, v.seriesLoc(c), "series is in the snapshot (%d rows) but not in the input", got.rows) {
				return false
			}
			continue
		}
		if snapAttr != nil && snapAttr.hash(c) != in.attrs[k] {
			if !v.add(CheckAgainst, xf.Path, v.seriesLoc(c), "series' attributes differ from the input's: the index has %s", snapAttr.describe(fields, c)) {
				return false
			}
		}
		want := in.hashes[k]
		switch {
		case got.rows != want.rows:
			if !v.add(CheckAgainst, df.Path, v.seriesLoc(c), "series has %d rows in the snapshot, %d in the input", got.rows, want.rows) {
				return false
			}
		case got != want:
			if !v.add(CheckAgainst, df.Path, v.seriesLoc(c), "series has the same %d rows in number but different periods or values than the input", got.rows) {
				return false
			}
		}
	}
	return true
}

// attrHasherOf hashes the index's attributes as the input's are hashed
// (attrHasher): each series' values in the index against its input rows'
// (constant within a series, or the builder would not have made them
// attributes). Nil when the index's attributes are not the manifest's.
func (v *verifier) attrHasherOf(indexPath string, lr *lakeRead) (*attrHasher, []arrow.Field) {
	fields, xcols := v.snap.Index().Attributes()
	if len(fields) != len(lr.attrNames) {
		return nil, fields
	}
	h, err := newAttrHasher(xcols)
	if err != nil {
		v.add(CheckAgainst, indexPath, "", "attributes: %v", err)
		return nil, fields
	}
	return h, fields
}

// reportMissing reports the input series the snapshot lacks, by id.
func (v *verifier) reportMissing(in *inputDigest) {
	df, _ := v.m.FileByRole(manifest.RoleData)
	missing := make([]int, len(in.extra))
	for k := range missing {
		missing[k] = k
	}
	sort.Slice(missing, func(a, b int) bool { return in.extra[missing[a]] < in.extra[missing[b]] })
	for _, k := range missing {
		if !v.add(CheckAgainst, df.Path, fmt.Sprintf("series %q", in.extra[k]), "series is in the input (%d rows) but not in the snapshot", in.hashes[in.n+k].rows) {
			return
		}
	}
}

// noteLineage notes where the input differs from the inputs the manifest
// records. That is not a finding: a lake may be rewritten (compacted,
// re-encoded) and still hold the same rows; the row comparison decides.
func (v *verifier) noteLineage(files []lakeFile, footers []int64) {
	if v.m.Lineage.Kind != "parquet" {
		return
	}
	rec := map[string]manifest.Input{}
	for _, in := range v.m.Lineage.Inputs {
		rec[in.Path] = in
	}
	var diffs []string
	for i, f := range files {
		in, ok := rec[f.rel]
		switch {
		case !ok:
			diffs = append(diffs, f.rel+" is new")
		case in.Size != f.size || in.Rows != footers[i]:
			diffs = append(diffs, fmt.Sprintf("%s changed (%d bytes %d rows, recorded %d bytes %d rows)", f.rel, f.size, footers[i], in.Size, in.Rows))
		}
		delete(rec, f.rel)
	}
	var gone []string
	for p := range rec {
		gone = append(gone, p)
	}
	sort.Strings(gone)
	for _, p := range gone {
		diffs = append(diffs, p+" is gone")
	}
	if len(diffs) > 0 {
		if len(diffs) > 5 {
			diffs = append(diffs[:5], fmt.Sprintf("and %d more", len(diffs)-5))
		}
		v.note("the input differs from the lineage in the manifest: " + strings.Join(diffs, "; "))
	}
}

type buildColumns struct{ series, period, value string }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// openInput lists the input's files in the builder's order: a folder's
// Parquet files (pkg/lake/parquetdir), or the data files of a Delta or Iceberg table
// (pkg/lake/source, as snapbuild build --input resolves it). A table is
// read at the version the snapshot was built from when it is the table
// the manifest's lineage names and that version is still there, else at
// its latest; a note says which.
func (v *verifier) openInput(ctx context.Context, notes *[]string) (*lakeInput, error) {
	dir := v.opt.Against
	if parquetdir.TableKind(dir) == "" {
		files, err := parquetdir.List(dir)
		if err != nil {
			return nil, err
		}
		in := &lakeInput{files: make([]lakeFile, len(files))}
		for i, f := range files {
			in.files[i] = lakeFile{rel: f.Rel, abs: f.Abs, size: f.Size, table: -1}
		}
		return in, nil
	}
	if tableOpener == nil {
		return nil, fmt.Errorf("%s is a %s table, and this program does not link the table readers (snapverify does)", dir, parquetdir.TableKind(dir))
	}
	files, tbl, note, err := tableOpener(ctx, dir, v.m.Lineage)
	if err != nil {
		return nil, err
	}
	*notes = append(*notes, note)
	in := &lakeInput{tbl: tbl, files: make([]lakeFile, len(files))}
	for i, f := range files {
		in.files[i] = lakeFile{rel: f.Rel, size: f.Size, table: i}
	}
	return in, nil
}

// stringsOf returns an accessor for a string-like column (plain, large,
// view, or a dictionary of those). Values alias the array's buffers.
func stringsOf(a arrow.Array) (func(int) string, error) {
	switch s := a.(type) {
	case *array.String:
		return s.Value, nil
	case *array.LargeString:
		return s.Value, nil
	case *array.StringView:
		return s.Value, nil
	case *array.Dictionary:
		dict, err := stringsOf(s.Dictionary())
		if err != nil {
			return nil, err
		}
		return func(i int) string { return dict(s.GetValueIndex(i)) }, nil
	}
	return nil, fmt.Errorf("type %s is not a string", a.DataType())
}

// attrHasher hashes one row's attribute values, so that the index's value
// of a series and its input rows' compare in one number: per attribute a
// null flag, then the value (a string's length and bytes, whatever its
// Arrow flavour; a boolean as one byte; fixed-width values as their
// little-endian bytes). A nil column is all nulls (a file without it).
type attrHasher struct {
	src  []arrow.Array
	cols []func(i int, b []byte) []byte // append row i's value to b
	row  []byte                         // the bytes hashed, reused
}

func newAttrHasher(cols []arrow.Array) (*attrHasher, error) {
	h := &attrHasher{}
	if err := h.reset(cols); err != nil {
		return nil, err
	}
	return h, nil
}

// reset points the hasher at other columns (one batch's), reusing its
// buffers.
func (h *attrHasher) reset(cols []arrow.Array) error {
	h.src = cols
	h.cols = h.cols[:0]
	for _, c := range cols {
		f, err := h.column(c)
		if err != nil {
			return err
		}
		h.cols = append(h.cols, f)
	}
	return nil
}

func (h *attrHasher) column(a arrow.Array) (func(int, []byte) []byte, error) {
	if a == nil || a.DataType().ID() == arrow.NULL {
		return func(_ int, b []byte) []byte { return append(b, 0) }, nil
	}
	sized := func(b []byte, n int) []byte {
		return binary.LittleEndian.AppendUint64(append(b, 1), uint64(n))
	}
	switch c := a.(type) {
	case *array.String, *array.LargeString, *array.StringView, *array.Dictionary:
		get, err := stringsOf(a)
		if err != nil {
			return nil, err
		}
		return func(i int, b []byte) []byte {
			if a.IsNull(i) {
				return append(b, 0)
			}
			v := get(i)
			return append(sized(b, len(v)), v...)
		}, nil
	case *array.Binary:
		return binaryAppender(c, c.Value, sized), nil
	case *array.LargeBinary:
		return binaryAppender(c, c.Value, sized), nil
	case *array.BinaryView:
		return binaryAppender(c, c.Value, sized), nil
	case *array.Boolean:
		return func(i int, b []byte) []byte {
			switch {
			case c.IsNull(i):
				return append(b, 0)
			case c.Value(i):
				return append(b, 1, 1)
			default:
				return append(b, 1, 0)
			}
		}, nil
	}
	vb, err := newValueBytes(a)
	if err != nil {
		return nil, fmt.Errorf("attribute type %s", a.DataType())
	}
	return func(i int, b []byte) []byte {
		val, ok := vb.at(i)
		if !ok {
			return append(b, 0)
		}
		return append(append(b, 1), val...)
	}, nil
}

// binaryAppender appends a binary column's value as attrHasher does a
// string's.
func binaryAppender(a arrow.Array, value func(int) []byte, sized func([]byte, int) []byte) func(int, []byte) []byte {
	return func(i int, b []byte) []byte {
		if a.IsNull(i) {
			return append(b, 0)
		}
		v := value(i)
		return append(sized(b, len(v)), v...)
	}
}

// hash returns the digest of row i's attributes: xxHash64 of their bytes
// one after another.
func (h *attrHasher) hash(i int) uint64 {
	b := h.row[:0]
	for _, f := range h.cols {
		b = f(i, b)
	}
	h.row = b
	return xxhash.Sum64(b)
}

// describe renders row i's attributes for a finding, values shortened.
func (h *attrHasher) describe(fields []arrow.Field, i int) string {
	var parts []string
	for j, a := range h.src {
		v := "null"
		if a != nil && a.IsValid(i) {
			v = a.ValueStr(i)
			if len(v) > 40 {
				v = v[:40] + "…"
			}
			v = strconv.Quote(v)
		}
		parts = append(parts, fields[j].Name+"="+v)
	}
	return strings.Join(parts, ", ")
}
