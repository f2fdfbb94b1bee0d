package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/cespare/xxhash/v2"

	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/parquetfile"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/progress"
)

// Reading the lake for --against. The lake is not sorted, so its rows are
// not merged with the snapshot's: each row's series is looked up in the
// mapped index (idTable; once per distinct id of a row group: string columns are
// read as Parquet dictionaries, as the builder reads them) and its digest
// is added to that series code's. Workers take the units (row groups of a
// Parquet folder, data files of a table) in input order, each into its own
// digests by code; the digests are summed at the end. Memory is the
// digests (a few words per series and worker) and the row groups being
// decoded, whatever the number of rows.

// noPos marks a series no row of which a worker has seen.
const noPos = ^uint64(0)

// lakeUnit is one grain of parallel reading: consecutive row groups of
// file fi, at least minUnitRows rows unless the file has fewer (nil: the
// whole file, read through a table reader).
type lakeUnit struct {
	fi     int
	groups []int
	first  int64 // the unit's first row within its file
	rows   int64 // rows the footer gives it (-1: unknown, a table file)
}

// minUnitRows gathers small row groups into one unit: a unit costs a
// reader and a page header per column, which one-row groups would repeat
// per row.
var minUnitRows int64 = 1 << 16 // a variable for tests

// where names the unit's row groups in errors.
func (u lakeUnit) where() string {
	if len(u.groups) == 1 {
		return fmt.Sprintf("row group %d", u.groups[0])
	}
	return fmt.Sprintf("row groups %d-%d", u.groups[0], u.groups[len(u.groups)-1])
}

// lakePlan is a folder's file as planned before reading: its footer and
// the columns to read.
type lakePlan struct {
	meta   *metadata.FileMetaData
	leaves []int // file columns to read: series, period, attributes..., value
	series int   // positions in leaves; -1 absent
	period int
	value  int
	attrs  []int  // per attribute name: its position in leaves, or -1
	dict   []bool // per leaf: a string column, read as a dictionary
}

// extraSeries numbers the input's series that the index lacks, from n
// up, for every worker alike. They are rare (a snapshot that differs), so
// one lock is enough.
type extraSeries struct {
	mu    sync.Mutex
	n     int
	index map[string]int32
	ids   []string
}

func (e *extraSeries) code(id string) int32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	k, ok := e.index[id]
	if !ok {
		k = int32(e.n + len(e.ids))
		id = strings.Clone(id)
		e.index[id] = k
		e.ids = append(e.ids, id)
	}
	return k
}

// lakeAcc is one worker's digests by series code: index codes [0,n), then
// the extra series.
type lakeAcc struct {
	hashes []seriesHash
	first  []uint64 // input position (file<<40 | row) of the first row seen
	attrs  []uint64 // the attributes' digest of that row
	rows   int64
	// otherRows are the rows of series another shard holds (skipped)
	otherRows int64
	// keep (--on-duplicate=last): every row, per unit, in input order.
	keep map[int]*keptRows
}

// keptRows are one unit's rows as --on-duplicate=last needs them.
type keptRows struct {
	sid, per []int32
	h        []uint64
}

func newLakeAcc(n int) *lakeAcc {
	a := &lakeAcc{hashes: make([]seriesHash, n), first: make([]uint64, n), attrs: make([]uint64, n)}
	for i := range a.first {
		a.first[i] = noPos
	}
	return a
}

// grow makes room for code c (an extra series).
func (a *lakeAcc) grow(c int32) {
	for int(c) >= len(a.hashes) {
		a.hashes = append(a.hashes, seriesHash{})
		a.first = append(a.first, noPos)
		a.attrs = append(a.attrs, 0)
	}
}

// lakeWorker reads units into its lakeAcc, reusing its buffers.
type lakeWorker struct {
	lr    *lakeRead
	extra *extraSeries
	acc   *lakeAcc
	buf   [64]byte
	pers  []int32
	codes []int32
	ah    attrHasher
	// the series dictionary last resolved, and its codes
	dictData arrow.ArrayData
	dictCode []int32
	ids      *idTable
	// unitCodes are the series codes of the row group being read
	unitCodes []int32
}

// otherShard is the code of a series another shard holds: the input of a
// shard's build is the whole lake, and its rows of other shards are not
// this snapshot's to hold.
const otherShard int32 = -2

// codeOf resolves one series id: its index code, otherShard for a series
// of another shard (a sharded snapshot), or an extra code.
func (w *lakeWorker) codeOf(id string) int32 {
	if c, ok := w.ids.lookup(id); ok {
		return c
	}
	if sh := w.lr.shard; sh != nil && sh.Of(id) != sh.Index {
		return otherShard
	}
	return w.extra.code(id)
}

// idTable finds an index series by id in about one hash and one compare:
// an open-addressing table of codes (two slots per series, 8 bytes each
// series) over the ids where the mapped index holds them.
type idTable struct {
	x     *index.Reader
	slots []int32 // code, or -1 for an empty slot
	mask  uint64
}

func newIDTable(x *index.Reader) *idTable {
	size := 16
	for size < 2*x.Len() {
		size *= 2
	}
	t := &idTable{x: x, slots: make([]int32, size), mask: uint64(size - 1)}
	for i := range t.slots {
		t.slots[i] = -1
	}
	for c := 0; c < x.Len(); c++ {
		i := xxhash.Sum64String(x.ID(c)) & t.mask
		for t.slots[i] >= 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = int32(c)
	}
	return t
}

func (t *idTable) lookup(id string) (int32, bool) {
	i := xxhash.Sum64String(id) & t.mask
	for {
		c := t.slots[i]
		if c < 0 {
			return 0, false
		}
		if t.x.ID(int(c)) == id {
			return c, true
		}
		i = (i + 1) & t.mask
	}
}

// seriesCodes fills w.codes with the code of each row of the series
// column sa; row numbers in errors count from base.
func (w *lakeWorker) seriesCodes(sa arrow.Array, base int64) error {
	n := sa.Len()
	if cap(w.codes) < n {
		w.codes = make([]int32, n)
	}
	codes := w.codes[:n]
	firstNull := func() error {
		for i := 0; i < n; i++ {
			if sa.IsNull(i) {
				return fmt.Errorf("row %d: series id is null", base+int64(i))
			}
		}
		return nil
	}
	if sa.NullN() > 0 {
		return firstNull()
	}
	if d, ok := sa.(*array.Dictionary); ok {
		dd := d.Dictionary().Data()
		if dd != w.dictData {
			get, err := stringsOf(d.Dictionary())
			if err != nil {
				return fmt.Errorf("series column %q: %w", w.lr.cols.series, err)
			}
			m := d.Dictionary().Len()
			w.dictCode = w.dictCode[:0]
			for j := 0; j < m; j++ {
				w.dictCode = append(w.dictCode, w.codeOf(get(j)))
			}
			w.dictData = dd
		}
		if idx, ok := d.Indices().(*array.Int32); ok {
			// pqarrow's index type: read the indices in place.
			m := int32(len(w.dictCode))
			for i, j := range idx.Int32Values() {
				if j < 0 || j >= m {
					return fmt.Errorf("row %d: series column %q: dictionary index %d out of range", base+int64(i), w.lr.cols.series, j)
				}
				codes[i] = w.dictCode[j]
			}
			return nil
		}
		for i := range codes {
			j := d.GetValueIndex(i)
			if j < 0 || j >= len(w.dictCode) {
				return fmt.Errorf("row %d: series column %q: dictionary index %d out of range", base+int64(i), w.lr.cols.series, j)
			}
			codes[i] = w.dictCode[j]
		}
		return nil
	}
	get, err := stringsOf(sa)
	if err != nil {
		return fmt.Errorf("series column %q: %w", w.lr.cols.series, err)
	}
	// Plain ids: a run of one series (the common layout) costs a compare
	// per row, a change of series one lookup.
	var prev string
	prevCode := int32(-1)
	for i := range codes {
		id := get(i)
		if prevCode < 0 || id != prev {
			prev, prevCode = id, w.codeOf(id)
		}
		codes[i] = prevCode
	}
	return nil
}

// add digests the rows of series codes (seriesCodes), period pa, value
// va (nil: none), the attribute columns attrCols (nil entries: absent,
// null); base is the file row of the first of them.
func (w *lakeWorker) add(u lakeUnit, base int64, codes []int32, pa, va arrow.Array, attrCols []arrow.Array, kept *keptRows) error {
	lr := w.lr
	n := len(codes)
	if cap(w.pers) < n {
		w.pers = make([]int32, n)
	}
	pers := w.pers[:n]
	if err := period.Column(pa, pers); err != nil {
		var re *period.RowError
		if errors.As(err, &re) {
			return fmt.Errorf("row %d: column %q: period %q: %v", base+int64(re.Row), lr.cols.period, re.Value, re.Err)
		}
		return fmt.Errorf("column %q: %w", lr.cols.period, err)
	}
	var vb valueBytes
	if va != nil {
		var err error
		if vb, err = newValueBytes(va); err != nil {
			return err
		}
	}
	if err := w.ah.reset(attrCols); err != nil {
		return err
	}
	acc := w.acc
	pos := uint64(u.fi)<<40 | uint64(base)
	skipped := 0
	for i, c := range codes {
		if c == otherShard {
			skipped++
			continue
		}
		if int(c) >= len(acc.hashes) {
			acc.grow(c)
		}
		if acc.first[c] == noPos {
			// Units reach a worker in input order: its first row of a
			// series is the earliest it reads.
			acc.first[c] = pos + uint64(i)
			acc.attrs[c] = w.ah.hash(i)
		}
		val, valid := vb.at(i)
		h := rowHash(&w.buf, pers[i], val, valid)
		if kept != nil {
			kept.sid = append(kept.sid, c)
			kept.per = append(kept.per, pers[i])
			kept.h = append(kept.h, h)
		} else {
			acc.hashes[c].add(h)
		}
	}
	acc.rows += int64(n - skipped)
	acc.otherRows += int64(skipped)
	return nil
}

// readUnits reads every unit with parallel workers and sums their
// digests into lr.
func (lr *lakeRead) readUnits(ctx context.Context, x *index.Reader, units []lakeUnit, parallel int, ph progress.Phase) error {
	n := x.Len()
	extra := &extraSeries{n: n, index: map[string]int32{}}
	ids := newIDTable(x)
	workers := make([]*lakeWorker, min(parallel, max(len(units), 1)))
	var next atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for k := range workers {
		w := &lakeWorker{lr: lr, ids: ids, extra: extra, acc: newLakeAcc(n)}
		if lr.keep {
			w.acc.keep = map[int]*keptRows{}
		}
		workers[k] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(units) || ctx.Err() != nil {
					return
				}
				if err := w.readUnit(ctx, units[i], i); err != nil {
					errs[i] = err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	// The first failure in input order, not a unit the failure cancelled.
	for i, err := range errs {
		if errors.Is(err, context.Canceled) {
			if first := slices.IndexFunc(errs, func(e error) bool { return e != nil && !errors.Is(e, context.Canceled) }); first >= 0 {
				i, err = first, errs[first]
			}
		}
		if err != nil {
			f := lr.in.files[units[i].fi]
			if f.table >= 0 {
				return fmt.Errorf("%w: input %v", ErrCannotVerify, err) // a table's reader names the file
			}
			return fmt.Errorf("%w: input %s: %v", ErrCannotVerify, f.rel, err)
		}
	}
	lr.sum(workers, extra, len(units))
	return nil
}

// sum merges the workers' digests: hashes summed, each series' attributes
// those of its first row in input order.
func (lr *lakeRead) sum(workers []*lakeWorker, extra *extraSeries, units int) {
	if lr.keep {
		var kept []*keptRows
		for u := 0; u < units; u++ {
			for _, w := range workers {
				if k, ok := w.acc.keep[u]; ok {
					kept = append(kept, k)
				}
			}
		}
		lr.kept = kept
	}
	// The first worker's digests become the sum, in place: the others are
	// merged into them and dropped one by one.
	total := extra.n + len(extra.ids)
	a := workers[0].acc
	a.grow(int32(total - 1))
	d := &inputDigest{n: extra.n, extra: extra.ids, hashes: a.hashes, attrs: a.attrs, rawRows: a.rows, otherRows: a.otherRows}
	for _, w := range workers[1:] {
		o := w.acc
		w.acc = nil
		d.rawRows += o.rows
		d.otherRows += o.otherRows
		for c := range o.hashes {
			d.hashes[c].merge(o.hashes[c])
			if o.first[c] < a.first[c] {
				a.first[c], d.attrs[c] = o.first[c], o.attrs[c]
			}
		}
	}
	d.seen = make([]bool, total)
	for c, f := range a.first {
		d.seen[c] = f != noPos
	}
	lr.digest = d
}

// readUnit reads one unit: a row group of a folder's file, or a table's
// data file.
func (w *lakeWorker) readUnit(ctx context.Context, u lakeUnit, ui int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed Parquet file: %v", r)
		}
	}()
	lr := w.lr
	f := lr.in.files[u.fi]
	var kept *keptRows
	if lr.keep {
		kept = &keptRows{}
		w.acc.keep[ui] = kept
	}
	w.dictData = nil
	if f.table >= 0 {
		return w.readTableFile(ctx, u, kept)
	}
	p := lr.plans[u.fi]
	pf, err := file.OpenParquetFile(f.abs, false, file.WithMetadata(p.meta), file.WithReadProps(lakeReadProps()))
	if err != nil {
		return fmt.Errorf("not a readable Parquet file: %w", err)
	}
	defer pf.Close()
	// String columns written with a dictionary come as one, as the
	// builder reads them: a series id is looked up once per row group, a
	// period parsed once. Plain-encoded ones come plain: building a
	// dictionary would hash every row anyway.
	var props pqarrow.ArrowReadProperties
	for j, leaf := range p.leaves {
		if p.dict[j] && dictEncoded(p.meta, leaf, u.groups) {
			props.SetReadDict(leaf, true)
		}
	}
	fr, err := pqarrow.NewFileReader(pf, props, &lakeBuffers)
	if err != nil {
		return err
	}
	codes, fresh, err := w.unitSeries(ctx, fr, p, u)
	if err != nil {
		return err
	}
	// The other columns; the attributes only when the row group holds a
	// series this worker has not seen (they are compared on each
	// series' first row alone).
	need := []int{p.period}
	if p.value >= 0 {
		need = append(need, p.value)
	}
	if fresh {
		for _, pos := range p.attrs {
			if pos >= 0 {
				need = append(need, pos)
			}
		}
	}
	leaves := make([]int, len(need))
	at := make(map[int]int, len(need)) // position in p.leaves -> column of tbl
	for k, pos := range need {
		leaves[k] = p.leaves[pos]
		at[pos] = k
	}
	tbl, err := fr.ReadRowGroups(ctx, leaves, u.groups)
	if err != nil {
		return fmt.Errorf("%s: %w", u.where(), err)
	}
	defer tbl.Release()
	if tbl.NumRows() != u.rows {
		return fmt.Errorf("%s: read %d rows, the footer says %d", u.where(), tbl.NumRows(), u.rows)
	}
	// Columns of one table may be chunked differently: walk them in
	// row ranges where every column is one chunk.
	cols := make([][]arrow.Array, len(leaves))
	for k := range leaves {
		cols[k] = tbl.Column(k).Data().Chunks()
	}
	attrCols := make([]arrow.Array, len(p.attrs))
	var owned []arrow.Array
	defer func() {
		for _, a := range owned {
			a.Release()
		}
	}()
	for off := int64(0); off < u.rows; {
		end := u.rows
		for _, cs := range cols {
			if e := chunkEnd(cs, off); e < end {
				end = e
			}
		}
		slice := func(pos int) arrow.Array {
			k, ok := at[pos]
			if !ok {
				return nil
			}
			a := sliceOf(cols[k], off, end)
			owned = append(owned, a)
			return a
		}
		pa, va := slice(p.period), slice(p.value)
		for k, pos := range p.attrs {
			attrCols[k] = slice(pos)
		}
		if err := w.add(u, u.first+off, codes[off:end], pa, va, attrCols, kept); err != nil {
			return err
		}
		for _, a := range owned {
			a.Release()
		}
		owned = owned[:0]
		off = end
	}
	lr.ph.Add(u.rows, f.size*u.rows/max(p.meta.NumRows, 1))
	return nil
}

// dictEncoded reports whether column leaf has a dictionary page in every
// row group of groups.
func dictEncoded(meta *metadata.FileMetaData, leaf int, groups []int) bool {
	for _, g := range groups {
		cc, err := meta.RowGroup(g).ColumnChunk(leaf)
		if err != nil || !cc.HasDictionaryPage() {
			return false
		}
	}
	return true
}

// unitSeries reads the series column of row group u into codes, one per
// row, and says whether any is fresh: a series this worker has no row of.
func (w *lakeWorker) unitSeries(ctx context.Context, fr *pqarrow.FileReader, p *lakePlan, u lakeUnit) (codes []int32, fresh bool, err error) {
	tbl, err := fr.ReadRowGroups(ctx, []int{p.leaves[p.series]}, u.groups)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", u.where(), err)
	}
	defer tbl.Release()
	if tbl.NumRows() != u.rows {
		return nil, false, fmt.Errorf("%s: read %d rows, the footer says %d", u.where(), tbl.NumRows(), u.rows)
	}
	if int64(cap(w.unitCodes)) < u.rows {
		w.unitCodes = make([]int32, u.rows)
	}
	codes = w.unitCodes[:u.rows]
	var off int64
	for _, c := range tbl.Column(0).Data().Chunks() {
		if err := w.seriesCodes(c, u.first+off); err != nil {
			return nil, false, err
		}
		copy(codes[off:], w.codes[:c.Len()])
		off += int64(c.Len())
	}
	first := w.acc.first
	for _, c := range codes {
		if c != otherShard && (int(c) >= len(first) || first[c] == noPos) {
			return codes, true, nil
		}
	}
	return codes, false, nil
}

// chunkEnd is the row (of the whole column) where the chunk holding row
// off ends.
func chunkEnd(cs []arrow.Array, off int64) int64 {
	var start int64
	for _, c := range cs {
		e := start + int64(c.Len())
		if off < e {
			return e
		}
		start = e
	}
	return start
}

// sliceOf returns rows [lo, hi) of the chunked column cs, which lie in
// one chunk (chunkEnd made sure of it).
func sliceOf(cs []arrow.Array, lo, hi int64) arrow.Array {
	var start int64
	for _, c := range cs {
		e := start + int64(c.Len())
		if lo < e {
			return array.NewSlice(c, lo-start, hi-start)
		}
		start = e
	}
	return array.NewSlice(cs[len(cs)-1], 0, 0)
}

// readTableFile reads one data file of a table through its reader.
func (w *lakeWorker) readTableFile(ctx context.Context, u lakeUnit, kept *keptRows) error {
	lr := w.lr
	f := lr.in.files[u.fi]
	names := append([]string{lr.cols.series, lr.cols.period, lr.cols.value}, lr.attrNames...)
	var rows int64
	attrCols := make([]arrow.Array, len(lr.attrNames))
	err := lr.in.tbl.EachBatch(ctx, f.table, names, func(rec arrow.RecordBatch) error {
		rs := rec.Schema()
		col := func(name string) arrow.Array {
			if is := rs.FieldIndices(name); len(is) == 1 {
				return rec.Column(is[0])
			}
			return nil
		}
		sa, pa, va := col(lr.cols.series), col(lr.cols.period), col(lr.cols.value)
		if sa == nil {
			return fmt.Errorf("no series column %q", lr.cols.series)
		}
		if pa == nil {
			return fmt.Errorf("no period column %q", lr.cols.period)
		}
		if va != nil && va.DataType().ID() != arrow.NULL {
			lr.setValueType(u.fi, va.DataType())
		}
		for j, a := range lr.attrNames {
			attrCols[j] = col(a)
		}
		if err := w.seriesCodes(sa, rows); err != nil {
			return err
		}
		if err := w.add(u, rows, w.codes[:sa.Len()], pa, va, attrCols, kept); err != nil {
			return err
		}
		rows += rec.NumRows()
		lr.ph.Add(rec.NumRows(), 0)
		return nil
	})
	if err != nil {
		return err
	}
	lr.setFooter(u.fi, rows)
	lr.ph.Add(0, f.size)
	return nil
}

// planFile reads the footer of a folder's file and plans its units.
func (lr *lakeRead) planFile(fi int) (_ []lakeUnit, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed Parquet file: %v", r)
		}
	}()
	f := lr.in.files[fi]
	pf, err := file.OpenParquetFile(f.abs, false)
	if err != nil {
		return nil, fmt.Errorf("not a readable Parquet file: %w", err)
	}
	defer pf.Close()
	if err := parquetfile.CheckChunks(pf); err != nil {
		return nil, err
	}
	pr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
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
	si, pi, vi := idx(lr.cols.series), idx(lr.cols.period), idx(lr.cols.value)
	if si < 0 {
		return nil, fmt.Errorf("no series column %q", lr.cols.series)
	}
	if pi < 0 {
		return nil, fmt.Errorf("no period column %q", lr.cols.period)
	}
	p := &lakePlan{meta: pf.MetaData(), leaves: []int{si, pi}, series: 0, period: 1, value: -1}
	for _, a := range lr.attrNames {
		pos := -1
		if ai := idx(a); ai >= 0 {
			pos = len(p.leaves)
			p.leaves = append(p.leaves, ai)
		}
		p.attrs = append(p.attrs, pos)
	}
	if vi >= 0 {
		p.value = len(p.leaves)
		p.leaves = append(p.leaves, vi)
		if t := sc.Field(vi).Type; t.ID() != arrow.NULL {
			lr.setValueType(fi, t)
		}
	}
	for _, leaf := range p.leaves {
		id := sc.Field(leaf).Type.ID()
		p.dict = append(p.dict, id == arrow.STRING || id == arrow.LARGE_STRING)
	}
	lr.plans[fi] = p
	lr.setFooter(fi, pf.NumRows())
	var units []lakeUnit
	var first int64
	cur := lakeUnit{fi: fi}
	for g := 0; g < pf.NumRowGroups(); g++ {
		n := pf.MetaData().RowGroup(g).NumRows()
		if len(cur.groups) == 0 {
			cur.first = first
		}
		cur.groups = append(cur.groups, g)
		cur.rows += n
		first += n
		if cur.rows >= minUnitRows {
			units = append(units, cur)
			cur = lakeUnit{fi: fi}
		}
	}
	if cur.rows > 0 {
		units = append(units, cur)
	}
	if first != pf.NumRows() {
		return nil, fmt.Errorf("row groups hold %d rows, the footer says %d", first, pf.NumRows())
	}
	if len(units) == 0 {
		lr.ph.Add(0, f.size)
	}
	return units, nil
}

// setValueType records file fi's value column type.
func (lr *lakeRead) setValueType(fi int, t arrow.DataType) {
	lr.mu.Lock()
	lr.valueTypes[fi] = t
	lr.mu.Unlock()
}

// setFooter records file fi's row count.
func (lr *lakeRead) setFooter(fi int, rows int64) {
	lr.mu.Lock()
	lr.footers[fi] = rows
	lr.mu.Unlock()
}
