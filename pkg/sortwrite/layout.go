package sortwrite

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/sidecar"
)

// span is one series in output order: its rows are perm[start:end].
type span struct {
	id         string
	start, end int
	latest     uint32 // input row of the last non-null value, or noRow
}

// layout is where every row goes: the output order, the series and batch
// boundaries, and which columns are per-series attributes.
type layout struct {
	perm      []uint32 // input rows in output order, duplicates removed
	series    []span
	batches   [][2]int // [first series, end series) per data batch
	isAttr    []bool   // per t.others: constant within every series
	dropped   int64
	minPeriod int32
	maxPeriod int32
}

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
func (t *table) layout(opt Options) (*layout, error) {
	ids := t.series.dict.values
	order := make([]uint32, len(ids))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(ids[a], ids[b]) })
	rank := make([]uint32, len(ids))
	for r, c := range order {
		rank[c] = uint32(r)
	}
	codes := t.series.codes
	perm := sortKeys(rank, codes, t.periods)

	l := &layout{}
	// Duplicates are adjacent after the sort, in input order; "last" keeps
	// the later one. Series boundaries fall where the rank changes.
	w := 0
	for j := 0; j < len(perm); j++ {
		row := perm[j]
		if w > 0 {
			prev := perm[w-1]
			if codes[prev] == codes[row] && t.periods[prev] == t.periods[row] {
				if opt.OnDuplicate == OnDuplicateError {
					return nil, fmt.Errorf("duplicate key (%s %q, %s %s): %s and %s; pass --on-duplicate=last to keep the later row",
						opt.SeriesColumn, ids[codes[row]], opt.PeriodColumn, period.Format(t.periods[row]),
						t.location(int64(prev)), t.location(int64(row)))
				}
				perm[w-1] = row
				l.dropped++
				continue
			}
		}
		if w == 0 || codes[perm[w-1]] != codes[row] {
			if n := len(l.series); n > 0 {
				l.series[n-1].end = w
			}
			l.series = append(l.series, span{id: ids[codes[row]], start: w})
		}
		perm[w] = row
		w++
	}
	if n := len(l.series); n > 0 {
		l.series[n-1].end = w
	}
	l.perm = perm[:w]

	for i := range l.series {
		s := &l.series[i]
		s.latest = noRow
		for j := s.end - 1; j >= s.start; j-- {
			if !t.value.isNull(int(l.perm[j])) {
				s.latest = l.perm[j]
				break
			}
		}
		first, last := t.periods[l.perm[s.start]], t.periods[l.perm[s.end-1]]
		if i == 0 || first < l.minPeriod {
			l.minPeriod = first
		}
		if i == 0 || last > l.maxPeriod {
			l.maxPeriod = last
		}
	}

	l.isAttr = make([]bool, len(t.others))
	for i, st := range t.others {
		l.isAttr[i] = l.constantPerSeries(st)
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

// constantPerSeries reports whether every series has one value (or only
// nulls) in the column.
func (l *layout) constantPerSeries(st *store) bool {
	for _, s := range l.series {
		first := int(l.perm[s.start])
		for j := s.start + 1; j < s.end; j++ {
			if !st.equalRows(first, int(l.perm[j])) {
				return false
			}
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

	// Data file, batch by batch. batchOf/offsetIn feed the index.
	batchOf := make([]uint32, len(l.series))
	offsetIn := make([]uint32, len(l.series))
	dw, err := arrowfile.Create(filepath.Join(dir, "data.arrow"), sc.data)
	if err != nil {
		return nil, sc, err
	}
	for b, bnd := range l.batches {
		rs, re := l.series[bnd[0]].start, l.series[bnd[1]-1].end
		rows := l.perm[rs:re]
		codes := make([]uint32, len(rows))
		for si := bnd[0]; si < bnd[1]; si++ {
			s := l.series[si]
			batchOf[si], offsetIn[si] = uint32(b), uint32(s.start-rs)
			for j := s.start; j < s.end; j++ {
				codes[j-rs] = uint32(si)
			}
		}
		periods := make([]int32, len(rows))
		for i, r := range rows {
			periods[i] = t.periods[r]
		}
		cols := []arrow.Array{uint32Array(codes), date32Array(periods)}
		for _, st := range append([]*store{t.value}, extraStores...) {
			a, err := st.gather(rows)
			if err != nil {
				dw.Abort()
				return nil, sc, err
			}
			cols = append(cols, a)
		}
		rec := array.NewRecordBatch(sc.data, cols, int64(len(rows)))
		err := dw.Write(rec)
		rec.Release()
		for _, c := range cols {
			c.Release()
		}
		if err != nil {
			dw.Abort()
			return nil, sc, err
		}
	}
	dinfo, err := dw.Close()
	if err != nil {
		return nil, sc, err
	}

	// Index: one batch, one row per series.
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
		firstP[i], lastP[i] = t.periods[l.perm[s.start]], t.periods[l.perm[s.end-1]]
		firstRows[i], latestRows[i] = l.perm[s.start], s.latest
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
