package serve

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/sidecar"
)

// Batching rules of a response (see docs/FLIGHT.md "Streaming"):
//
//   - A series' rows are a slice of a mapped data batch. A record batch of
//     the response is such a slice when it can be: one series, or several
//     series whose rows are adjacent in the data file (a prefix or a
//     category without a period range), up to the byte budget. Those
//     batches copy nothing before the IPC writer serialises them.
//   - Slices bigger than the byte budget are split, so no message exceeds
//     what a client with gRPC's default 4 MiB receive limit accepts.
//   - Small slices that are not adjacent (a period range over many series,
//     latest-only) are coalesced by copying them into one batch of up to
//     the budget, so a response is never thousands of tiny messages.
//   - series_id is dictionary<int32, utf8>; its dictionary is the list of
//     selected ids, sent once before the first batch. When that list is
//     larger than the budget it is sent in budget-sized parts as delta
//     dictionaries, each before the first batch that needs it. Attribute
//     columns share series_id's codes and have their own dictionaries (the
//     attribute value of each selected series).
const (
	// smallPiece is the row count under which a non-adjacent slice is
	// copied into a coalesced batch rather than sent on its own.
	smallPiece = 4096
	// maxCoalesced bounds how many slices one coalesced batch gathers.
	maxCoalesced = 16384
)

// rng is a run of rows [lo, hi) of data batch b; the series pieces inside
// it are emitter.parts[p0:p1], in order.
type rng struct {
	b      int32
	lo, hi int64
	p0, p1 int
}

// emitter turns a plan's pieces into record batches.
type emitter struct {
	p      *plan
	mem    memory.Allocator
	budget int64
	write  func(arrow.RecordBatch) error

	// the full dictionaries, and the prefix [0, dictEnd) sent so far
	fullIDs   arrow.Array
	fullAttrs []arrow.Array
	curIDs    arrow.Array
	curAttrs  []arrow.Array
	dictEnd   int

	rowBytes  int64   // fixed bytes per output row
	parts     []piece // the pieces of the pending runs
	pending   []rng
	pendRows  int64
	pendBytes int64

	rows    int64
	batches int
}

func newEmitter(ctx context.Context, p *plan, mem memory.Allocator, budget int64, write func(arrow.RecordBatch) error) (*emitter, error) {
	ids, attrs, err := p.dictionaries(ctx, mem)
	if err != nil {
		return nil, err
	}
	e := &emitter{p: p, mem: mem, budget: budget, write: write, fullIDs: ids, fullAttrs: attrs}
	e.rowBytes = 4 + 4 + 1 // series code, period, validity bits (rounded up)
	for _, c := range p.cols {
		e.rowBytes += int64(c.width)
	}
	return e, nil
}

func (e *emitter) release() {
	for _, a := range []arrow.Array{e.fullIDs, e.curIDs} {
		if a != nil {
			a.Release()
		}
	}
	for _, as := range [][]arrow.Array{e.fullAttrs, e.curAttrs} {
		for _, a := range as {
			if a != nil {
				a.Release()
			}
		}
	}
	e.fullIDs, e.curIDs, e.fullAttrs, e.curAttrs = nil, nil, nil, nil
}

// run streams every piece. stop is polled between batches.
func (e *emitter) run(stop func() error) error {
	if e.p.fromIndex {
		return e.runIndex(stop)
	}
	for _, pc := range e.p.pieces {
		for lo := pc.lo; lo < pc.hi; {
			hi := e.splitEnd(pc.b, lo, pc.hi)
			if err := e.add(piece{k: pc.k, b: pc.b, lo: lo, hi: hi}, stop); err != nil {
				return err
			}
			lo = hi
		}
	}
	return e.flush(stop)
}

// splitEnd returns the end of the longest prefix of rows [lo, hi) of batch
// b that fits the byte budget (at least one row).
func (e *emitter) splitEnd(b int32, lo, hi int64) int64 {
	n := hi - lo
	bytes := e.bytesOf(b, lo, hi)
	if bytes <= e.budget || n <= 1 {
		return hi
	}
	rows := n * e.budget / bytes
	if rows < 1 {
		rows = 1
	}
	return lo + rows
}

// bytesOf estimates the serialised size of rows [lo, hi) of batch b.
func (e *emitter) bytesOf(b int32, lo, hi int64) int64 {
	n := hi - lo
	bytes := n * e.rowBytes
	batch := e.p.v.Batch(int(b))
	for _, c := range e.p.cols {
		if c.attr || !c.vari {
			continue
		}
		if n, ok := offsetSpan(batch.Column(c.pos), int(lo), int(hi)); ok {
			bytes += n
		}
	}
	return bytes
}

// add queues a piece (already within the budget), flushing as the rules
// above say.
func (e *emitter) add(pc piece, stop func() error) error {
	n := pc.hi - pc.lo
	bytes := e.bytesOf(pc.b, pc.lo, pc.hi)
	if len(e.pending) > 0 {
		last := &e.pending[len(e.pending)-1]
		adjacent := last.b == pc.b && last.hi == pc.lo
		switch {
		case e.pendBytes+bytes > e.budget:
			// does not fit: send what we have
		case adjacent:
			last.hi = pc.hi
			e.parts = append(e.parts, pc)
			last.p1 = len(e.parts)
			e.pendRows += n
			e.pendBytes += bytes
			return nil
		case n < smallPiece && last.hi-last.lo < smallPiece && len(e.pending) < maxCoalesced:
			e.parts = append(e.parts, pc)
			e.pending = append(e.pending, rng{b: pc.b, lo: pc.lo, hi: pc.hi, p0: len(e.parts) - 1, p1: len(e.parts)})
			e.pendRows += n
			e.pendBytes += bytes
			return nil
		}
		if err := e.flush(stop); err != nil {
			return err
		}
	}
	e.parts = append(e.parts, pc)
	e.pending = append(e.pending, rng{b: pc.b, lo: pc.lo, hi: pc.hi, p0: len(e.parts) - 1, p1: len(e.parts)})
	e.pendRows, e.pendBytes = n, bytes
	return nil
}

// flush sends the pending runs as one record batch: a zero-copy slice when
// there is one run, a copy of the runs otherwise.
func (e *emitter) flush(stop func() error) error {
	if len(e.pending) == 0 {
		return nil
	}
	if err := stop(); err != nil {
		return err
	}
	rec, err := e.record(e.pending, e.pendRows)
	if err != nil {
		return err
	}
	err = e.write(rec)
	rec.Release()
	if err != nil {
		return err
	}
	e.rows += e.pendRows
	e.batches++
	e.pending = e.pending[:0]
	e.parts = e.parts[:0]
	e.pendRows, e.pendBytes = 0, 0
	return nil
}

// record assembles the output batch of runs holding n rows.
func (e *emitter) record(runs []rng, n int64) (arrow.RecordBatch, error) {
	// series codes, one per row
	codes := make([]int32, n)
	i := 0
	maxK := int32(0)
	for _, r := range runs {
		for _, pc := range e.parts[r.p0:r.p1] {
			k := pc.k
			for j := pc.lo; j < pc.hi; j++ {
				codes[i] = k
				i++
			}
			maxK = max(maxK, k)
		}
	}
	e.growDictionaries(int(maxK) + 1)
	buf := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(codes))
	idxData := array.NewData(arrow.PrimitiveTypes.Int32, int(n), []*memory.Buffer{nil, buf}, nil, 0, 0)
	indices := array.MakeFromData(idxData)
	idxData.Release()
	defer indices.Release()

	cols := make([]arrow.Array, 0, 2+len(e.p.cols))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	cols = append(cols, array.NewDictionaryArray(seriesIDType, indices, e.curIDs))
	dataCol := func(pos int) (arrow.Array, error) {
		if len(runs) == 1 {
			r := runs[0]
			return array.NewSlice(e.p.v.Batch(int(r.b)).Column(pos), r.lo, r.hi), nil
		}
		parts := make([]arrow.Array, len(runs))
		for j, r := range runs {
			parts[j] = array.NewSlice(e.p.v.Batch(int(r.b)).Column(pos), r.lo, r.hi)
		}
		out, err := array.Concatenate(parts, e.mem)
		for _, a := range parts {
			a.Release()
		}
		return out, err
	}
	pcol, err := dataCol(1)
	if err != nil {
		return nil, fmt.Errorf("period: %w", err)
	}
	cols = append(cols, pcol)
	ai := 0
	for _, c := range e.p.cols {
		if c.attr {
			cols = append(cols, array.NewDictionaryArray(c.field.Type, indices, e.curAttrs[ai]))
			ai++
			continue
		}
		a, err := dataCol(c.pos)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(e.p.schema, cols, n), nil
}

// growDictionaries makes the current dictionaries cover codes [0, need):
// once, the whole selection when it fits the budget; otherwise the next
// budget-sized part (sent by the IPC writer as a delta dictionary).
func (e *emitter) growDictionaries(need int) {
	if need <= e.dictEnd && e.curIDs != nil {
		return
	}
	total := e.fullIDs.Len()
	end := need
	if e.curIDs == nil && e.dictBytes(0, total) <= e.budget {
		end = total
	} else {
		// extend past need while the delta stays within the budget
		for end < total && e.dictBytes(e.dictEnd, end+1) <= e.budget {
			end++
		}
	}
	if end == total && e.curIDs == nil {
		e.fullIDs.Retain()
		e.curIDs = e.fullIDs
		for _, a := range e.fullAttrs {
			a.Retain()
			e.curAttrs = append(e.curAttrs, a)
		}
		e.dictEnd = end
		return
	}
	if e.curIDs != nil {
		e.curIDs.Release()
	}
	e.curIDs = array.NewSlice(e.fullIDs, 0, int64(end))
	for i, a := range e.fullAttrs {
		if i < len(e.curAttrs) {
			e.curAttrs[i].Release()
			e.curAttrs[i] = array.NewSlice(a, 0, int64(end))
		} else {
			e.curAttrs = append(e.curAttrs, array.NewSlice(a, 0, int64(end)))
		}
	}
	e.dictEnd = end
}

// dictBytes is the largest serialised size of entries [lo, hi) over the
// dictionaries.
func (e *emitter) dictBytes(lo, hi int) int64 {
	best := arraySpan(e.fullIDs, lo, hi)
	for _, a := range e.fullAttrs {
		best = max(best, arraySpan(a, lo, hi))
	}
	return best
}

func arraySpan(a arrow.Array, lo, hi int) int64 {
	n := int64(hi - lo)
	if d, ok := offsetSpan(a, lo, hi); ok {
		w := int64(4)
		if a.DataType().ID() == arrow.LARGE_STRING || a.DataType().ID() == arrow.LARGE_BINARY {
			w = 8
		}
		return w*n + d
	}
	if fw, ok := a.DataType().(arrow.FixedWidthDataType); ok {
		return n * int64((fw.BitWidth()+7)/8)
	}
	return n * 8
}

// offsetSpan is the value bytes of elements [lo, hi) of an offset-based
// array (hi may equal its length).
func offsetSpan(a arrow.Array, lo, hi int) (int64, bool) {
	switch a := a.(type) {
	case *array.String:
		o := a.ValueOffsets()
		return int64(o[hi] - o[lo]), true
	case *array.Binary:
		o := a.ValueOffsets()
		return int64(o[hi] - o[lo]), true
	case *array.LargeString:
		o := a.ValueOffsets()
		return o[hi] - o[lo], true
	case *array.LargeBinary:
		o := a.ValueOffsets()
		return o[hi] - o[lo], true
	}
	return 0, false
}

// runIndex streams a latest query from the index alone: per batch of up to
// the budget, the selected series' latest_period and latest_value, sliced
// when their codes are consecutive and gathered otherwise.
func (e *emitter) runIndex(stop func() error) error {
	p := e.p
	per := int(e.budget / e.rowBytes)
	if per < 1 {
		per = 1
	}
	x := p.v.Index()
	lv := x.LatestValues()
	for i := 0; i < len(p.codes); i += per {
		j := min(i+per, len(p.codes))
		if err := stop(); err != nil {
			return err
		}
		rec, err := e.indexRecord(x, lv, p.codes[i:j], p.ks[i:j])
		if err != nil {
			return err
		}
		err = e.write(rec)
		rec.Release()
		if err != nil {
			return err
		}
		e.rows += int64(j - i)
		e.batches++
	}
	return nil
}

func (e *emitter) indexRecord(x *sidecar.Index, lv arrow.Array, codes, ks []int32) (arrow.RecordBatch, error) {
	n := len(codes)
	e.growDictionaries(int(ks[n-1]) + 1)
	buf := memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(ks))
	idxData := array.NewData(arrow.PrimitiveTypes.Int32, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	indices := array.MakeFromData(idxData)
	idxData.Release()
	defer indices.Release()

	contiguous := int(codes[n-1]-codes[0]) == n-1
	periods := make([]arrow.Date32, n)
	for i, c := range codes {
		lp, _ := x.Latest(int(c))
		periods[i] = arrow.Date32(lp)
	}
	pbuf := memory.NewBufferBytes(arrow.Date32Traits.CastToBytes(periods))
	pData := array.NewData(arrow.FixedWidthTypes.Date32, n, []*memory.Buffer{nil, pbuf}, nil, 0, 0)
	pcol := array.MakeFromData(pData)
	pData.Release()

	cols := make([]arrow.Array, 0, 2+len(e.p.cols))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	cols = append(cols, array.NewDictionaryArray(seriesIDType, indices, e.curIDs), pcol)
	ai := 0
	for _, c := range e.p.cols {
		if c.attr {
			cols = append(cols, array.NewDictionaryArray(c.field.Type, indices, e.curAttrs[ai]))
			ai++
			continue
		}
		a, err := gather(lv, codes, contiguous, e.mem)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(e.p.schema, cols, int64(n)), nil
}

// gather returns src's elements at codes: a slice when they are
// consecutive, a hand gather for float64 (the usual value type), Take
// otherwise.
func gather(src arrow.Array, codes []int32, contiguous bool, mem memory.Allocator) (arrow.Array, error) {
	n := len(codes)
	if contiguous {
		return array.NewSlice(src, int64(codes[0]), int64(codes[0])+int64(n)), nil
	}
	if f, ok := src.(*array.Float64); ok {
		vals := f.Float64Values()
		out := make([]float64, n)
		for i, c := range codes {
			if f.IsNull(int(c)) { // not expected: a latest period has a value
				return takeCodes(src, codes, mem)
			}
			out[i] = vals[c]
		}
		d := array.NewData(arrow.PrimitiveTypes.Float64, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(out))}, nil, 0, 0)
		defer d.Release()
		return array.MakeFromData(d), nil
	}
	return takeCodes(src, codes, mem)
}

func takeCodes(src arrow.Array, codes []int32, mem memory.Allocator) (arrow.Array, error) {
	idx := codesArray(codes, mem)
	defer idx.Release()
	return compute.TakeArray(context.Background(), src, idx)
}
