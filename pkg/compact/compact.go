// Package compact folds a dataset's delta into its next snapshot: it
// streams the merged rows of a query.Reader (a base snapshot with frozen
// delta runs over it) in (series id, period) order through the data and
// index writers, and publishes the result as snapshot N+1 recording the
// WAL position it folded in. The base is never re-sorted: its rows are
// already in order, and the merge per series is the read layer's own
// (pkg/query's Composite), so what compaction writes is exactly what a
// query read before it.
package compact

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/bufpool"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapwrite"
	"github.com/energyscope/servingsnap/pkg/verify"
)

// Options tune a compaction.
type Options struct {
	// BatchRows is the target data batch size (default: the parent's).
	BatchRows int
	// Tool names the writer in the manifest: "servingsnap VERSION".
	Tool string
	Now  func() time.Time
	// Yield, if set, is called between the data batches written: a
	// serving process gives its live writes the cores there.
	Yield func()
}

// Result describes the published snapshot.
type Result struct {
	SnapshotID  uint64
	ParentID    uint64
	Rows        int64
	Series      int64
	WALPosition uint64
	Duration    time.Duration
}

// Publish writes the rows r serves as the next snapshot of the dataset in
// dir and flips CURRENT to it. parent is the manifest of the snapshot r's
// base is; walPos the WAL position the delta runs in r hold every write
// through. It takes the dataset's write lock (waiting for a build that
// holds it), and publishes only over parent: when CURRENT names another
// snapshot by then (a build, publish or rollback landed since the delta was
// frozen) it writes nothing and fails with dataset.ErrMoved, so a
// compaction never replaces a snapshot it did not read.
func Publish(ctx context.Context, dir *dataset.Dir, r query.Reader, parent *manifest.Manifest, walPos uint64, opt Options) (Result, error) {
	t0 := time.Now()
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Tool == "" {
		opt.Tool = "servingsnap dev"
	}
	if opt.BatchRows <= 0 {
		opt.BatchRows = parent.Build.BatchRows
	}
	if opt.BatchRows <= 0 {
		opt.BatchRows = datafile.DefaultBatchRows
	}
	w, err := dir.LockForWriteWith(ctx, dataset.LockOptions{})
	if err != nil {
		return Result{}, err
	}
	defer w.Close()
	change := dataset.Change{Action: dataset.ActionCompaction, Expect: parent.SnapshotID, Tool: opt.Tool}
	if err := w.Expect(change); err != nil {
		return Result{}, err // before the write: nothing to throw away
	}
	id, err := w.NextID()
	if err != nil {
		return Result{}, err
	}
	staged, err := w.Stage()
	if err != nil {
		return Result{}, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(staged)
		}
	}()
	policy, err := tierPolicy(parent)
	if err != nil {
		return Result{}, err
	}
	files, sc, st, err := write(ctx, staged, r, opt.BatchRows, policy, opt.Yield)
	if err != nil {
		return Result{}, err
	}
	s := snapwrite.Snapshot{
		ID:         id,
		ParentID:   parent.SnapshotID,
		Dataset:    dir.Name,
		Created:    opt.Now(),
		Tool:       opt.Tool,
		Data:       sc.data,
		Index:      sc.index,
		Attributes: parent.Schema.Attributes,
		Stats:      manifest.Stats{Rows: st.rows, Series: st.series},
		First:      st.first,
		Last:       st.last,
		Tiers:      policy,
		// The build section carries the tier policy (hot_since, hot_rows,
		// format) on, so the next compaction applies it again.
		Build: parent.Build,
		// A compaction's inputs are its parent snapshot and the log.
		Lineage: manifest.Lineage{Kind: dataset.LineageCompaction, Source: fmt.Sprintf("snapshot %d + wal through %d", parent.SnapshotID, walPos),
			LakeSnapshotID: parent.Lineage.LakeSnapshotID, Inputs: []manifest.Input{}},
		WALPosition: walPos,
	}
	if sh := parent.Shard; sh != nil {
		// Still the same shard; its inputs are the parent, not the lake.
		s.Shard = &manifest.Shard{Index: sh.Index, Count: sh.Count, Hash: sh.Hash}
	}
	s.Build.BatchRows = opt.BatchRows
	m := s.Manifest()
	snapwrite.PlaceFiles(m, files)
	// The fast verify of the installed snapshot before the flip: a
	// compaction's rows came from the log as well as the base, and a
	// snapshot the nightly gate would reject must not become CURRENT.
	err = w.PublishChecked(staged, m, change, func(id uint64) error {
		rep, err := verify.Verify(dir.Dir, verify.Options{SnapshotID: id})
		if err != nil {
			return err
		}
		if !rep.OK {
			msgs := make([]string, 0, min(3, len(rep.Findings)))
			for _, f := range rep.Findings[:min(3, len(rep.Findings))] {
				msgs = append(msgs, f.String())
			}
			return fmt.Errorf("compaction: snapshot %d of %s does not verify (%d findings: %s); not published, CURRENT is unchanged", id, dir.Name, len(rep.Findings), strings.Join(msgs, "; "))
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	ok = true
	return Result{SnapshotID: id, ParentID: parent.SnapshotID, Rows: st.rows, Series: st.series, WALPosition: walPos, Duration: time.Since(t0)}, nil
}

// tierPolicy is the policy a compaction of parent applies: a tiered
// parent's (its manifest's build section, as the build recorded it), so
// the next snapshot is tiered the same way; none for an untiered parent,
// which stays untiered whatever its build section says.
func tierPolicy(parent *manifest.Manifest) (coldfile.Policy, error) {
	if _, tiered := parent.FileByRole(manifest.RoleCold); !tiered {
		return coldfile.Policy{}, nil
	}
	b := parent.Build
	p, err := coldfile.PolicyOf(b.HotSince, b.HotRows, b.DataFormat)
	if err != nil {
		return p, fmt.Errorf("snapshot %d: build section: %w", parent.SnapshotID, err)
	}
	if !p.Tiered() {
		return p, fmt.Errorf("snapshot %d has a cold file but its build section records no tier policy (hot_since, hot_rows or format vortex)", parent.SnapshotID)
	}
	return p, nil
}

type schemas struct{ data, index *arrow.Schema }

type stats struct {
	rows, series int64
	first, last  int32
}

// write streams every series of r into data.arrow and index.arrow in dir,
// and with a tier policy cold.vortex too, in one pass: each data batch
// carries what the index needs of its series (id, attributes, latest
// value) to the writing goroutine, which writes the batch, takes the
// locations the sink recorded for it and adds its series to the index.
// Nothing is kept per series of the snapshot on the Go heap: the index
// writer's columns are mapped files (index.Writer), and the ids and
// attributes are asked of r a chunk at a time (dictChunk), so what a
// compaction holds follows the delta and the batch size, not the base.
func write(ctx context.Context, dir string, r query.Reader, batchRows int, policy coldfile.Policy, yield func()) ([]manifest.File, schemas, stats, error) {
	var st stats
	mem := memory.DefaultAllocator
	// An untiered compaction's data batches take their column buffers
	// (a few MiB each at 1M rows) from the ones the writer released with
	// the batch before: without it every batch leaves its buffers to the
	// collector, and the heap's free but unreturned spans grow with the
	// number of batches, that is with the base. A tiered one does not:
	// the cold writer may keep slices of a batch past its release.
	var batchMem memory.Allocator = &bufpool.Kept{Keep: 16}
	if policy.Tiered() {
		batchMem = mem
	}
	sh := r.Shape()
	dataSchema, attrFields := sh.DataSchema(), sh.AttributeFields()
	sel, err := r.Select(query.Selector{Kind: query.ByPrefix})
	if err != nil {
		return nil, schemas{}, st, err
	}
	plain := make([]arrow.Field, len(attrFields))
	for i, f := range attrFields {
		t := f.Type
		if d, ok := t.(*arrow.DictionaryType); ok {
			t = d.ValueType
		}
		plain[i] = arrow.Field{Name: f.Name, Type: t, Nullable: true}
	}
	dw, err := snapwrite.NewSink(dir, dataSchema, policy)
	if err != nil {
		return nil, schemas{}, st, err
	}
	defer dw.Abort()
	xw, err := index.NewWriter(filepath.Join(dir, "index.arrow"), dataSchema.Field(datafile.ColumnValue).Type, plain)
	if err != nil {
		return nil, schemas{}, st, err
	}
	defer xw.Abort()
	dw.SetupIndex(xw)
	xw.Reserve(sel.Len())

	// The data file and the index are written on a goroutine of their own,
	// one batch behind the merge (as the external builder's data file is):
	// encoding, checksumming and the write syscalls overlap the next
	// batch's merge and assembly.
	st.first, st.last = math.MaxInt32, math.MinInt32
	ix := index.Series{Attrs: make([]index.Cell, len(plain))}
	pipe := snapwrite.NewPipe(ctx, func(rec arrow.RecordBatch) error {
		b := rec.(*indexedBatch)
		if err := dw.Write(b.RecordBatch); err != nil {
			return err
		}
		i := 0
		err := dw.Drain(func(loc datafile.Location, cold index.Cold) error {
			if i == len(b.series) {
				return fmt.Errorf("compaction: the data writer recorded more series than the %d of batch %d", len(b.series), b.n)
			}
			b.series[i].fill(&ix, loc, cold)
			i++
			if err := xw.Add(&ix); err != nil {
				return err
			}
			st.add(loc, cold)
			return nil
		})
		if err == nil && i != len(b.series) {
			err = fmt.Errorf("compaction: the data writer recorded %d series of the %d of batch %d", i, len(b.series), b.n)
		}
		return err
	})

	var (
		pending   []query.Piece
		pendCodes []uint32
		pendRows  int64
		series    []pendingSeries // of the batch being assembled
		holds     []*dictArrays   // the chunks they refer to, retained
		batches   int
		code      uint32
	)
	flush := func() error {
		if pendRows == 0 {
			return nil
		}
		rec, err := assemble(batchMem, dataSchema, pending, pendCodes, pendRows)
		if err != nil {
			return err
		}
		b := &indexedBatch{RecordBatch: rec, series: series, holds: holds, n: batches}
		batches++
		pending, pendCodes, pendRows = pending[:0], pendCodes[:0], 0
		// The batch owns them now; the next batch's series likely number
		// about as many.
		series, holds = make([]pendingSeries, 0, cap(series)), nil
		if yield != nil {
			yield()
		}
		return pipe.Send(b)
	}
	chunk := dictChunk{r: r, sel: sel, attrs: len(plain)}
	defer chunk.release()
	defer func() { // a batch never sent
		for _, h := range holds {
			h.release()
		}
	}()
	// The series come in id order: a composite's delta runs are walked
	// with cursors rather than searched once per series (a fifth of a
	// compaction's CPU at 2.82M series).
	rows := r.Rows
	if c, ok := r.(*query.Composite); ok {
		rows = c.Walk().Rows
	}
	var buf []query.Piece
	for k := 0; k < sel.Len(); k++ {
		if err := pipe.Context().Err(); err != nil {
			return nil, schemas{}, stats{}, pipe.Close(err)
		}
		c := sel.Code(k)
		if buf, err = rows(c, query.AllPeriods, buf[:0]); err != nil {
			return nil, schemas{}, stats{}, pipe.Close(err)
		}
		var n int64
		for _, p := range buf {
			n += p.Len()
		}
		if n == 0 {
			continue // every row of the series was... never: a series has rows
		}
		if pendRows > 0 && pendRows+n > int64(batchRows) {
			if err := flush(); err != nil {
				return nil, schemas{}, stats{}, pipe.Close(err)
			}
		}
		d, err := chunk.at(ctx, mem, k)
		if err != nil {
			return nil, schemas{}, stats{}, pipe.Close(err)
		}
		if len(holds) == 0 || holds[len(holds)-1] != d {
			d.retain()
			holds = append(holds, d)
		}
		ps := pendingSeries{d: d, row: k - d.lo}
		// The latest row from the rows just read (Reader.LatestRow would
		// find the series in every delta run again: a third of a
		// compaction's CPU).
		if lr, ok := query.LastValid(buf); ok {
			ps.latest, ps.latestRow = lr.Rec, int(lr.Lo)
		}
		series = append(series, ps)
		pending = append(pending, buf...)
		for range buf {
			pendCodes = append(pendCodes, code)
		}
		pendRows += n
		code++
	}
	if err := pipe.Close(flush()); err != nil {
		return nil, schemas{}, st, err
	}
	files, err := dw.Close()
	if err != nil {
		return nil, schemas{}, st, err
	}
	xinfo, xschema, err := xw.Close()
	if err != nil {
		return nil, schemas{}, st, err
	}
	return append(files, manifest.File{Path: "index.arrow", Role: manifest.RoleIndex, Format: manifest.FormatArrowIPCFile,
		Size: xinfo.Size, Rows: xinfo.Rows, Batches: xinfo.Batches, Checksum: xinfo.Checksum}), schemas{dataSchema, xschema}, st, nil
}

// add counts one written series.
func (st *stats) add(loc datafile.Location, cold index.Cold) {
	first, last := loc.FirstPeriod, loc.LastPeriod
	if cold.Rows > 0 {
		first = cold.FirstPeriod
	}
	if loc.RowCount == 0 {
		last = cold.LastPeriod
	}
	st.rows += loc.RowCount + cold.Rows
	st.series++
	st.first, st.last = min(st.first, first), max(st.last, last)
}

// indexedBatch is a data batch on its way to the writing goroutine with
// what the index needs of each of its series, in code order; the chunks
// of ids and attributes they point into are retained until it is released.
type indexedBatch struct {
	arrow.RecordBatch
	series []pendingSeries
	holds  []*dictArrays
	n      int // the batch's number, for errors
}

func (b *indexedBatch) Release() {
	b.RecordBatch.Release()
	for _, h := range b.holds {
		h.release()
	}
	b.holds = nil
}

// pendingSeries is one series of an indexedBatch: its id and attributes
// are row row of d, its latest value row latestRow of latest (nil: every
// value is null).
type pendingSeries struct {
	d         *dictArrays
	row       int
	latest    arrow.RecordBatch
	latestRow int
}

// fill sets s to the series' index row at loc (and cold).
func (p *pendingSeries) fill(s *index.Series, loc datafile.Location, cold index.Cold) {
	s.ID = p.d.ids.Value(p.row)
	s.Location, s.Cold = loc, cold
	s.HasLatest = p.latest != nil
	s.LatestPeriod, s.LatestValue = 0, index.Cell{}
	if s.HasLatest {
		s.LatestPeriod = int32(p.latest.Column(datafile.ColumnPeriod).(*array.Date32).Value(p.latestRow))
		s.LatestValue = index.Cell{Array: p.latest.Column(datafile.ColumnValue), Row: p.latestRow}
	}
	for a := range s.Attrs {
		s.Attrs[a] = index.Cell{Array: p.d.vals[a], Row: p.row}
	}
}

// dictChunkSeries is how many series' ids and attributes a compaction
// holds at once (dictChunk); a variable for the tests, which cut chunks of
// one series.
var dictChunkSeries = 1 << 16

// dictChunk walks the ids and attribute values of a selection one chunk
// at a time, fetching each from the reader as the merge reaches it.
type dictChunk struct {
	r     query.Reader
	sel   query.Selection
	attrs int
	cur   *dictArrays
}

// dictArrays are the ids and attribute values of selection positions
// [lo, hi), reference counted: the walk holds the current chunk, and
// every batch on its way to the index writer the chunks its series are in.
type dictArrays struct {
	lo, hi int
	ids    *array.String
	vals   []arrow.Array
}

func (d *dictArrays) retain() {
	d.ids.Retain()
	for _, a := range d.vals {
		a.Retain()
	}
}

func (d *dictArrays) release() {
	d.ids.Release()
	for _, a := range d.vals {
		a.Release()
	}
}

// at returns the chunk holding selection position k, fetching it when k
// lies past the one held.
func (c *dictChunk) at(ctx context.Context, mem memory.Allocator, k int) (*dictArrays, error) {
	if c.cur != nil && k >= c.cur.lo && k < c.cur.hi {
		return c.cur, nil
	}
	c.release()
	lo, hi := k, min(k+dictChunkSeries, c.sel.Len())
	pos := make([]int, c.attrs)
	for i := range pos {
		pos[i] = i
	}
	ids, vals, err := c.r.Dictionaries(ctx, c.sel.Sub(lo, hi), pos, mem)
	if err != nil {
		return nil, err
	}
	c.cur = &dictArrays{lo: lo, hi: hi, ids: ids.(*array.String), vals: vals}
	return c.cur, nil
}

func (c *dictChunk) release() {
	if c.cur != nil {
		c.cur.release()
		c.cur = nil
	}
}

// assemble builds one data batch from pieces (each with its new series
// code): the series_code column is written anew, the others are the
// pieces' row ranges end to end (concatRanges).
func assemble(mem memory.Allocator, sc *arrow.Schema, pieces []query.Piece, codes []uint32, n int64) (arrow.RecordBatch, error) {
	// The codes column has no nulls: a bare values buffer, filled per
	// piece (a builder would set a validity bit a row).
	cbuf := memory.NewResizableBuffer(mem)
	cbuf.Resize(int(n) * arrow.Uint32SizeBytes)
	cv := arrow.Uint32Traits.CastFromBytes(cbuf.Bytes())
	at := 0
	for i, p := range pieces {
		fill := cv[at : at+int(p.Hi-p.Lo)]
		for j := range fill {
			fill[j] = codes[i]
		}
		at += len(fill)
	}
	cd := array.NewData(arrow.PrimitiveTypes.Uint32, int(n), []*memory.Buffer{nil, cbuf}, nil, 0, 0)
	cols := []arrow.Array{array.MakeFromData(cd)}
	cd.Release()
	cbuf.Release()
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	// Adjacent pieces of one batch (consecutive base series) are one slice.
	runs := make([]query.Piece, 0, len(pieces))
	for _, p := range pieces {
		if k := len(runs) - 1; k >= 0 && runs[k].Rec == p.Rec && runs[k].Hi == p.Lo {
			runs[k].Hi = p.Hi
			continue
		}
		runs = append(runs, p)
	}
	for c := datafile.ColumnPeriod; c < sc.NumFields(); c++ {
		a, err := concatRanges(mem, sc.Field(c).Type, c, runs, n)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", sc.Field(c).Name, err)
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(sc, cols, n), nil
}

// concatRanges is column c of runs (row ranges of records) end to end, n
// rows in all. A fixed-width column is copied range by range, its validity
// bitmap too where a source has one: a compaction's batches are made of
// hundreds of short ranges, and a slice plus array.Concatenate costs two
// array headers a range. Other types (strings, booleans, dictionaries)
// concatenate through arrow.
func concatRanges(mem memory.Allocator, t arrow.DataType, c int, runs []query.Piece, n int64) (arrow.Array, error) {
	fw, ok := t.(arrow.FixedWidthDataType)
	// (a dictionary's indices are fixed-width too, but each record's refer
	// to its own dictionary: arrow unifies them)
	if !ok || fw.BitWidth()%8 != 0 || t.ID() == arrow.BOOL || t.ID() == arrow.DICTIONARY || t.ID() == arrow.EXTENSION {
		parts := make([]arrow.Array, len(runs))
		for i, p := range runs {
			parts[i] = array.NewSlice(p.Rec.Column(c), p.Lo, p.Hi)
		}
		defer func() {
			for _, x := range parts {
				x.Release()
			}
		}()
		return array.Concatenate(parts, mem)
	}
	width := int64(fw.BitWidth() / 8)
	vals := memory.NewResizableBuffer(mem)
	defer vals.Release()
	vals.Resize(int(n * width))
	out := vals.Bytes()
	var valid *memory.Buffer // made at the first range with nulls
	at := int64(0)
	for _, p := range runs {
		d := p.Rec.Column(c).Data()
		if !arrow.TypeEqual(d.DataType(), t) {
			return nil, fmt.Errorf("type %s, want %s", d.DataType(), t)
		}
		off, k := int64(d.Offset())+p.Lo, p.Hi-p.Lo
		if k == 0 {
			continue
		}
		copy(out[at*width:(at+k)*width], d.Buffers()[1].Bytes()[off*width:(off+k)*width])
		bm := d.Buffers()[0]
		if valid == nil && bm != nil && d.NullN() != 0 && // (a slice's count may be unknown: -1)
			bitutil.CountSetBits(bm.Bytes(), int(off), int(k)) < int(k) {
			valid = memory.NewResizableBuffer(mem)
			valid.Resize(int(bitutil.BytesForBits(n)))
			bitutil.SetBitsTo(valid.Bytes(), 0, at, true) // the ranges before had none
		}
		if valid != nil {
			if bm != nil {
				bitutil.CopyBitmap(bm.Bytes(), int(off), int(k), valid.Bytes(), int(at))
			} else {
				bitutil.SetBitsTo(valid.Bytes(), at, k, true)
			}
		}
		at += k
	}
	nulls := 0
	if valid != nil {
		defer valid.Release()
		nulls = int(n) - bitutil.CountSetBits(valid.Bytes(), 0, int(n))
	}
	d := array.NewData(t, int(n), []*memory.Buffer{valid, vals}, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d), nil
}
