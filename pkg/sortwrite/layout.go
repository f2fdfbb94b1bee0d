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
	"golang.org/x/sync/errgroup"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/sidecar"
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
	ord       *order   // output order, duplicates removed
	series    []span   // in output order; the index row number is the series code
	batches   [][2]int // [first series, end series) per data batch
	isAttr    []bool   // per t.others: constant within every series
	dropped   int64
	minPeriod int32
	maxPeriod int32
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
	byID := make([]uint32, len(ids))
	for i := range byID {
		byID[i] = uint32(i)
	}
	slices.SortFunc(byID, func(a, b uint32) int { return strings.Compare(ids[a], ids[b]) })
	rank := make([]uint32, len(ids))
	for r, c := range byID {
		rank[c] = uint32(r)
	}

	// Attribute detection reads the input columns in input order, so it
	// runs beside the sort instead of after it.
	l := &layout{isAttr: make([]bool, len(t.others))}
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(max(opt.Parallel, 1))
	g.Go(func() error {
		l.ord = sortRows(rank, t.series.codes, t.periods)
		return nil
	})
	firstRow := t.firstRowPerCode()
	for i, st := range t.others {
		g.Go(func() error {
			l.isAttr[i] = st.constantPerSeries(t.series.codes, firstRow)
			return nil
		})
	}
	g.Wait()

	// Duplicates are adjacent after the sort, in input order; "last" keeps
	// the later one. Series boundaries fall where the rank changes.
	o := l.ord
	n := o.len()
	w := 0
	for j := 0; j < n; j++ {
		if w > 0 && o.key(w-1) == o.key(j) {
			if opt.OnDuplicate == OnDuplicateError {
				prev, row := o.row(w-1), o.row(j)
				return nil, fmt.Errorf("duplicate key (%s %q, %s %s): %s and %s; pass --on-duplicate=last to keep the later row",
					opt.SeriesColumn, ids[t.series.codes[row]], opt.PeriodColumn, period.Format(o.period(j)),
					t.location(int64(prev)), t.location(int64(row)))
			}
			o.move(w-1, j)
			l.dropped++
			continue
		}
		if w == 0 || o.rank(w-1) != o.rank(j) {
			if k := len(l.series); k > 0 {
				l.series[k-1].end = w
			}
			l.series = append(l.series, span{id: ids[byID[o.rank(j)]], start: w})
		}
		o.move(w, j)
		w++
	}
	if k := len(l.series); k > 0 {
		l.series[k-1].end = w
	}
	o.truncate(w)

	for i := range l.series {
		s := &l.series[i]
		s.latest = noRow
		for j := s.end - 1; j >= s.start; j-- {
			if r := o.row(j); !t.value.isNull(int(r)) {
				s.latest = r
				break
			}
		}
		first, last := o.period(s.start), o.period(s.end-1)
		if i == 0 || first < l.minPeriod {
			l.minPeriod = first
		}
		if i == 0 || last > l.maxPeriod {
			l.maxPeriod = last
		}
	}

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
func (t *table) write(dir string, l *layout, opt Options) ([]manifest.File, schemas, error) {
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
	sc := schemas{
		data:  datafile.Schema(t.value.col.Type, extra),
		index: sidecar.Schema(t.value.col.Type, attrs),
	}

	batchOf := make([]uint32, len(l.series))
	offsetIn := make([]uint32, len(l.series))
	dinfo, err := t.writeData(filepath.Join(dir, "data.arrow"), l, sc.data, extraStores, batchOf, offsetIn)
	if err != nil {
		return nil, sc, err
	}

	// Index: one batch, one row per series.
	o := l.ord
	n := len(l.series)
	idb := array.NewStringBuilder(memory.DefaultAllocator)
	rowOffset := make([]int64, n)
	rowCount := make([]int64, n)
	firstP := make([]int32, n)
	lastP := make([]int32, n)
	latestP := make([]int32, n)
	latestOK := make([]bool, n)
	firstRows := make([]uint32, n)
	latestRows := make([]uint32, n)
	for i, s := range l.series {
		idb.Append(s.id)
		rowOffset[i], rowCount[i] = int64(s.start), int64(s.end-s.start)
		firstP[i], lastP[i] = o.period(s.start), o.period(s.end-1)
		firstRows[i], latestRows[i] = o.row(s.start), s.latest
		if s.latest != noRow {
			latestP[i], latestOK[i] = t.periods[s.latest], true
		}
	}
	latestPeriod := buildDate32(latestP, latestOK)
	cols := []arrow.Array{
		idb.NewArray(),
		int64Array(rowOffset),
		int64Array(rowCount),
		uint32Array(batchOf),
		uint32Array(offsetIn),
		date32Array(firstP),
		date32Array(lastP),
		latestPeriod,
	}
	lv, err := t.value.gather(latestRows)
	if err != nil {
		return nil, sc, err
	}
	cols = append(cols, lv)
	for i, st := range attrStores {
		a, dt, ok, err := st.gatherDictionary(firstRows)
		if err == nil && !ok {
			a, err = st.gather(firstRows)
		}
		if err != nil {
			return nil, sc, err
		}
		if ok {
			attrs[i].Type = dt
		}
		cols = append(cols, a)
	}
	sc.index = sidecar.Schema(t.value.col.Type, attrs)
	rec := array.NewRecordBatch(sc.index, cols, int64(n))
	defer rec.Release()
	for _, c := range cols {
		c.Release()
	}
	xw, err := arrowfile.Create(filepath.Join(dir, "index.arrow"), sc.index, arrowfile.AllowDictionaries)
	if err != nil {
		return nil, sc, err
	}
	if err := xw.Write(rec); err != nil {
		xw.Abort()
		return nil, sc, err
	}
	xinfo, err := xw.Close()
	if err != nil {
		return nil, sc, err
	}
	return []manifest.File{
		{Path: "data.arrow", Role: manifest.RoleData, Tier: manifest.TierHot, Format: manifest.FormatArrowIPCFile,
			Size: dinfo.Size, Rows: dinfo.Rows, Batches: dinfo.Batches, Checksum: dinfo.Checksum},
		{Path: "index.arrow", Role: manifest.RoleIndex, Format: manifest.FormatArrowIPCFile,
			Size: xinfo.Size, Rows: xinfo.Rows, Batches: xinfo.Batches, Checksum: xinfo.Checksum},
	}, sc, nil
}

func int64Array(v []int64) arrow.Array {
	return fromBuffer(arrow.PrimitiveTypes.Int64, len(v), arrow.Int64Traits.CastToBytes(v))
}

func uint32Array(v []uint32) arrow.Array {
	return fromBuffer(arrow.PrimitiveTypes.Uint32, len(v), arrow.Uint32Traits.CastToBytes(v))
}

func date32Array(v []int32) arrow.Array {
	return fromBuffer(arrow.FixedWidthTypes.Date32, len(v), arrow.Int32Traits.CastToBytes(v))
}

func buildDate32(v []int32, ok []bool) arrow.Array {
	b := array.NewDate32Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(len(v))
	for i := range v {
		if ok[i] {
			b.UnsafeAppend(arrow.Date32(v[i]))
		} else {
			b.UnsafeAppendBoolToBitmap(false)
		}
	}
	return b.NewArray()
}

// fromBuffer wraps a no-null fixed-width buffer as an array without a copy.
func fromBuffer(dt arrow.DataType, n int, data []byte) arrow.Array {
	d := array.NewData(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(data)}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// writeData writes the data file batch by batch, and records per series
// the batch holding it and its offset there (batchOf, offsetIn). Gathering
// batch k+1 overlaps with writing batch k: the gather is random access into
// the input columns, the write is a copy into the page cache, and the two
// together would otherwise leave a core idle.
func (t *table) writeData(path string, l *layout, schema *arrow.Schema, extra []*store, batchOf, offsetIn []uint32) (arrowfile.Info, error) {
	dw, err := arrowfile.Create(path, schema)
	if err != nil {
		return arrowfile.Info{}, err
	}
	recs := make(chan arrow.RecordBatch, 1)
	done := make(chan struct{})
	var gatherErr error
	go func() {
		defer close(recs)
		for b := range l.batches {
			rec, err := t.gatherBatch(l, b, schema, extra, batchOf, offsetIn)
			if err != nil {
				gatherErr = err
				return
			}
			select {
			case recs <- rec:
			case <-done:
				rec.Release()
				return
			}
		}
	}()
	var werr error
	for rec := range recs {
		if werr == nil {
			werr = dw.Write(rec)
			if werr != nil {
				close(done)
			}
		}
		rec.Release()
	}
	if err := errors.Join(gatherErr, werr); err != nil {
		dw.Abort()
		return arrowfile.Info{}, err
	}
	return dw.Close()
}

// gatherBatch builds data record batch b.
func (t *table) gatherBatch(l *layout, b int, schema *arrow.Schema, extra []*store, batchOf, offsetIn []uint32) (arrow.RecordBatch, error) {
	o := l.ord
	bnd := l.batches[b]
	rs, re := l.series[bnd[0]].start, l.series[bnd[1]-1].end
	rows := make([]uint32, re-rs)
	periods := make([]int32, re-rs)
	for j := rs; j < re; j++ {
		rows[j-rs], periods[j-rs] = o.row(j), o.period(j)
	}
	codes := make([]uint32, len(rows))
	for si := bnd[0]; si < bnd[1]; si++ {
		s := l.series[si]
		batchOf[si], offsetIn[si] = uint32(b), uint32(s.start-rs)
		for j := s.start; j < s.end; j++ {
			codes[j-rs] = uint32(si)
		}
	}
	cols := []arrow.Array{uint32Array(codes), date32Array(periods)}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, st := range append([]*store{t.value}, extra...) {
		a, err := st.gather(rows)
		if err != nil {
			return nil, err
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(schema, cols, int64(len(rows))), nil
}
