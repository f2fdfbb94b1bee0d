package sortwrite

import (
	"context"
	"encoding/binary"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/snapwrite"
)

// batcher collects merged records into data batches, cut between series
// by the in-memory rule: a series goes to the next batch when the batch
// already holds rows and the series would take it over the limit.
//
// A record is decoded into the batch's columns as it is added, so a batch
// costs its columns only (about 17 bytes a row of a lakegen lake: series
// code, period, value and its validity byte), not its records as well.
// The columns that go into the data file unchanged (series codes,
// periods, fixed-width values) become the batch's arrays without a copy;
// their buffers come back through pool once the batch is written, so the
// merge holds two batches' columns (the one being written and the one
// being made) and allocates next to nothing per batch. Each such column
// has a pool of its own, of buffers of one size: a shared pool would hand
// a column's request a larger buffer of another, and keep the smaller
// ones no request fits.
type batcher struct {
	e        *external
	layout   recLayout // of the merge's records
	extraIdx []int
	schema   *arrow.Schema
	limit    int
	pipe     *snapwrite.Pipe // to the data file's writer
	// pool recycles the buffers of the gathered columns, and byCol, per
	// data file column, those handed over (nil: not handed over); all nil
	// when the sink may keep slices of a batch (a tiered sink's cold
	// writer).
	pool  *slab
	byCol []*slab

	n           int    // rows in the batch being built
	seriesStart int    // first row of the current series
	series      uint32 // series codes written so far (= code of the current series)

	// codes and periods: 4 bytes a row, handed to the writer.
	codes, periods []byte
	// stores are the value and the extra columns; offs their fields in a
	// record, cols their columns in the data file. A fixed-width store's
	// data is handed to the writer (in fixed[i], the store's data slice
	// being a view of it); valid, string codes and booleans stay and are
	// gathered from.
	stores []*store
	offs   []int
	cols   []int
	fixed  [][]byte
	rest   []byte   // flush's copy of the rows after the batch
	ident  []uint32 // 0, 1, 2, ... (rows)
}

// newBatcher returns the batcher of a merge whose records have layout l.
func newBatcher(e *external, l recLayout, extraIdx []int, schema *arrow.Schema, recycle bool) *batcher {
	b := &batcher{e: e, layout: l, extraIdx: extraIdx, schema: schema, limit: e.opt.BatchRows}
	t := e.t
	b.stores = append(b.stores, t.value.like())
	b.offs = append(b.offs, spillHeader)
	b.cols = append(b.cols, datafile.ColumnValue)
	for k, i := range extraIdx {
		b.stores = append(b.stores, t.others[i].like())
		b.offs = append(b.offs, l.offs[i])
		b.cols = append(b.cols, datafile.NumFixed+k)
	}
	b.byCol = make([]*slab, datafile.NumFixed+len(extraIdx))
	if recycle {
		b.pool = &slab{}
		b.byCol[datafile.ColumnSeriesCode], b.byCol[datafile.ColumnPeriod] = &slab{}, &slab{}
		for i, s := range b.stores {
			if s.kind == kindFixed {
				b.byCol[b.cols[i]] = &slab{}
			}
		}
	}
	b.fixed = make([][]byte, len(b.stores))
	// A batch's rows at once, and room for the series that takes it over
	// the limit: growing by appends copied them about twice over.
	rows := min(b.limit+b.limit/8, t.rows) + 1
	b.codes = b.byCol[datafile.ColumnSeriesCode].get(4 * rows)[:0]
	b.periods = b.byCol[datafile.ColumnPeriod].get(4 * rows)[:0]
	for i, s := range b.stores {
		if s.kind == kindFixed {
			b.fixed[i] = b.byCol[b.cols[i]].get(s.width * rows)[:0]
		}
	}
	return b
}

// write is the Pipe's writer: the sink's Write, then the batch's buffers
// back into the pool.
func (b *batcher) write(sink *snapwrite.Sink) func(arrow.RecordBatch) error {
	if b.pool == nil {
		return sink.Write
	}
	return func(rec arrow.RecordBatch) error {
		err := sink.Write(rec)
		// The writer copied the batch into the file; nothing else holds
		// its buffers (wrapped bytes: the release frees nothing).
		for c, col := range rec.Columns() {
			for j, buf := range col.Data().Buffers() {
				switch {
				case buf == nil:
				case j == 1 && b.byCol[c] != nil:
					b.byCol[c].put(buf.Buf())
				default:
					b.pool.put(buf.Buf())
				}
			}
		}
		return err
	}
}

// add appends a merged record to the current series.
func (b *batcher) add(rec []byte) {
	le := binary.LittleEndian
	b.codes = le.AppendUint32(grow(b.codes, 4), b.series)
	b.periods = append(grow(b.periods, 4), rec[8:12]...)
	for i, s := range b.stores {
		o := b.offs[i]
		switch s.kind {
		case kindString:
			s.codes = append(s.codes, le.Uint32(rec[o:]))
		case kindFixed:
			w := s.width
			s.valid = append(s.valid, rec[o])
			b.fixed[i] = append(grow(b.fixed[i], w), rec[o+1:o+1+w]...)
			s.data = b.fixed[i]
		case kindBool:
			s.valid = append(s.valid, rec[o])
			s.data = append(s.data, rec[o+1])
		}
	}
	b.n++
}

// grow makes room for w more bytes in a buffer handed to the writer,
// doubling it when it is full (a long series); the pools then keep
// buffers of the new size (slab.get takes none below the size asked for).
func grow(buf []byte, w int) []byte {
	if len(buf)+w <= cap(buf) {
		return buf
	}
	nb := make([]byte, len(buf), slabClass(2*cap(buf)+w))
	copy(nb, buf)
	return nb
}

// endSeries closes the series whose rows are [seriesStart, n).
func (b *batcher) endSeries(ctx context.Context) error {
	if b.n == b.seriesStart {
		return nil
	}
	if b.seriesStart > 0 && b.n > b.limit {
		if err := b.flush(ctx, b.seriesStart); err != nil {
			return err
		}
	}
	b.series++
	b.seriesStart = b.n
	return nil
}

// flush turns the first k rows into a batch and sends it.
func (b *batcher) flush(ctx context.Context, k int) error {
	if k == 0 {
		return nil
	}
	cols := make([]arrow.Array, datafile.NumFixed, datafile.NumFixed+len(b.stores)-1)
	cols[datafile.ColumnSeriesCode] = fromBuffer(arrow.PrimitiveTypes.Uint32, k, b.codes[:4*k])
	cols[datafile.ColumnPeriod] = fromBuffer(arrow.FixedWidthTypes.Date32, k, b.periods[:4*k])
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i, s := range b.stores {
		var a arrow.Array
		var err error
		if s.kind == kindFixed {
			a = b.fixedArray(s, b.fixed[i][:k*s.width], k)
		} else if a, err = s.gatherFrom(b.rows(k), b.pool); err != nil {
			release()
			return err
		}
		if i == 0 {
			cols[datafile.ColumnValue] = a
		} else {
			cols = append(cols, a)
		}
	}
	rec := array.NewRecordBatch(b.schema, cols, int64(k))
	release()
	// The rows after k (the current series) start the next batch. In the
	// buffers handed over they are set aside (in rest) before the send:
	// Send returns once the writer has taken the batch, having given the
	// buffers of the one before back, and from then on the batch's own
	// may come back at any time. They then go into buffers from the pools
	// (the batch before's). The buffers not handed over are shifted.
	n := b.n
	b.rest = append(b.rest[:0], b.codes[k*4:n*4]...)
	b.rest = append(b.rest, b.periods[k*4:n*4]...)
	for i, s := range b.stores {
		if s.kind == kindFixed {
			b.rest = append(b.rest, b.fixed[i][k*s.width:n*s.width]...)
		}
	}
	if err := b.pipe.Send(rec); err != nil {
		return err
	}
	rest := b.rest
	keep := func(buf []byte, w int, p *slab) []byte {
		m := (n - k) * w
		nb := p.get(max(cap(buf), m))[:m]
		rest = rest[copy(nb, rest):]
		return nb
	}
	b.codes = keep(b.codes, 4, b.byCol[datafile.ColumnSeriesCode])
	b.periods = keep(b.periods, 4, b.byCol[datafile.ColumnPeriod])
	for i, s := range b.stores {
		switch s.kind {
		case kindString:
			s.codes = s.codes[:copy(s.codes, s.codes[k:n])]
		case kindFixed:
			b.fixed[i] = keep(b.fixed[i], s.width, b.byCol[b.cols[i]])
			s.data = b.fixed[i]
			s.valid = s.valid[:copy(s.valid, s.valid[k:n])]
		case kindBool:
			s.data = s.data[:copy(s.data, s.data[k:n])]
			s.valid = s.valid[:copy(s.valid, s.valid[k:n])]
		}
	}
	b.n -= k
	b.seriesStart -= k
	return nil
}

// fixedArray wraps the first k rows of fixed-width store s, whose data is
// data, as an array: the data without a copy, the validity as gather
// makes it (no bitmap when nothing is null).
func (b *batcher) fixedArray(s *store, data []byte, k int) arrow.Array {
	wb := b.pool.get((k + 63) / 64 * 8)
	nulls := validBits(asSlice[uint64](wb), s.valid[:k])
	var valid *memory.Buffer
	if nulls == 0 {
		b.pool.put(wb)
	} else {
		valid = memory.NewBufferBytes(wb[:bitutil.BytesForBits(int64(k))])
	}
	ad := array.NewData(s.col.Type, k, []*memory.Buffer{valid, memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer ad.Release()
	return array.MakeFromData(ad)
}

// rows returns the rows 0 to k-1, for gathering the columns that are not
// handed over.
func (b *batcher) rows(k int) []uint32 {
	if len(b.ident) < k {
		b.ident = make([]uint32, k)
		for i := range b.ident {
			b.ident[i] = uint32(i)
		}
	}
	return b.ident[:k]
}

// validBits sets bit i of words when valid[i] is not 0 (validityBits of
// the rows in order) and returns the nulls.
func validBits(words []uint64, valid []byte) int {
	set := 0
	for w := range words {
		chunk := valid[w*64 : min(w*64+64, len(valid))]
		var word uint64
		for i, v := range chunk {
			var bit uint64
			if v != 0 {
				bit = 1
			}
			word |= bit << uint(i)
		}
		words[w] = word
		set += bits.OnesCount64(word)
	}
	return len(valid) - set
}
