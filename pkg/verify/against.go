package verify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cespare/xxhash/v2"
	"golang.org/x/sync/errgroup"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lake/parquetdir"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/parquetfile"
	"github.com/energyscope/servingsnap/pkg/period"

	"github.com/energyscope/servingsnap/pkg/progress"
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
// exactly when their value types agree.
func rowHash(buf *[64]byte, p int32, val []byte, valid bool) uint64 {
	binary.LittleEndian.PutUint32(buf[:4], uint32(p))
	n := 5
	buf[4] = 0
	if valid {
		buf[4] = 1
		n += copy(buf[5:], val)
	}
	return xxhash.Sum64(buf[:n])
}

// valueBytes gives raw access to a fixed-width value column.
type valueBytes struct {
	arr  arrow.Array
	data []byte
	w    int
	off  int
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
	if bufs := a.Data().Buffers(); len(bufs) > 1 && bufs[1] != nil {
		vb.data = bufs[1].Bytes()
	}
	return vb, nil
}

// at returns row i's bytes and whether it is valid.
func (vb valueBytes) at(i int) ([]byte, bool) {
	if vb.w == 0 || vb.arr.IsNull(i) {
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

// fileRows is what one input file holds, keyed by a file-local series
// dictionary: per-series digests, or (keep) every row in file order so
// that duplicates can be resolved in input order.
type fileRows struct {
	rows      int64
	footer    int64
	ids       []string
	hashes    []seriesHash
	sid, per  []int32
	h         []uint64
	valueType arrow.DataType // nil: no value column, or an all-null one
	// attrs[k] hashes the attribute values (Manifest.Schema.Attributes,
	// in order) of local series k's first row in the file.
	attrs []uint64
}

// against re-reads the input lake and compares it with the snapshot series
// by series. Problems reading the input are errors (nothing can be said
// about the snapshot); differences are findings. The steps: read the lake,
// check the value types agree, merge the files' digests in input order,
// hash the snapshot alike, compare.
func (v *verifier) against() error {
	v.ran()
	lr, err := v.readLake()
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

// lakeRead is the input as against read it: its files and what each holds.
type lakeRead struct {
	in        *lakeInput
	res       []*fileRows // by file
	cols      buildColumns
	keep      bool // --on-duplicate=last: the last row of a key wins
	attrNames []string
}

// readLake reads every input file in parallel into per-file digests (or,
// with keep, rows), showing a "read lake" phase.
func (v *verifier) readLake() (*lakeRead, error) {
	b := v.m.Build
	lr := &lakeRead{
		cols:      buildColumns{series: or(b.SeriesColumn, "series_id"), period: or(b.PeriodColumn, "period"), value: or(b.ValueColumn, "value")},
		keep:      b.OnDuplicate == "last",
		attrNames: v.m.Schema.Attributes,
	}
	in, err := v.openInput(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCannotVerify, err)
	}
	lr.in = in
	files := in.files
	parallel := v.opt.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	lr.res = make([]*fileRows, len(files))
	var inBytes int64
	for _, f := range files {
		inBytes += f.size
	}
	ph := progress.Or(v.opt.Progress).Phase("read lake", 0, inBytes)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(parallel)
	for i, f := range files {
		g.Go(func() error {
			r, err := readLakeFile(ctx, in.tbl, f, lr.cols, lr.attrNames, lr.keep, ph)
			if err != nil && f.table >= 0 {
				return fmt.Errorf("%w: input %v", ErrCannotVerify, err) // a table's reader names the file
			}
			if err != nil {
				return fmt.Errorf("%w: input %s: %v", ErrCannotVerify, f.rel, err)
			}
			ph.Add(0, f.size)
			lr.res[i] = r
			return nil
		})
	}
	err = g.Wait()
	progress.Finish(ph, err)
	if err != nil {
		if in.tbl != nil {
			in.tbl.Close()
		}
		return nil, err
	}
	v.r.InputFiles = len(files)
	v.noteLineage(files, lr.res)
	if v.m.Lineage.Kind == dataset.LineageCompaction {
		v.note(fmt.Sprintf("snapshot %d is a compaction (%s): it differs from the input by the live writes it folded in", v.r.SnapshotID, v.m.Lineage.Source))
	}
	return lr, nil
}

// checkValueTypes proves every input file's value column has the
// snapshot's type: otherwise no row can hash alike. False after a finding.
func (v *verifier) checkValueTypes(lr *lakeRead) bool {
	vt := v.snap.Schema().Field(datafile.ColumnValue).Type
	for i, r := range lr.res {
		if r.valueType != nil && !arrow.TypeEqual(r.valueType, vt) {
			v.add(CheckAgainst, filepath.ToSlash(filepath.Join(v.opt.Against, lr.in.files[i].rel)), "column "+lr.cols.value,
				"value column has type %s, the snapshot stores %s", r.valueType, vt)
			return false
		}
	}
	return true
}

// inputDigest is the whole input, series by series.
type inputDigest struct {
	index   map[string]int32 // series id → its number below
	ids     []string
	hashes  []seriesHash
	attrs   []uint64 // per series: its attributes in the first file that has it
	rawRows int64    // rows read, duplicates included
}

// intern numbers series id, adding it when new.
func (d *inputDigest) intern(id string) int32 {
	k, ok := d.index[id]
	if !ok {
		k = int32(len(d.ids))
		d.index[id] = k
		d.ids = append(d.ids, id)
		d.hashes = append(d.hashes, seriesHash{})
		d.attrs = append(d.attrs, 0)
	}
	return k
}

// mergeInput merges the files' digests in input order into one per
// series, resolving duplicates as the builder did.
func (v *verifier) mergeInput(lr *lakeRead) *inputDigest {
	d := &inputDigest{index: map[string]int32{}}
	for _, r := range lr.res {
		for k, id := range r.ids {
			if _, seen := d.index[id]; !seen {
				d.attrs[d.intern(id)] = r.attrs[k]
			}
		}
	}
	if !lr.keep {
		for _, r := range lr.res {
			d.rawRows += r.rows
			for k, id := range r.ids {
				d.hashes[d.intern(id)].merge(r.hashes[k])
			}
		}
	} else {
		v.mergeKeepLast(lr, d)
	}
	v.r.InputRows = d.rawRows
	v.r.InputSeries = int64(len(d.ids))
	return d
}

// mergeKeepLast hashes the input's rows with --on-duplicate=last: among
// the rows of one (series, period), only the last in input order counts;
// the others are counted as InputDuplicates.
func (v *verifier) mergeKeepLast(lr *lakeRead, d *inputDigest) {
	var total int
	for _, r := range lr.res {
		total += len(r.sid)
	}
	sid := make([]int32, 0, total)
	per := make([]int32, 0, total)
	hs := make([]uint64, 0, total)
	for _, r := range lr.res {
		d.rawRows += r.rows
		remap := make([]int32, len(r.ids))
		for k, id := range r.ids {
			remap[k] = d.intern(id)
		}
		for j := range r.sid {
			sid = append(sid, remap[r.sid[j]])
		}
		per = append(per, r.per...)
		hs = append(hs, r.h...)
		r.sid, r.per, r.h = nil, nil, nil
	}
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
	matched, ok := v.compareSeries(lr, in, snap)
	if !ok {
		return
	}
	v.reportMissing(in, matched)
}

// compareSeries compares each index series with the input's: present,
// same attributes, same rows. It returns which input series matched;
// false when the findings are full.
func (v *verifier) compareSeries(lr *lakeRead, in *inputDigest, snap *snapDigest) ([]bool, bool) {
	df, _ := v.m.FileByRole(manifest.RoleData)
	xf, _ := v.m.FileByRole(manifest.RoleIndex)
	x := v.snap.Index()
	snapAttr, fields := v.attrHasherOf(xf.Path, lr)
	matched := make([]bool, len(in.ids))
	for c := 0; c < x.Len(); c++ {
		k, ok := in.index[x.SeriesID(c)]
		got := snap.hashes[c]
		if !ok {
			if !v.add(CheckAgainst, df.Path, v.seriesLoc(c), "series is in the snapshot (%d rows) but not in the input", got.rows) {
				return nil, false
			}
			continue
		}
		matched[k] = true
		if snapAttr != nil && snapAttr.hash(c) != in.attrs[k] {
			if !v.add(CheckAgainst, xf.Path, v.seriesLoc(c), "series' attributes differ from the input's: the index has %s", snapAttr.describe(fields, c)) {
				return nil, false
			}
		}
		want := in.hashes[k]
		switch {
		case got.rows != want.rows:
			if !v.add(CheckAgainst, df.Path, v.seriesLoc(c), "series has %d rows in the snapshot, %d in the input", got.rows, want.rows) {
				return nil, false
			}
		case got != want:
			if !v.add(CheckAgainst, df.Path, v.seriesLoc(c), "series has the same %d rows in number but different periods or values than the input", got.rows) {
				return nil, false
			}
		}
	}
	return matched, true
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
func (v *verifier) reportMissing(in *inputDigest, matched []bool) {
	df, _ := v.m.FileByRole(manifest.RoleData)
	var missing []int
	for k := range in.ids {
		if !matched[k] {
			missing = append(missing, k)
		}
	}
	sort.Slice(missing, func(a, b int) bool { return in.ids[missing[a]] < in.ids[missing[b]] })
	for _, k := range missing {
		if !v.add(CheckAgainst, df.Path, fmt.Sprintf("series %q", in.ids[k]), "series is in the input (%d rows) but not in the snapshot", in.hashes[k].rows) {
			return
		}
	}
}

// noteLineage notes where the input differs from the inputs the manifest
// records. That is not a finding: a lake may be rewritten (compacted,
// re-encoded) and still hold the same rows; the row comparison decides.
func (v *verifier) noteLineage(files []lakeFile, res []*fileRows) {
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
		case in.Size != f.size || in.Rows != res[i].footer:
			diffs = append(diffs, fmt.Sprintf("%s changed (%d bytes %d rows, recorded %d bytes %d rows)", f.rel, f.size, res[i].footer, in.Size, in.Rows))
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
func (v *verifier) openInput(ctx context.Context) (*lakeInput, error) {
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
	v.note(note)
	in := &lakeInput{tbl: tbl, files: make([]lakeFile, len(files))}
	for i, f := range files {
		in.files[i] = lakeFile{rel: f.Rel, size: f.Size, table: i}
	}
	return in, nil
}

// readLakeFile reads the key columns of one input file: a Parquet file of
// a folder, or a table's data file through tbl.
func readLakeFile(ctx context.Context, tbl TableReader, f lakeFile, cols buildColumns, attrNames []string, keep bool, ph progress.Phase) (_ *fileRows, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed Parquet file: %v", r)
		}
	}()
	fr := &fileReader{out: &fileRows{}, cols: cols, attrNames: attrNames, keep: keep, local: map[string]int32{}, ph: ph}
	if f.table >= 0 {
		names := append([]string{cols.series, cols.period, cols.value}, attrNames...)
		if err := tbl.EachBatch(ctx, f.table, names, fr.batch); err != nil {
			return nil, err
		}
		fr.out.footer = fr.out.rows
		return fr.out, nil
	}
	pf, err := file.OpenParquetFile(f.abs, false)
	if err != nil {
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	defer pf.Close()
	if err := parquetfile.CheckChunks(pf); err != nil {
		return nil, err
	}
	out := fr.out
	out.footer = pf.NumRows()
	pr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	sc, err := pr.Schema()
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if sc.NumFields() != pf.MetaData().Schema.NumColumns() {
		return nil, fmt.Errorf("nested columns are not supported")
	}
	idx := func(name string) int {
		for i, fl := range sc.Fields() {
			if fl.Name == name {
				return i
			}
		}
		return -1
	}
	si, pi, vi := idx(cols.series), idx(cols.period), idx(cols.value)
	if si < 0 {
		return nil, fmt.Errorf("no series column %q", cols.series)
	}
	if pi < 0 {
		return nil, fmt.Errorf("no period column %q", cols.period)
	}
	want := []int{si, pi}
	for _, a := range attrNames {
		if ai := idx(a); ai >= 0 {
			want = append(want, ai)
		}
	}
	if vi >= 0 {
		want = append(want, vi)
	}
	if pf.NumRows() == 0 || pf.NumRowGroups() == 0 {
		if vi >= 0 && sc.Field(vi).Type.ID() != arrow.NULL {
			out.valueType = sc.Field(vi).Type
		}
		return out, nil
	}
	rr, err := pr.GetRecordReader(ctx, want, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	for rr.Next() {
		if err := fr.batch(rr.RecordBatch()); err != nil {
			return nil, err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	if out.rows != out.footer {
		return nil, fmt.Errorf("read %d rows, the footer says %d", out.rows, out.footer)
	}
	return out, nil
}

// fileReader hashes the record batches of one input file into its
// fileRows.
type fileReader struct {
	out       *fileRows
	cols      buildColumns
	attrNames []string
	keep      bool
	local     map[string]int32 // series id -> index into out.ids
	pers      []int32
	buf       [64]byte
	ph        progress.Phase
}

// batch adds one record batch's rows (columns looked up by name).
func (fr *fileReader) batch(rec arrow.RecordBatch) error {
	out, cols := fr.out, fr.cols
	rs := rec.Schema()
	col := func(name string) arrow.Array {
		if is := rs.FieldIndices(name); len(is) == 1 {
			return rec.Column(is[0])
		}
		return nil
	}
	sa, pa, va := col(cols.series), col(cols.period), col(cols.value)
	if sa == nil {
		return fmt.Errorf("no series column %q", cols.series)
	}
	if pa == nil {
		return fmt.Errorf("no period column %q", cols.period)
	}
	if va != nil && va.DataType().ID() != arrow.NULL {
		out.valueType = va.DataType()
	}
	ids, err := stringsOf(sa)
	if err != nil {
		return fmt.Errorf("series column %q: %w", cols.series, err)
	}
	n := int(rec.NumRows())
	if cap(fr.pers) < n {
		fr.pers = make([]int32, n)
	}
	pers := fr.pers[:n]
	if err := period.Column(pa, pers); err != nil {
		var re *period.RowError
		if errors.As(err, &re) {
			return fmt.Errorf("row %d: column %q: period %q: %v", out.rows+int64(re.Row), cols.period, re.Value, re.Err)
		}
		return fmt.Errorf("column %q: %w", cols.period, err)
	}
	attrCols := make([]arrow.Array, len(fr.attrNames)) // nil: not in this file, null
	for j, a := range fr.attrNames {
		attrCols[j] = col(a)
	}
	ah, err := newAttrHasher(attrCols)
	if err != nil {
		return err
	}
	var vb valueBytes
	if va != nil {
		if vb, err = newValueBytes(va); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		if sa.IsNull(i) {
			return fmt.Errorf("row %d: series id is null", out.rows+int64(i))
		}
		id := ids(i)
		k, ok := fr.local[id]
		if !ok {
			k = int32(len(out.ids))
			id = strings.Clone(id)
			fr.local[id] = k
			out.ids = append(out.ids, id)
			out.attrs = append(out.attrs, ah.hash(i))
			if !fr.keep {
				out.hashes = append(out.hashes, seriesHash{})
			}
		}
		val, valid := vb.at(i)
		h := rowHash(&fr.buf, pers[i], val, valid)
		if fr.keep {
			out.sid = append(out.sid, k)
			out.per = append(out.per, pers[i])
			out.h = append(out.h, h)
		} else {
			out.hashes[k].add(h)
		}
	}
	out.rows += int64(n)
	fr.ph.Add(int64(n), 0)
	return nil
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
	cols []func(i int, d *xxhash.Digest)
	buf  [8]byte
}

func newAttrHasher(cols []arrow.Array) (*attrHasher, error) {
	h := &attrHasher{src: cols}
	for _, c := range cols {
		f, err := h.column(c)
		if err != nil {
			return nil, err
		}
		h.cols = append(h.cols, f)
	}
	return h, nil
}

var (
	nullByte  = []byte{0}
	validByte = []byte{1}
)

func (h *attrHasher) column(a arrow.Array) (func(int, *xxhash.Digest), error) {
	if a == nil || a.DataType().ID() == arrow.NULL {
		return func(_ int, d *xxhash.Digest) { d.Write(nullByte) }, nil
	}
	str := func(get func(int) string) func(int, *xxhash.Digest) {
		return func(i int, d *xxhash.Digest) {
			if a.IsNull(i) {
				d.Write(nullByte)
				return
			}
			v := get(i)
			d.Write(validByte)
			binary.LittleEndian.PutUint64(h.buf[:], uint64(len(v)))
			d.Write(h.buf[:])
			d.WriteString(v)
		}
	}
	switch c := a.(type) {
	case *array.String, *array.LargeString, *array.StringView, *array.Dictionary:
		get, err := stringsOf(a)
		if err != nil {
			return nil, err
		}
		return str(get), nil
	case *array.Binary:
		return str(func(i int) string { return string(c.Value(i)) }), nil
	case *array.LargeBinary:
		return str(func(i int) string { return string(c.Value(i)) }), nil
	case *array.BinaryView:
		return str(func(i int) string { return string(c.Value(i)) }), nil
	case *array.Boolean:
		return func(i int, d *xxhash.Digest) {
			switch {
			case c.IsNull(i):
				d.Write(nullByte)
			case c.Value(i):
				d.Write([]byte{1, 1})
			default:
				d.Write([]byte{1, 0})
			}
		}, nil
	}
	vb, err := newValueBytes(a)
	if err != nil {
		return nil, fmt.Errorf("attribute type %s", a.DataType())
	}
	return func(i int, d *xxhash.Digest) {
		val, ok := vb.at(i)
		if !ok {
			d.Write(nullByte)
			return
		}
		d.Write(validByte)
		d.Write(val)
	}, nil
}

// hash returns the digest of row i's attributes.
func (h *attrHasher) hash(i int) uint64 {
	d := xxhash.New()
	for _, f := range h.cols {
		f(i, d)
	}
	return d.Sum64()
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
