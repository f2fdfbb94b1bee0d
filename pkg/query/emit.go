package query

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
)

// Batching rules of an answer (docs/FLIGHT.md "Streaming" is the user's
// version):
//
//   - A series' rows are pieces of the Reader's record batches (for a bare
//     snapshot, one slice of a mapped batch). An answer batch is such a
//     slice when it can be: one series, or several series whose rows are
//     adjacent in one batch (a prefix or a category without a period
//     range), up to the byte budget. Those batches copy nothing before the
//     transport serialises them.
//   - Pieces bigger than the byte budget are split, so no message exceeds
//     what a client with gRPC's default 4 MiB receive limit accepts.
//   - Small pieces that are not adjacent (a period range over many series,
//     latest-only, a delta interleaved with the base) are coalesced by
//     copying them into one batch of up to the budget, so an answer is
//     never thousands of tiny messages.
//   - series_id is dictionary<int32, utf8>; its dictionary is the list of
//     selected ids, sent once before the first batch. When that list is
//     larger than the budget it is sent in budget-sized parts as delta
//     dictionaries, each before the first batch that needs it. Attribute
//     columns share series_id's codes and have their own dictionaries (the
//     attribute value of each selected series).
const (
	// smallPiece is the row count under which a non-adjacent piece is
	// copied into a coalesced batch rather than sent on its own.
	smallPiece = 4096
	// maxCoalesced bounds how many pieces one coalesced batch gathers.
	maxCoalesced = 16384
)

// run is a run of adjacent rows [lo, hi) of rec; the series pieces inside
// it are emitter.parts[p0:p1], in order.
type run struct {
	rec    arrow.RecordBatch
	lo, hi int64
	p0, p1 int
}

// emitter turns a plan's pieces into record batches.
type emitter struct {
	ctx    context.Context
	p      *Plan
	mem    memory.Allocator
	budget int64
	write  func(arrow.RecordBatch) error
	left   int64 // rows still to send (the plan's row count, after Limit)

	// the full dictionaries, and the prefix [0, dictEnd) sent so far
	fullIDs   arrow.Array
	fullAttrs []arrow.Array
	curIDs    arrow.Array
	curAttrs  []arrow.Array
	dictEnd   int

	rowBytes  int64   // fixed bytes per output row
	parts     []piece // the pieces of the pending runs
	pending   []run
	pendRows  int64
	pendBytes int64

	rows    int64
	batches int

	// storage of parts and pending for an answer of one run, and the
	// columns of the batch being assembled
	partsOne   [1]piece
	pendingOne [1]run
	cols       []arrow.Array
	colsFew    [8]arrow.Array // cols' storage for answers of up to 8 columns
}

// init readies e (the zero emitter or one that streamed before) to stream
// p's answer.
func (e *emitter) init(ctx context.Context, p *Plan, mem memory.Allocator, budget int64, write func(arrow.RecordBatch) error) error {
	var attrs []int
	for _, c := range p.cols {
		if c.Attr {
			attrs = append(attrs, c.Pos)
		}
	}
	ids, vals, err := p.r.Dictionaries(ctx, p.sel, attrs, mem)
	if err != nil {
		return err
	}
	*e = emitter{ctx: ctx, p: p, mem: mem, budget: max(budget, 1), write: write, fullIDs: ids, fullAttrs: vals, left: p.rows}
	e.parts, e.pending = e.partsOne[:0], e.pendingOne[:0]
	if n := 2 + len(p.cols); n <= len(e.colsFew) {
		e.cols = e.colsFew[:0]
	} else {
		e.cols = make([]arrow.Array, 0, n)
	}
	e.rowBytes = 4 + 4 + 1 // series code, period, validity bits (rounded up)
	for _, c := range p.cols {
		e.rowBytes += int64(c.Width)
	}
	return nil
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

// errDone ends the piece walk once the limit is reached.
var errDone = fmt.Errorf("query: limit reached")

// run streams every piece.
func (e *emitter) run() error {
	if e.p.fromIndex {
		return e.runIndex()
	}
	err := e.p.each(func(pc piece) error {
		if e.left <= 0 {
			return errDone
		}
		if pc.Len() > e.left {
			pc.Hi = pc.Lo + e.left
		}
		e.left -= pc.Len()
		for lo := pc.Lo; lo < pc.Hi; {
			hi := e.splitEnd(pc.Rec, lo, pc.Hi)
			if err := e.add(piece{k: pc.k, Piece: Piece{Rec: pc.Rec, Lo: lo, Hi: hi}}); err != nil {
				return err
			}
			lo = hi
		}
		return nil
	})
	if err != nil && err != errDone {
		return err
	}
	return e.flush()
}

// stop reports a cancelled request; polled between batches.
func (e *emitter) stop() error { return e.ctx.Err() }

// splitEnd returns the end of the longest prefix of rows [lo, hi) of rec
// that fits the byte budget (at least one row).
func (e *emitter) splitEnd(rec arrow.RecordBatch, lo, hi int64) int64 {
	n := hi - lo
	bytes := e.bytesOf(rec, lo, hi)
	if bytes <= e.budget || n <= 1 {
		return hi
	}
	return lo + max(n*e.budget/bytes, 1)
}

// bytesOf estimates the serialised size of rows [lo, hi) of rec.
func (e *emitter) bytesOf(rec arrow.RecordBatch, lo, hi int64) int64 {
	bytes := (hi - lo) * e.rowBytes
	for _, c := range e.p.cols {
		if c.Attr || !c.Var {
			continue
		}
		if n, ok := offsetSpan(rec.Column(c.Pos), int(lo), int(hi)); ok {
			bytes += n
		}
	}
	return bytes
}

// add queues a piece (already within the budget), flushing as the rules
// above say.
func (e *emitter) add(pc piece) error {
	n := pc.Len()
	bytes := e.bytesOf(pc.Rec, pc.Lo, pc.Hi)
	if len(e.pending) > 0 {
		last := &e.pending[len(e.pending)-1]
		adjacent := last.rec == pc.Rec && last.hi == pc.Lo
		switch {
		case e.pendBytes+bytes > e.budget:
			// does not fit: send what we have
		case adjacent:
			last.hi = pc.Hi
			e.parts = append(e.parts, pc)
			last.p1 = len(e.parts)
			e.pendRows += n
			e.pendBytes += bytes
			return nil
		case n < smallPiece && last.hi-last.lo < smallPiece && len(e.pending) < maxCoalesced:
			e.parts = append(e.parts, pc)
			e.pending = append(e.pending, run{rec: pc.Rec, lo: pc.Lo, hi: pc.Hi, p0: len(e.parts) - 1, p1: len(e.parts)})
			e.pendRows += n
			e.pendBytes += bytes
			return nil
		}
		if err := e.flush(); err != nil {
			return err
		}
	}
	e.parts = append(e.parts, pc)
	e.pending = append(e.pending, run{rec: pc.Rec, lo: pc.Lo, hi: pc.Hi, p0: len(e.parts) - 1, p1: len(e.parts)})
	e.pendRows, e.pendBytes = n, bytes
	return nil
}

// flush sends the pending runs as one record batch: a zero-copy slice when
// there is one run, a copy of the runs otherwise.
func (e *emitter) flush() error {
	if len(e.pending) == 0 {
		return nil
	}
	if err := e.stop(); err != nil {
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

// record assembles the answer batch of runs holding n rows.
func (e *emitter) record(runs []run, n int64) (arrow.RecordBatch, error) {
	// series codes, one per row
	buf, codes := allocFixed[int32](e.mem, int(n))
	i := 0
	maxK := int32(0)
	for _, r := range runs {
		for _, pc := range e.parts[r.p0:r.p1] {
			for j := pc.Lo; j < pc.Hi; j++ {
				codes[i] = pc.k
				i++
			}
			maxK = max(maxK, pc.k)
		}
	}
	e.growDictionaries(int(maxK) + 1)
	defer buf.Release() // each dictionary column holds its own reference

	// the batch keeps its own copy of the column list
	cols := e.cols[:0]
	defer func() {
		for i, c := range cols {
			c.Release()
			cols[i] = nil
		}
		e.cols = cols[:0]
	}()
	cols = append(cols, dictColumn(SeriesIDType, n, buf, e.curIDs))
	dataCol := func(pos int) (arrow.Array, error) {
		if len(runs) == 1 {
			r := runs[0]
			return array.NewSlice(r.rec.Column(pos), r.lo, r.hi), nil
		}
		parts := make([]arrow.Array, len(runs))
		for j, r := range runs {
			parts[j] = array.NewSlice(r.rec.Column(pos), r.lo, r.hi)
		}
		out, err := array.Concatenate(parts, e.mem)
		for _, a := range parts {
			a.Release()
		}
		return out, err
	}
	pcol, err := dataCol(datafile.ColumnPeriod)
	if err != nil {
		return nil, fmt.Errorf("period: %w", err)
	}
	cols = append(cols, pcol)
	ai := 0
	for _, c := range e.p.cols {
		if c.Attr {
			cols = append(cols, dictColumn(c.Field.Type, n, buf, e.curAttrs[ai]))
			ai++
			continue
		}
		a, err := dataCol(c.Pos)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
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
// the budget, the selected series' latest period and value. It walks the
// selection in chunks, so an answer for every series holds one chunk.
func (e *emitter) runIndex() error {
	per := int(max(e.budget/e.rowBytes, 1))
	codes := make([]int32, 0, min(per, e.p.sel.Len()))
	ks := make([]int32, 0, cap(codes))
	ps := make([]int32, 0, cap(codes))
	flush := func() error {
		if len(codes) == 0 {
			return nil
		}
		if err := e.stop(); err != nil {
			return err
		}
		rec, err := e.indexRecord(codes, ks, ps)
		if err != nil {
			return err
		}
		err = e.write(rec)
		rec.Release()
		if err != nil {
			return err
		}
		e.rows += int64(len(codes))
		e.batches++
		codes, ks, ps = codes[:0], ks[:0], ps[:0]
		return nil
	}
	add := func(k int, lp int32) error {
		codes, ks, ps = append(codes, int32(e.p.sel.Code(k))), append(ks, int32(k)), append(ps, lp)
		e.left--
		if len(codes) == per {
			return flush()
		}
		return nil
	}
	if e.p.latestKept {
		for i, k := range e.p.latestK {
			if e.left <= 0 {
				break
			}
			if err := add(int(k), e.p.latestP[i]); err != nil {
				return err
			}
		}
		return flush()
	}
	for k := 0; k < e.p.sel.Len() && e.left > 0; k++ {
		lp, ok := e.p.r.Latest(e.p.sel.Code(k))
		if !ok {
			continue
		}
		if err := add(k, lp); err != nil {
			return err
		}
	}
	return flush()
}

// indexRecord is the answer's batch for the series codes at selection
// positions ks, whose latest periods are ps.
func (e *emitter) indexRecord(codes, ks, ps []int32) (arrow.RecordBatch, error) {
	n := len(codes)
	e.growDictionaries(int(ks[n-1]) + 1)
	kbuf, kcodes := allocFixed[int32](e.mem, n)
	copy(kcodes, ks)
	defer kbuf.Release() // each dictionary column holds its own reference

	pbuf, periods := allocFixed[arrow.Date32](e.mem, n)
	for i, lp := range ps {
		periods[i] = arrow.Date32(lp)
	}
	pcol := fixedArray(arrow.FixedWidthTypes.Date32, n, pbuf)

	cols := make([]arrow.Array, 0, 2+len(e.p.cols))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	cols = append(cols, dictColumn(SeriesIDType, int64(n), kbuf, e.curIDs), pcol)
	ai := 0
	for _, c := range e.p.cols {
		if c.Attr {
			cols = append(cols, dictColumn(c.Field.Type, int64(n), kbuf, e.curAttrs[ai]))
			ai++
			continue
		}
		a, err := e.p.r.LatestValues(e.ctx, codes, e.mem)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(e.p.schema, cols, int64(n)), nil
}
