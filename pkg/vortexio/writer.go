package vortexio

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	flatbuffers "github.com/google/flatbuffers/go"
)

// WriterOptions tune the writer.
type WriterOptions struct {
	// ChunkRows is the number of rows per flat segment (per column). A range
	// read decodes whole chunks, so small chunks keep short reads cheap; on
	// the 15M-row snapshot table a 150-row read of all columns takes
	// ~0.23 ms at 8192 rows vs ~1.6 ms at 65536, while 65536 is ~8% smaller
	// (35.2 vs 38.5 MiB: delta bases and segment overhead amortise; see
	// BenchmarkSnapshot). Default 8192 (one reference zone).
	ChunkRows int
	// Workers is the number of goroutines encoding chunks (default
	// GOMAXPROCS). Output bytes do not depend on it.
	Workers int
	// CoreEdition restricts the file to edition core2025.06.0 (no
	// fastlanes.delta, no vortex.masked), for readers older than the
	// vortex-data releases that decode those (0.90 and 0.93 do). Dates sorted
	// within series then lose their delta encoding (~4.5 → ~12 bits/row).
	CoreEdition bool
	// ZoneRows > 0 writes a zone map (vortex.zoned: exact min, max and
	// null count per ZoneRows rows) for every integer and temporal column,
	// so that vortex-data prunes filtered scans (zones.go). 0: none, the
	// files are as before.
	ZoneRows int
}

// Writer streams Arrow record batches into a Vortex file.
//
// Edition: the files use only layouts vortex.struct, vortex.chunked and
// vortex.flat and the array encodings vortex.primitive, vortex.bool,
// vortex.varbinview, vortex.ext, vortex.null, vortex.struct,
// vortex.constant, vortex.dict, vortex.runend, fastlanes.for,
// fastlanes.bitpacked (with patches), vortex.alp (all edition
// core2025.05.0), vortex.sequence (core2025.06.0), and, unless
// WriterOptions.CoreEdition is set, fastlanes.delta (in no edition) and
// vortex.masked (core2025.10.0) around a delta of a nullable column.
// Delta is what brings dates sorted within series from ~12 to ~4.5
// bits/row, which is why it is on by default: vortex-data 0.93, the
// reference this package targets, reads it, as 0.90 did (tests/vortex checks). With
// CoreEdition every release that knows core2025.06.0 reads the files. No
// statistics are written unless WriterOptions.ZoneRows asks for zone maps
// (then also the layout vortex.zoned, edition core2026.08.0, which the
// reference's own writer uses): the reference prunes with statistics, so
// only exact ones are safe, and the zone maps are exact (zones.go). No
// array-level or file-level statistics are written at all.
type Writer struct {
	out      *bufio.Writer
	off      uint64
	dtype    *DType
	schema   *arrow.Schema
	opts     WriterOptions
	pending  [][]*vec     // per column, buffered batches not yet flushed
	pendOff  int          // rows of the first buffered batch already written
	pendRows int          // buffered rows not yet written
	chunks   [][]chunkRef // per column, flat layouts written
	segs     []segmentSpec
	arrayIDs []string
	arrayIdx map[string]uint16
	rows     uint64
	closed   bool
	flags    encFlags   // candidates switched off by the options
	zones    []*zoneAcc // per column; nil: no zone map
}

type chunkRef struct {
	rows uint64
	seg  uint32
}

// NewWriter starts a Vortex file with the given Arrow schema on w.
func NewWriter(w io.Writer, schema *arrow.Schema, opts WriterOptions) (*Writer, error) {
	if opts.ChunkRows <= 0 {
		opts.ChunkRows = 8192
	}
	dt := &DType{Kind: KindStruct}
	for _, f := range schema.Fields() {
		fd, err := dtypeFromArrow(f.Type, f.Nullable)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		dt.Names = append(dt.Names, f.Name)
		dt.Fields = append(dt.Fields, fd)
	}
	vw := &Writer{out: bufio.NewWriterSize(w, 1<<20), dtype: dt, schema: schema, opts: opts,
		pending: make([][]*vec, len(dt.Fields)), chunks: make([][]chunkRef, len(dt.Fields)), arrayIdx: map[string]uint16{}}
	if opts.CoreEdition {
		vw.flags = noDelta
	}
	vw.zones = make([]*zoneAcc, len(dt.Fields))
	if opts.ZoneRows > 0 {
		for i, f := range dt.Fields {
			if zoneable(f) {
				vw.zones[i] = newZoneAcc(f, opts.ZoneRows)
			}
		}
	}
	if _, err := vw.out.WriteString(magic); err != nil {
		return nil, err
	}
	vw.off = uint64(len(magic))
	return vw, nil
}

// Write appends a record batch; its schema must match the writer's.
//
// Rows are buffered per column as the batches they came in (no copy of the
// buffered rows when a chunk is cut: an earlier version re-sliced the
// remainder on every flush, which made large batches quadratic). Every
// complete chunk of the batch is then encoded in parallel, one job per
// (chunk, column), and the segments are written in order.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.closed {
		return fmt.Errorf("vortexio: write after close")
	}
	if int(rec.NumCols()) != len(w.dtype.Fields) {
		return fmt.Errorf("vortexio: batch has %d columns, schema %d", rec.NumCols(), len(w.dtype.Fields))
	}
	if rec.NumRows() == 0 {
		return nil
	}
	for i, f := range w.dtype.Fields {
		v, err := fromArrow(rec.Column(i), f)
		if err != nil {
			return fmt.Errorf("column %q: %w", w.dtype.Names[i], err)
		}
		if z := w.zones[i]; z != nil {
			if err := z.add(v); err != nil {
				return fmt.Errorf("column %q: %w", w.dtype.Names[i], err)
			}
		}
		w.pending[i] = append(w.pending[i], v)
	}
	w.pendRows += int(rec.NumRows())
	w.rows += uint64(rec.NumRows())
	return w.flush(false)
}

// flush encodes and writes every complete chunk (and, when final, the rest).
func (w *Writer) flush(final bool) error {
	var chunks [][]*vec // [chunk][column]
	for w.pendRows >= w.opts.ChunkRows || (final && w.pendRows > 0) {
		k := min(w.pendRows, w.opts.ChunkRows)
		cols := make([]*vec, len(w.pending))
		for i, f := range w.dtype.Fields {
			c, err := w.take(i, f, k)
			if err != nil {
				return err
			}
			cols[i] = c
		}
		w.pendOff += k
		for len(w.pending) > 0 && len(w.pending[0]) > 0 && w.pendOff >= w.pending[0][0].n {
			w.pendOff -= w.pending[0][0].n
			for i := range w.pending {
				w.pending[i] = w.pending[i][1:]
			}
		}
		w.pendRows -= k
		chunks = append(chunks, cols)
	}
	if len(chunks) == 0 {
		return nil
	}
	nc := len(w.dtype.Fields)
	nodes := make([]*enode, len(chunks)*nc)
	parallelFor(len(nodes), w.opts.Workers, func(j int) {
		nodes[j] = encodeVec(chunks[j/nc][j%nc], w.flags)
	})
	for j, e := range nodes {
		seg, err := w.writeArray(e)
		if err != nil {
			return fmt.Errorf("column %q: %w", w.dtype.Names[j%nc], err)
		}
		w.chunks[j%nc] = append(w.chunks[j%nc], chunkRef{rows: uint64(chunks[j/nc][0].n), seg: seg})
	}
	return nil
}

// take returns the next k buffered rows of column i, starting pendOff rows
// into its first buffered batch; only a chunk that straddles batches is
// copied.
func (w *Writer) take(i int, dt *DType, k int) (*vec, error) {
	parts := w.pending[i]
	off := w.pendOff
	if off+k <= parts[0].n {
		return parts[0].slice(off, off+k), nil
	}
	var pieces []*vec
	for _, p := range parts {
		if k == 0 {
			break
		}
		m := min(k, p.n-off)
		pieces = append(pieces, p.slice(off, off+m))
		k -= m
		off = 0
	}
	return concat(dt, pieces)
}

// parallelFor runs fn(0..n-1) on up to workers goroutines (GOMAXPROCS when
// workers <= 0).
func parallelFor(n, workers int, fn func(int)) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	if workers <= 1 {
		for j := 0; j < n; j++ {
			fn(j)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1)) - 1
				if j >= n {
					return
				}
				fn(j)
			}
		}()
	}
	wg.Wait()
}

func (w *Writer) arrayID(id string) uint16 {
	if i, ok := w.arrayIdx[id]; ok {
		return i
	}
	i := uint16(len(w.arrayIDs))
	w.arrayIDs = append(w.arrayIDs, id)
	w.arrayIdx[id] = i
	return i
}

func (w *Writer) pad(align uint64) error {
	p := (align - w.off%align) % align
	if p == 0 {
		return nil
	}
	_, err := w.out.Write(make([]byte, p))
	w.off += p
	return err
}

// writeArray serializes one array tree as a flat segment: its buffers in
// pre-order, each padded to its alignment relative to the segment start,
// then the Array flatbuffer and its u32 length.
func (w *Writer) writeArray(root *enode) (uint32, error) {
	var bufs []ebuf
	var collect func(e *enode)
	collect = func(e *enode) {
		bufs = append(bufs, e.bufs...)
		for _, k := range e.kids {
			collect(k)
		}
	}
	collect(root)
	segAlign := 8
	for _, b := range bufs {
		segAlign = max(segAlign, b.align)
	}
	if err := w.pad(uint64(segAlign)); err != nil {
		return 0, err
	}
	start := w.off
	pos := 0
	type bufSpec struct {
		pad, alignExp int
		length        int
	}
	specs := make([]bufSpec, len(bufs))
	for i, b := range bufs {
		p := (b.align - pos%b.align) % b.align
		if _, err := w.out.Write(make([]byte, p)); err != nil {
			return 0, err
		}
		if _, err := w.out.Write(b.data); err != nil {
			return 0, err
		}
		specs[i] = bufSpec{pad: p, alignExp: bits.TrailingZeros(uint(b.align)), length: len(b.data)}
		pos += p + len(b.data)
	}
	p8 := (8 - pos%8) % 8
	w.out.Write(make([]byte, p8))
	pos += p8

	fb := flatbuffers.NewBuilder(256)
	next := uint16(0)
	var build func(e *enode) flatbuffers.UOffsetT
	build = func(e *enode) flatbuffers.UOffsetT {
		myFirst := next
		next += uint16(len(e.bufs))
		kids := make([]flatbuffers.UOffsetT, len(e.kids))
		for i, k := range e.kids {
			kids[i] = build(k)
		}
		var meta, kv, bv flatbuffers.UOffsetT
		if len(e.meta) > 0 {
			meta = fb.CreateByteVector(e.meta)
		}
		if len(kids) > 0 {
			kv = offsetVector(fb, kids)
		}
		if len(e.bufs) > 0 {
			fb.StartVector(2, len(e.bufs), 2)
			for i := len(e.bufs) - 1; i >= 0; i-- {
				fb.PrependUint16(myFirst + uint16(i))
			}
			bv = fb.EndVector(len(e.bufs))
		}
		fb.StartObject(5)
		fb.PrependUint16Slot(0, w.arrayID(e.enc), 0)
		if meta != 0 {
			fb.PrependUOffsetTSlot(1, meta, 0)
		}
		if kv != 0 {
			fb.PrependUOffsetTSlot(2, kv, 0)
		}
		if bv != 0 {
			fb.PrependUOffsetTSlot(3, bv, 0)
		}
		return fb.EndObject()
	}
	rootOff := build(root)
	var bvec flatbuffers.UOffsetT
	if len(specs) > 0 {
		fb.StartVector(8, len(specs), 4)
		for i := len(specs) - 1; i >= 0; i-- {
			s := specs[i]
			fb.Prep(4, 8)
			fb.PrependUint32(uint32(s.length))
			fb.PrependUint8(0)
			fb.PrependUint8(uint8(s.alignExp))
			fb.PrependUint16(uint16(s.pad))
		}
		bvec = fb.EndVector(len(specs))
	}
	fb.StartObject(2)
	fb.PrependUOffsetTSlot(0, rootOff, 0)
	if bvec != 0 {
		fb.PrependUOffsetTSlot(1, bvec, 0)
	}
	fb.Finish(fb.EndObject())
	ab := fb.FinishedBytes()
	w.out.Write(ab)
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(len(ab)))
	if _, err := w.out.Write(l[:]); err != nil {
		return 0, err
	}
	total := uint64(pos + len(ab) + 4)
	w.off += total
	w.segs = append(w.segs, segmentSpec{offset: start, length: uint32(total), alignExp: uint8(bits.TrailingZeros(uint(segAlign)))})
	return uint32(len(w.segs) - 1), nil
}

func offsetVector(fb *flatbuffers.Builder, offs []flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	fb.StartVector(4, len(offs), 4)
	for i := len(offs) - 1; i >= 0; i-- {
		fb.PrependUOffsetT(offs[i])
	}
	return fb.EndVector(len(offs))
}

// Close flushes the remaining rows and writes the metadata and trailer. It
// does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.flush(true); err != nil {
		return err
	}
	// Columns without any chunk (empty file) get one empty flat array.
	for i, f := range w.dtype.Fields {
		if len(w.chunks[i]) == 0 {
			seg, err := w.writeArray(encodeVec(allNull(f, 0).materialize(), w.flags))
			if err != nil {
				return err
			}
			w.chunks[i] = append(w.chunks[i], chunkRef{rows: 0, seg: seg})
		}
	}
	// Zone tables go after all the data segments (the segment map is in
	// file order).
	zoneSegs := make([]int64, len(w.dtype.Fields))
	zoneRows := make([]uint64, len(w.dtype.Fields))
	layoutIDs := []string{"vortex.flat", "vortex.chunked", "vortex.struct"}
	for i, f := range w.dtype.Fields {
		zoneSegs[i] = -1
		if z := w.zones[i]; z != nil && w.rows > 0 {
			t := z.table(f)
			seg, err := w.writeArray(encodeVec(t, w.flags))
			if err != nil {
				return fmt.Errorf("column %q zone map: %w", w.dtype.Names[i], err)
			}
			zoneSegs[i], zoneRows[i] = int64(seg), uint64(t.n)
			if len(layoutIDs) == 3 {
				layoutIDs = append(layoutIDs, "vortex.zoned")
			}
		}
	}
	segs := []struct {
		b []byte
	}{{buildDTypeFB(w.dtype)}, {w.buildLayoutFB(zoneSegs, zoneRows)}, {w.buildFooterFB(layoutIDs)}}
	var pos [3]uint64
	for i, s := range segs {
		pos[i] = w.off
		if _, err := w.out.Write(s.b); err != nil {
			return err
		}
		w.off += uint64(len(s.b))
	}
	fb := flatbuffers.NewBuilder(128)
	psSeg := func(off uint64, n int) flatbuffers.UOffsetT {
		fb.StartObject(5)
		fb.PrependUint64Slot(0, off, 0)
		fb.PrependUint32Slot(1, uint32(n), 0)
		fb.PrependUint8Slot(2, 0, 0)
		return fb.EndObject()
	}
	d := psSeg(pos[0], len(segs[0].b))
	l := psSeg(pos[1], len(segs[1].b))
	f := psSeg(pos[2], len(segs[2].b))
	fb.StartObject(5)
	fb.PrependUOffsetTSlot(0, d, 0)
	fb.PrependUOffsetTSlot(1, l, 0)
	fb.PrependUOffsetTSlot(3, f, 0)
	fb.Finish(fb.EndObject())
	ps := fb.FinishedBytes()
	if len(ps) > maxPostscript {
		return fmt.Errorf("vortexio: postscript too large")
	}
	w.out.Write(ps)
	var tr [8]byte
	binary.LittleEndian.PutUint16(tr[0:], fileVersion)
	binary.LittleEndian.PutUint16(tr[2:], uint16(len(ps)))
	copy(tr[4:], magic)
	if _, err := w.out.Write(tr[:]); err != nil {
		return err
	}
	return w.out.Flush()
}

// buildLayoutFB writes the layout tree: struct → per column chunked →
// flat, and, for a column with a zone table (zoneSegs[i] >= 0, of
// zoneRows[i] rows), zoned → [that, flat zone table].
func (w *Writer) buildLayoutFB(zoneSegs []int64, zoneRows []uint64) []byte {
	fb := flatbuffers.NewBuilder(1024)
	var meta []byte
	layout := func(enc uint16, rows uint64, kids []flatbuffers.UOffsetT, seg int64) flatbuffers.UOffsetT {
		var kv, sv, mv flatbuffers.UOffsetT
		if len(meta) > 0 {
			mv = fb.CreateByteVector(meta)
		}
		if len(kids) > 0 {
			kv = offsetVector(fb, kids)
		}
		if seg >= 0 {
			fb.StartVector(4, 1, 4)
			fb.PrependUint32(uint32(seg))
			sv = fb.EndVector(1)
		}
		fb.StartObject(5)
		fb.PrependUint16Slot(0, enc, 0)
		fb.PrependUint64Slot(1, rows, 0)
		if mv != 0 {
			fb.PrependUOffsetTSlot(2, mv, 0)
		}
		if kv != 0 {
			fb.PrependUOffsetTSlot(3, kv, 0)
		}
		if sv != 0 {
			fb.PrependUOffsetTSlot(4, sv, 0)
		}
		return fb.EndObject()
	}
	cols := make([]flatbuffers.UOffsetT, len(w.chunks))
	for i, cs := range w.chunks {
		flats := make([]flatbuffers.UOffsetT, len(cs))
		for k, c := range cs {
			flats[k] = layout(0, c.rows, nil, int64(c.seg))
		}
		if len(flats) == 1 {
			cols[i] = flats[0]
		} else {
			cols[i] = layout(1, w.rows, flats, -1)
		}
		if zoneSegs[i] >= 0 {
			zt := layout(0, zoneRows[i], nil, zoneSegs[i])
			meta = zonedMetadata(w.opts.ZoneRows)
			cols[i] = layout(3, w.rows, []flatbuffers.UOffsetT{cols[i], zt}, -1)
			meta = nil
		}
	}
	fb.Finish(layout(2, w.rows, cols, -1))
	return fb.FinishedBytes()
}

func (w *Writer) buildFooterFB(layoutIDs []string) []byte {
	fb := flatbuffers.NewBuilder(1024)
	specs := func(ids []string) flatbuffers.UOffsetT {
		offs := make([]flatbuffers.UOffsetT, len(ids))
		for i, id := range ids {
			s := fb.CreateString(id)
			fb.StartObject(1)
			fb.PrependUOffsetTSlot(0, s, 0)
			offs[i] = fb.EndObject()
		}
		return offsetVector(fb, offs)
	}
	av := specs(w.arrayIDs)
	lv := specs(layoutIDs)
	fb.StartVector(16, len(w.segs), 8)
	for i := len(w.segs) - 1; i >= 0; i-- {
		s := w.segs[i]
		fb.Prep(8, 16)
		fb.PrependUint16(0)
		fb.PrependUint8(0)
		fb.PrependUint8(s.alignExp)
		fb.PrependUint32(s.length)
		fb.PrependUint64(s.offset)
	}
	sv := fb.EndVector(len(w.segs))
	fb.StartObject(5)
	fb.PrependUOffsetTSlot(0, av, 0)
	fb.PrependUOffsetTSlot(1, lv, 0)
	fb.PrependUOffsetTSlot(2, sv, 0)
	fb.Finish(fb.EndObject())
	return fb.FinishedBytes()
}

func buildDTypeFB(d *DType) []byte {
	fb := flatbuffers.NewBuilder(512)
	fb.Finish(dtypeFB(fb, d))
	return fb.FinishedBytes()
}

func dtypeFB(fb *flatbuffers.Builder, d *DType) flatbuffers.UOffsetT {
	var body flatbuffers.UOffsetT
	switch d.Kind {
	case KindNull:
		fb.StartObject(0)
		body = fb.EndObject()
	case KindBool, KindUtf8, KindBinary:
		fb.StartObject(1)
		fb.PrependBoolSlot(0, d.Nullable, false)
		body = fb.EndObject()
	case KindPrimitive:
		fb.StartObject(2)
		fb.PrependUint8Slot(0, uint8(d.PType), 0)
		fb.PrependBoolSlot(1, d.Nullable, false)
		body = fb.EndObject()
	case KindStruct:
		names := make([]flatbuffers.UOffsetT, len(d.Names))
		for i, n := range d.Names {
			names[i] = fb.CreateString(n)
		}
		nv := offsetVector(fb, names)
		fields := make([]flatbuffers.UOffsetT, len(d.Fields))
		for i, f := range d.Fields {
			fields[i] = dtypeFB(fb, f)
		}
		fv := offsetVector(fb, fields)
		fb.StartObject(3)
		fb.PrependUOffsetTSlot(0, nv, 0)
		fb.PrependUOffsetTSlot(1, fv, 0)
		fb.PrependBoolSlot(2, d.Nullable, false)
		body = fb.EndObject()
	case KindExtension:
		id := fb.CreateString(d.ExtID)
		st := dtypeFB(fb, d.Storage)
		meta := fb.CreateByteVector(d.ExtMeta) // must be present, even if empty
		fb.StartObject(3)
		fb.PrependUOffsetTSlot(0, id, 0)
		fb.PrependUOffsetTSlot(1, st, 0)
		fb.PrependUOffsetTSlot(2, meta, 0)
		body = fb.EndObject()
	}
	fb.StartObject(2)
	fb.PrependUint8Slot(0, uint8(d.Kind), 0)
	fb.PrependUOffsetTSlot(1, body, 0)
	return fb.EndObject()
}
