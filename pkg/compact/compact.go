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

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/sidecar"
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
// and with a tier policy cold.vortex too.
func write(ctx context.Context, dir string, r query.Reader, batchRows int, policy coldfile.Policy, yield func()) ([]manifest.File, schemas, stats, error) {
	var st stats
	mem := memory.DefaultAllocator
	sh := r.Shape()
	dataSchema, attrFields := sh.DataSchema(), sh.AttributeFields()
	dw, err := snapwrite.NewSink(dir, dataSchema, policy)
	if err != nil {
		return nil, schemas{}, st, err
	}
	defer dw.Abort()
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

	// Pass 1: the data file, batch by batch, cut at series boundaries.
	type latest struct {
		rec arrow.RecordBatch
		row int
	}
	latests := make([]latest, 0, sel.Len()) // per written series
	written := make([]int, 0, sel.Len())    // selection positions of the written series
	var pending []query.Piece
	var pendCodes []uint32
	var pendRows int64
	var code uint32
	// The data file is written on a goroutine of its own, one batch behind
	// the merge (as the external builder's is): encoding, checksumming and
	// the write syscalls overlap the next batch's merge and assembly.
	pipe := snapwrite.NewPipe(ctx, dw.Write)
	flush := func() error {
		if pendRows == 0 {
			return nil
		}
		rec, err := assemble(mem, dataSchema, pending, pendCodes, pendRows)
		if err != nil {
			return err
		}
		pending, pendCodes, pendRows = pending[:0], pendCodes[:0], 0
		if yield != nil {
			yield()
		}
		return pipe.Send(rec)
	}
	var buf []query.Piece
	for k := 0; k < sel.Len(); k++ {
		if err := pipe.Context().Err(); err != nil {
			return nil, schemas{}, st, pipe.Close(err)
		}
		c := sel.Code(k)
		if buf, err = r.Rows(c, query.AllPeriods, buf[:0]); err != nil {
			return nil, schemas{}, st, pipe.Close(err)
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
				return nil, schemas{}, st, pipe.Close(err)
			}
		}
		pending = append(pending, buf...)
		for range buf {
			pendCodes = append(pendCodes, code)
		}
		pendRows += n
		// The latest row from the rows just read (Reader.LatestRow would
		// find the series in every delta run again: a third of a
		// compaction's CPU).
		if lr, ok := query.LastValid(buf); ok {
			latests = append(latests, latest{lr.Rec, int(lr.Lo)})
		} else {
			latests = append(latests, latest{})
		}
		written = append(written, k)
		code++
	}
	if err := pipe.Close(flush()); err != nil {
		return nil, schemas{}, st, err
	}
	files, err := dw.Close()
	if err != nil {
		return nil, schemas{}, st, err
	}

	// Pass 2: the index, series by series, from the data writer's locations.
	xw, err := sidecar.NewWriter(filepath.Join(dir, "index.arrow"), dataSchema.Field(datafile.ColumnValue).Type, plain)
	if err != nil {
		return nil, schemas{}, st, err
	}
	dw.SetupIndex(xw)
	locs := dw.Locations()
	xw.Reserve(len(locs))
	// The ids and attributes are asked of r a chunk of the selection at a
	// time: a composite with series the base lacks builds them (the base
	// alone slices its mapped index), and the whole selection's at once
	// would cost memory that grows with the base, not with the delta.
	chunk := dictChunk{r: r, sel: sel, attrs: len(plain)}
	defer chunk.release()
	s := sidecar.Series{Attrs: make([]sidecar.Cell, len(plain))}
	st.first, st.last = math.MaxInt32, math.MinInt32
	for i, loc := range locs {
		idArr, attrVals, at, err := chunk.at(ctx, mem, written[i])
		if err != nil {
			return nil, schemas{}, st, err
		}
		k := written[i] - at
		s.ID = idArr.Value(k)
		s.Location = loc
		s.Cold = dw.ColdAt(i)
		s.HasLatest = latests[i].rec != nil
		s.LatestValue = sidecar.Cell{}
		if s.HasLatest {
			lr := latests[i]
			s.LatestPeriod = int32(lr.rec.Column(datafile.ColumnPeriod).(*array.Date32).Value(lr.row))
			s.LatestValue = sidecar.Cell{Array: lr.rec.Column(datafile.ColumnValue), Row: lr.row}
		}
		for a := range plain {
			s.Attrs[a] = sidecar.Cell{Array: attrVals[a], Row: k}
		}
		if err := xw.Add(&s); err != nil {
			return nil, schemas{}, st, err
		}
		first, last := loc.FirstPeriod, loc.LastPeriod
		if s.Cold.Rows > 0 {
			first = s.Cold.FirstPeriod
		}
		if loc.RowCount == 0 {
			last = s.Cold.LastPeriod
		}
		st.rows += loc.RowCount + s.Cold.Rows
		st.first, st.last = min(st.first, first), max(st.last, last)
	}
	st.series = int64(len(locs))
	xinfo, xschema, err := xw.Close()
	if err != nil {
		return nil, schemas{}, st, err
	}
	return append(files, manifest.File{Path: "index.arrow", Role: manifest.RoleIndex, Format: manifest.FormatArrowIPCFile,
		Size: xinfo.Size, Rows: xinfo.Rows, Batches: xinfo.Batches, Checksum: xinfo.Checksum}), schemas{dataSchema, xschema}, st, nil
}

// dictChunkSeries is how many series' ids and attributes a compaction
// holds at once (dictChunk); a variable for the tests, which cut chunks of
// one series.
var dictChunkSeries = 1 << 16

// dictChunk holds the ids and attribute values of one chunk of a
// selection, fetched from the reader as the index writer reaches it.
type dictChunk struct {
	r      query.Reader
	sel    query.Selection
	attrs  int
	lo, hi int // the selection positions held
	ids    *array.String
	vals   []arrow.Array
}

// at returns the chunk holding selection position k (fetching it when k
// lies past the one held) and the position of its first series.
func (c *dictChunk) at(ctx context.Context, mem memory.Allocator, k int) (*array.String, []arrow.Array, int, error) {
	if c.ids != nil && k >= c.lo && k < c.hi {
		return c.ids, c.vals, c.lo, nil
	}
	c.release()
	c.lo = k
	c.hi = min(k+dictChunkSeries, c.sel.Len())
	pos := make([]int, c.attrs)
	for i := range pos {
		pos[i] = i
	}
	ids, vals, err := c.r.Dictionaries(ctx, c.sel.Sub(c.lo, c.hi), pos, mem)
	if err != nil {
		return nil, nil, 0, err
	}
	c.ids, c.vals = ids.(*array.String), vals
	return c.ids, c.vals, c.lo, nil
}

func (c *dictChunk) release() {
	if c.ids != nil {
		c.ids.Release()
	}
	for _, a := range c.vals {
		a.Release()
	}
	c.ids, c.vals = nil, nil
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
