package sortwrite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/progress"
	"github.com/energyscope/servingsnap/pkg/snapwrite"
)

// span is one series in output order: output positions [start, end).
type span struct {
	id         string
	start, end int
	latest     uint32 // input row of the last non-null value, or noRow
}

// layout is where every row goes: the output order, the series and batch
// boundaries, and which columns are per-series attributes.
type layout struct {
	ord     *order   // output order, duplicates removed
	series  []span   // in output order; the index row number is the series code
	batches [][2]int // [first series, end series) per data batch
	isAttr  []bool   // per t.others: constant within every series
	dropped int64
	// otherShards counts the rows of series of other shards, left out of
	// a sharded build.
	otherShards int64
	minPeriod   int32
	maxPeriod   int32
}

func (l *layout) rows() int { return l.ord.len() }

func (l *layout) attrNames(t *table) []string {
	names := []string{}
	for i, s := range t.others {
		if l.isAttr[i] {
			names = append(names, s.col.Name)
		}
	}
	return names
}

// layout sorts the rows and derives everything the writers need.
func (t *table) layout(ctx context.Context, opt Options) (*layout, error) {
	ids := t.series.dict.values
	l := &layout{isAttr: make([]bool, len(t.others))}

	// Attribute detection reads the input columns in input order and
	// needs no ranks, so it starts first and runs beside the ranking of
	// the ids (one core) and the sort: one column at a time, the sort
	// having the other workers.
	attrs := make(chan struct{})
	go func() {
		defer close(attrs)
		var firstRow []uint32
		for i, st := range t.others {
			if st.att != nil && st.att.decided { // checked while read
				l.isAttr[i] = true
				continue
			}
			if firstRow == nil {
				firstRow = t.firstRowPerCode()
			}
			l.isAttr[i] = st.constantPerSeries(t.series.codes, firstRow)
		}
	}()

	byID := make([]uint32, len(ids))
	for i := range byID {
		byID[i] = uint32(i)
	}
	slices.SortFunc(byID, func(a, b uint32) int { return strings.Compare(ids[a], ids[b]) })
	rank := make([]uint32, len(ids))
	for r, c := range byID {
		rank[c] = uint32(r)
	}
	n := len(t.series.codes)
	// No scratch of n keys: the sort packs the keys straight into their
	// buckets and sorts each bucket with a scratch of its own size.
	l.ord = sortRowsOn(rank, t.series.codes, t.periods, bigSlice[uint64](t.mem, n), nil, max(opt.Parallel, 1))
	<-attrs

	// Duplicates are adjacent after the sort, in input order; "last" keeps
	// the later one. Series boundaries fall where the rank changes.
	o := l.ord
	var err error
	l.series, l.dropped, l.otherShards, err = t.cutSeries(o, opt, ids, byID, keepRanks(opt.Shard, ids, byID), opt.Parallel)
	if err != nil {
		return nil, err
	}
	l.minPeriod, l.maxPeriod = t.latestAndBounds(o, l.series, opt.Parallel)

	// Batches: greedy, cut only between series.
	bs, rows := 0, 0
	for i, s := range l.series {
		n := s.end - s.start
		if rows > 0 && rows+n > opt.BatchRows {
			l.batches = append(l.batches, [2]int{bs, i})
			bs, rows = i, 0
		}
		rows += n
	}
	if len(l.series) > 0 {
		l.batches = append(l.batches, [2]int{bs, len(l.series)})
	}
	return l, nil
}

// firstRowPerCode returns, per series dictionary code, the first input row
// of that series (noRow for codes no row uses).
func (t *table) firstRowPerCode() []uint32 {
	first := make([]uint32, len(t.series.dict.values))
	for i := range first {
		first[i] = noRow
	}
	for r, c := range t.series.codes {
		if first[c] == noRow {
			first[c] = uint32(r)
		}
	}
	return first
}

// constantPerSeries reports whether every series has one value (or only
// nulls) in the column: each row is compared with its series' first value,
// walking the rows in input order. The first values are copied into a table
// indexed by series code, small enough to stay in cache.
func (st *store) constantPerSeries(series []uint32, firstRow []uint32) bool {
	switch st.kind {
	case kindNull:
		return true
	case kindString:
		return sameAsFirst(st.codes, series, firstRow)
	}
	if !sameAsFirst(st.valid, series, firstRow) {
		return false
	}
	switch st.width {
	case 1:
		return sameAsFirst(st.data, series, firstRow)
	case 2:
		return sameAsFirst(asSlice[uint16](st.data), series, firstRow)
	case 4:
		return sameAsFirst(asSlice[uint32](st.data), series, firstRow)
	case 8:
		return sameAsFirst(asSlice[uint64](st.data), series, firstRow)
	}
	for r, c := range series {
		if f := firstRow[c]; f != uint32(r) && !st.equalRows(int(f), r) {
			return false
		}
	}
	return true
}

// sameAsFirst reports whether vals[r] equals the value at its series' first
// row for every row r. Null slots hold zero bytes (the validity column is
// compared separately), so comparing raw values is exact.
func sameAsFirst[T comparable](vals []T, series []uint32, firstRow []uint32) bool {
	first := make([]T, len(firstRow))
	for c, r := range firstRow {
		if r != noRow {
			first[c] = vals[r]
		}
	}
	for r, c := range series {
		if vals[r] != first[c] {
			return false
		}
	}
	return true
}

type schemas struct{ data, index *arrow.Schema }

// write writes data.arrow and index.arrow into dir and describes them.
func (t *table) write(ctx context.Context, dir string, l *layout, opt Options, ph progress.Phase) ([]manifest.File, schemas, error) {
	var extra, attrs []arrow.Field
	var extraStores, attrStores []*store
	for i, st := range t.others {
		f := arrow.Field{Name: st.col.Name, Type: st.col.Type, Nullable: true}
		if l.isAttr[i] {
			attrs, attrStores = append(attrs, f), append(attrStores, st)
		} else {
			extra, extraStores = append(extra, f), append(extraStores, st)
		}
	}
	var sc schemas
	sc.data = datafile.Schema(t.value.col.Type, extra)
	dw, err := snapwrite.NewSink(dir, sc.data, opt.Tiers)
	if err != nil {
		return nil, sc, err
	}
	defer dw.Abort()
	// The index's columns (each series' latest value and attributes)
	// depend only on the layout, so they are gathered beside the data
	// write rather than after it.
	type gatheredIndex struct {
		cols []arrow.Array
		err  error
	}
	idx := make(chan gatheredIndex, 1)
	go func() {
		cols, err := t.indexColumns(l, attrStores)
		idx <- gatheredIndex{cols, err}
	}()
	werr := t.writeData(ctx, dw, l, sc.data, extraStores, opt.Parallel, !opt.Tiers.Tiered(), ph)
	g := <-idx
	defer func() {
		for _, c := range g.cols {
			c.Release()
		}
	}()
	if err := errors.Join(werr, g.err); err != nil {
		return nil, sc, err
	}
	// Every batch is written, so the sink knows where each series went:
	// the index is written and fsynced while the data file's footer is
	// written and fsynced, instead of after it. Both are done before
	// write returns, so the publish (fsync of the tree, manifest last)
	// sees only complete files, as before.
	xw, locs, err := newIndexWriter(filepath.Join(dir, "index.arrow"), t.value.col.Type, attrs, dw, len(l.series))
	if err != nil {
		return nil, sc, err
	}
	type closed struct {
		files []manifest.File
		err   error
	}
	dataDone := make(chan closed, 1)
	go func() {
		files, err := dw.Close()
		dataDone <- closed{files, err}
	}()
	xinfo, xerr := t.writeIndex(xw, locs, l, g.cols, dw, &sc)
	d := <-dataDone
	if err := errors.Join(d.err, xerr); err != nil {
		return nil, sc, err
	}
	return append(d.files, manifest.File{Path: "index.arrow", Role: manifest.RoleIndex, Format: manifest.FormatArrowIPCFile,
		Size: xinfo.Size, Rows: xinfo.Rows, Batches: xinfo.Batches, Checksum: xinfo.Checksum}), sc, nil
}

// indexColumns gathers, as arrays with one row per series, the index's
// latest values (the value at each series' latest non-null row) and each
// attribute (read at the series' first row). The caller releases them.
func (t *table) indexColumns(l *layout, attrStores []*store) ([]arrow.Array, error) {
	n := len(l.series)
	firstRows := make([]uint32, n)
	latestRows := make([]uint32, n)
	for i, s := range l.series {
		firstRows[i], latestRows[i] = l.ord.row(s.start), s.latest
	}
	var cols []arrow.Array
	for i, st := range append([]*store{t.value}, attrStores...) {
		rows := firstRows
		if i == 0 {
			rows = latestRows
		}
		a, err := st.gather(rows)
		if err != nil {
			for _, c := range cols {
				c.Release()
			}
			return nil, err
		}
		cols = append(cols, a)
	}
	return cols, nil
}

// writeIndex feeds the index writer xw one series at a time: locations
// as the data writer recorded them (locs), the latest value and the
// attributes from cols (indexColumns). It sets sc.index to the schema
// written.
func (t *table) writeIndex(xw *index.Writer, locs []datafile.Location, l *layout, cols []arrow.Array, sink *snapwrite.Sink, sc *schemas) (arrowfile.Info, error) {
	return addSeries(xw, len(l.series), cols[0], cols[1:], sc, sink, func(i int, s *index.Series) {
		sp := l.series[i]
		s.ID, s.Location, s.HasLatest = sp.id, locs[i], sp.latest != noRow
		if s.HasLatest {
			s.LatestPeriod = t.periods[sp.latest]
		}
	})
}

// newIndexWriter starts the index of the n series sink wrote (a tiered
// sink's needs version 3) and returns where each series' hot rows went.
// Both build paths start their index here.
func newIndexWriter(path string, valueType arrow.DataType, attrs []arrow.Field, sink *snapwrite.Sink, n int) (*index.Writer, []datafile.Location, error) {
	locs := sink.Locations()
	if len(locs) != n {
		return nil, nil, fmt.Errorf("the data file has %d series, the index %d", len(locs), n)
	}
	xw, err := index.NewWriter(path, valueType, attrs)
	if err != nil {
		return nil, nil, err
	}
	sink.SetupIndex(xw)
	xw.Reserve(n)
	return xw, locs, nil
}

// addSeries writes n series to the index writer and closes it, recording
// the index schema in sc: series i's latest value and attributes are row i
// of latest and attrCols; at sets its id, location and latest period; the
// sink says where its cold rows went, if anywhere. Both build paths (in
// memory, external) end here.
func addSeries(xw *index.Writer, n int, latest arrow.Array, attrCols []arrow.Array, sc *schemas, sink *snapwrite.Sink, at func(i int, s *index.Series)) (arrowfile.Info, error) {
	defer xw.Abort() // (after Close, nothing to do)
	s := index.Series{Attrs: make([]index.Cell, len(attrCols))}
	for i := range n {
		s.LatestPeriod = 0
		at(i, &s)
		s.Cold = sink.ColdAt(i)
		s.LatestValue = index.Cell{Array: latest, Row: i}
		for k, a := range attrCols {
			s.Attrs[k] = index.Cell{Array: a, Row: i}
		}
		if err := xw.Add(&s); err != nil {
			return arrowfile.Info{}, err
		}
	}
	info, schema, err := xw.Close()
	if err != nil {
		return arrowfile.Info{}, err
	}
	sc.index = schema
	return info, nil
}

func uint32Array(v []uint32) arrow.Array {
	return fromBuffer(arrow.PrimitiveTypes.Uint32, len(v), arrow.Uint32Traits.CastToBytes(v))
}

func date32Array(v []int32) arrow.Array {
	return fromBuffer(arrow.FixedWidthTypes.Date32, len(v), arrow.Int32Traits.CastToBytes(v))
}

// fromBuffer wraps a no-null fixed-width buffer as an array without a copy.
func fromBuffer(dt arrow.DataType, n int, data []byte) arrow.Array {
	d := array.NewData(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(data)}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// writeData gathers the data file batch by batch and writes each through
// dw, which checks it and records where every series went. Gathering batch
// k+1 overlaps with writing batch k: the gather is random access into the
// input columns, the write is a check and a copy into the page cache, and
// the two together would otherwise leave a core idle.
func (t *table) writeData(ctx context.Context, dw *snapwrite.Sink, l *layout, schema *arrow.Schema, extra []*store, workers int, recycle bool, ph progress.Phase) error {
	// Batches are gathered by up to workers goroutines at once (gathering
	// is random reads of the input columns, the larger part of this phase)
	// and written in order as they come. futs carries one result channel
	// per batch, in batch order; it and the gathering bound the batches in
	// memory to about 2×workers.
	workers = max(workers, 1)
	type gathered struct {
		rec arrow.RecordBatch
		err error
	}
	futs := make(chan chan gathered, workers)
	done := make(chan struct{})
	// The batches' buffers are recycled once written (see slab), but not
	// into a tiered sink: its splitter may keep slices of a batch for the
	// cold file.
	var pool *slab
	if recycle {
		pool = &slab{}
	}
	go func() {
		defer close(futs)
		sem := make(chan struct{}, workers)
		for b := range l.batches {
			select {
			case sem <- struct{}{}:
			case <-done:
				return
			}
			f := make(chan gathered, 1)
			select {
			case futs <- f:
			case <-done:
				<-sem
				return
			}
			go func() {
				rec, err := t.gatherBatch(l, b, schema, extra, pool)
				<-sem
				f <- gathered{rec, err}
			}()
		}
	}()
	var werr error
	stop := func(err error) {
		if werr == nil {
			werr = err
			close(done)
		}
	}
	for f := range futs {
		g := <-f
		if g.err != nil {
			stop(g.err)
			continue
		}
		if werr == nil {
			err := ctx.Err()
			if err == nil {
				err = dw.Write(g.rec)
			}
			if err != nil {
				stop(err)
			}
			ph.Add(g.rec.NumRows(), 0)
		}
		bufs := pool.buffersOf(g.rec) // before the release, which drops the columns
		g.rec.Release()
		pool.put(bufs...)
	}
	return werr
}

// gatherBatch builds data record batch b.
// Its buffers come from p (nil: new ones).
func (t *table) gatherBatch(l *layout, b int, schema *arrow.Schema, extra []*store, p *slab) (arrow.RecordBatch, error) {
	o := l.ord
	bnd := l.batches[b]
	rs, re := l.series[bnd[0]].start, l.series[bnd[1]-1].end
	rowBuf := p.get((re - rs) * 4)
	defer p.put(rowBuf)
	rows := asSlice[uint32](rowBuf)
	periods := asSlice[int32](p.get((re - rs) * 4))
	for j := rs; j < re; j++ {
		rows[j-rs], periods[j-rs] = o.row(j), o.period(j)
	}
	codes := asSlice[uint32](p.get(len(rows) * 4))
	for si := bnd[0]; si < bnd[1]; si++ {
		s := l.series[si]
		for j := s.start; j < s.end; j++ {
			codes[j-rs] = uint32(si)
		}
	}
	cols := make([]arrow.Array, datafile.NumFixed, datafile.NumFixed+len(extra))
	cols[datafile.ColumnSeriesCode] = uint32Array(codes)
	cols[datafile.ColumnPeriod] = date32Array(periods)
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var err error
	if cols[datafile.ColumnValue], err = t.value.gatherFrom(rows, p); err != nil {
		return nil, err
	}
	for _, st := range extra {
		a, err := st.gatherFrom(rows, p)
		if err != nil {
			return nil, err
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(schema, cols, int64(len(rows))), nil
}
