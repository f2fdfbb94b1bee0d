// Package flightenc encodes the record batches of flat answer schemas as
// Arrow IPC stream messages for Flight (the flatbuffer Message a
// FlightData carries as data_header, and its body), without a per-stream
// IPC writer: the schema message is encoded once per schema and cached,
// record batch and dictionary batch headers are written with one reused
// flatbuffers builder, and the body is assembled in one reused buffer
// straight from the arrays' buffers (8-byte aligned, as the IPC format
// requires).
//
// Flat means: every field is a fixed-width primitive (integers, floats,
// dates, times, timestamps, durations, decimals, fixed-size binary), a
// bool, a utf8 or binary (32- or 64-bit offsets), or a dictionary of one of
// those with an integer index. Anything else (nested types, extensions,
// views, nested dictionaries) is not flat: Flat says so, and the caller
// uses arrow-go's ipc.Writer for it.
//
// The messages follow the IPC specification (format/Message.fbs,
// format/Schema.fbs; metadata version V5): a Message table whose header is
// a RecordBatch { length, nodes: [FieldNode], buffers: [Buffer] } or a
// DictionaryBatch { id, data: RecordBatch, isDelta }. Dictionary ids are
// the positions of the dictionary fields among the schema's dictionary
// fields, in field order, as arrow-go's schema encoding numbers them.
package flightenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// Message header types and the metadata version (format/Message.fbs,
// format/Schema.fbs).
const (
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
	metadataV5            = 4
)

// alignment is the IPC body's buffer alignment.
const alignment = 8

// Sink receives each encoded message: header is the flatbuffer Message,
// body its body. Both are valid only during the call.
type Sink interface {
	SendMessage(header, body []byte) error
}

// ErrSchema is returned by Write for a batch whose schema is not the
// stream's.
var ErrSchema = errors.New("flightenc: record batch schema differs from the stream's schema")

// Writer encodes one stream's messages: the schema message before the
// first batch (or at Close when there is none), then per batch the
// dictionary batches whose dictionaries changed (a delta when the new
// dictionary extends the last one sent, a replacement otherwise) and the
// record batch. A Writer is reused across streams through Reset, so its
// builder and buffers are allocated once; it is not safe for concurrent
// use.
type Writer struct {
	sink    Sink
	schema  *arrow.Schema
	enc     *encodedSchema
	started bool
	err     error

	// last dictionaries sent, by dictionary id (retained)
	dicts []arrow.ArrayData

	fb      *flatbuffers.Builder
	body    []byte
	nodes   []fieldNode
	buffers []bufferSpan
}

type fieldNode struct{ length, nulls int64 }
type bufferSpan struct{ offset, length int64 }

// maxKeptBody is the largest body buffer a Writer keeps for its next
// stream: a large answer's buffer is left to the GC.
const maxKeptBody = 4 << 20

// Reset readies w for a new stream of schema, which must be Flat, sending
// to sink. It ends whatever stream w was writing without sending
// anything more.
func (w *Writer) Reset(sink Sink, schema *arrow.Schema) error {
	w.releaseDicts()
	enc, err := encode(schema)
	if err != nil {
		return err
	}
	if !enc.flat {
		return fmt.Errorf("flightenc: schema is not flat: %s", enc.why)
	}
	w.sink, w.schema, w.enc, w.started, w.err = sink, schema, enc, false, nil
	if w.fb == nil {
		w.fb = flatbuffers.NewBuilder(512)
	}
	if cap(w.body) > maxKeptBody {
		w.body = nil
	}
	w.dicts = w.dicts[:0]
	for range enc.dictFields {
		w.dicts = append(w.dicts, nil)
	}
	return nil
}

func (w *Writer) releaseDicts() {
	for i, d := range w.dicts {
		if d != nil {
			d.Release()
			w.dicts[i] = nil
		}
	}
}

// start sends the schema message once.
func (w *Writer) start() error {
	if w.started {
		return nil
	}
	w.started = true
	return w.sink.SendMessage(w.enc.header, nil)
}

// Write sends rec's changed dictionaries and rec. After an error every
// later call returns it.
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	if w.err = w.write(rec); w.err != nil {
		return w.err
	}
	return nil
}

func (w *Writer) write(rec arrow.RecordBatch) error {
	if s := rec.Schema(); s != w.schema && !s.Equal(w.schema) {
		return ErrSchema
	}
	if err := w.start(); err != nil {
		return err
	}
	for id, pos := range w.enc.dictFields {
		if err := w.writeDictionary(int64(id), rec.Column(pos).Data().Dictionary()); err != nil {
			return err
		}
	}
	w.beginBody()
	for i := range int(rec.NumCols()) {
		if err := w.appendArray(rec.Column(i).Data()); err != nil {
			return fmt.Errorf("column %q: %w", w.schema.Field(i).Name, err)
		}
	}
	return w.send(headerRecordBatch, rec.NumRows(), -1, false)
}

// writeDictionary sends dictionary id's batch when d differs from the last
// one sent: a delta of the new entries when d extends it, else the whole
// of d (a replacement, or the first).
func (w *Writer) writeDictionary(id int64, d arrow.ArrayData) error {
	if d == nil {
		return fmt.Errorf("dictionary %d: a dictionary column without a dictionary", id)
	}
	last := w.dicts[id]
	deltaFrom := 0
	if last != nil {
		if last == d {
			return nil
		}
		lastArr, newArr := array.MakeFromData(last), array.MakeFromData(d)
		defer lastArr.Release()
		defer newArr.Release()
		eq := array.WithNaNsEqual(true)
		n, m := int64(last.Len()), int64(d.Len())
		switch {
		case n == m && array.ApproxEqual(lastArr, newArr, eq):
			return nil
		case m > n && array.SliceApproxEqual(lastArr, 0, n, newArr, 0, n, eq):
			deltaFrom = int(n)
		}
	}
	w.beginBody()
	length := d.Len()
	if deltaFrom > 0 {
		part := array.NewSliceData(d, int64(deltaFrom), int64(length))
		err := w.appendArray(part)
		part.Release()
		if err != nil {
			return fmt.Errorf("dictionary %d: %w", id, err)
		}
		length -= deltaFrom
	} else if err := w.appendArray(d); err != nil {
		return fmt.Errorf("dictionary %d: %w", id, err)
	}
	if err := w.send(headerDictionaryBatch, int64(length), id, deltaFrom > 0); err != nil {
		return err
	}
	d.Retain()
	if last != nil {
		last.Release()
	}
	w.dicts[id] = d
	return nil
}

// Close ends the stream: a stream without batches still sends its schema.
// It releases the dictionaries w holds; the sink is not closed.
func (w *Writer) Close() error {
	defer w.releaseDicts()
	if w.err != nil {
		return w.err
	}
	return w.start()
}

func (w *Writer) beginBody() {
	w.body = w.body[:0]
	w.nodes = w.nodes[:0]
	w.buffers = w.buffers[:0]
}

// appendBytes appends one body buffer, padded to the alignment.
func (w *Writer) appendBytes(b []byte) {
	off := len(w.body)
	w.body = append(w.body, b...)
	w.pad()
	w.buffers = append(w.buffers, bufferSpan{int64(off), int64(len(b))})
}

// grow extends the body by n bytes and returns them (their content is
// to be written by the caller), recording them as one buffer.
func (w *Writer) grow(n int) []byte {
	off := len(w.body)
	w.body = slices.Grow(w.body, n)[:off+n]
	out := w.body[off : off+n]
	clear(out)
	w.pad()
	w.buffers = append(w.buffers, bufferSpan{int64(off), int64(n)})
	return out
}

func (w *Writer) pad() {
	for len(w.body)%alignment != 0 {
		w.body = append(w.body, 0)
	}
}

// appendBitmap appends length bits of bm from bit offset off.
func (w *Writer) appendBitmap(bm []byte, off, length int) error {
	if length > 0 && len(bm)*8 < off+length {
		return fmt.Errorf("bitmap of %d bytes for %d bits from %d", len(bm), length, off)
	}
	if off%8 == 0 {
		w.appendBytes(bm[off/8 : off/8+int(bitutil.BytesForBits(int64(length)))])
		return nil
	}
	dst := w.grow(int(bitutil.BytesForBits(int64(length))))
	bitutil.CopyBitmap(bm, off, length, dst, 0)
	return nil
}

// appendArray appends one flat array's field node and buffers.
func (w *Writer) appendArray(d arrow.ArrayData) error {
	n, off := d.Len(), d.Offset()
	nulls := d.NullN()
	w.nodes = append(w.nodes, fieldNode{int64(n), int64(nulls)})
	bufs := d.Buffers()
	if nulls == 0 || len(bufs) == 0 || bufs[0] == nil {
		if nulls != 0 {
			return fmt.Errorf("%d nulls without a validity bitmap", nulls)
		}
		w.buffers = append(w.buffers, bufferSpan{int64(len(w.body)), 0})
	} else if err := w.appendBitmap(bufs[0].Bytes(), off, n); err != nil {
		return fmt.Errorf("validity: %w", err)
	}
	dt := d.DataType()
	if dd, ok := dt.(*arrow.DictionaryType); ok {
		dt = dd.IndexType
	}
	if len(bufs) < 2 {
		return fmt.Errorf("%s array with %d buffers", dt, len(bufs))
	}
	switch dt.ID() {
	case arrow.BOOL:
		return w.appendBitmap(bufferBytes(bufs[1]), off, n)
	case arrow.STRING, arrow.BINARY:
		return appendVarWidth[int32](w, bufs, off, n)
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return appendVarWidth[int64](w, bufs, off, n)
	}
	fw, ok := dt.(arrow.FixedWidthDataType)
	if !ok || fw.BitWidth()%8 != 0 {
		return fmt.Errorf("type %s is not flat", dt)
	}
	width := fw.BitWidth() / 8
	vals := bufferBytes(bufs[1])
	if len(vals) < (off+n)*width {
		return fmt.Errorf("%s values buffer of %d bytes for %d values from %d", dt, len(vals), n, off)
	}
	w.appendBytes(vals[off*width : (off+n)*width])
	return nil
}

// appendVarWidth appends the offsets (rebased to start at 0) and the
// value bytes of n utf8 or binary values from off.
func appendVarWidth[T int32 | int64](w *Writer, bufs []*memory.Buffer, off, n int) error {
	if len(bufs) < 3 {
		return fmt.Errorf("binary array with %d buffers", len(bufs))
	}
	size := int(unsafe.Sizeof(T(0)))
	raw := bufferBytes(bufs[1])
	if n == 0 {
		w.grow(size) // one zero offset
		w.appendBytes(nil)
		return nil
	}
	if len(raw) < (off+n+1)*size {
		return fmt.Errorf("offsets buffer of %d bytes for %d values from %d", len(raw), n, off)
	}
	offs := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)/size)[off : off+n+1]
	first, last := offs[0], offs[n]
	data := bufferBytes(bufs[2])
	if first < 0 || last < first || int64(last) > int64(len(data)) {
		return fmt.Errorf("offsets [%d, %d] outside a data buffer of %d bytes", first, last, len(data))
	}
	if first == 0 {
		w.appendBytes(raw[off*size : (off+n+1)*size])
	} else {
		dst := w.grow((n + 1) * size)
		for i, o := range offs {
			if size == 4 {
				binary.LittleEndian.PutUint32(dst[i*4:], uint32(o-first))
			} else {
				binary.LittleEndian.PutUint64(dst[i*8:], uint64(o-first))
			}
		}
	}
	w.appendBytes(data[first:last])
	return nil
}

// send encodes the header of the body assembled since beginBody (a record
// batch of length rows, or with id >= 0 a dictionary batch) and passes
// both to the sink.
func (w *Writer) send(kind byte, length, id int64, delta bool) error {
	b := w.fb
	b.Reset()
	b.StartVector(16, len(w.buffers), 8)
	for i := len(w.buffers) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(w.buffers[i].length)
		b.PrependInt64(w.buffers[i].offset)
	}
	buffers := b.EndVector(len(w.buffers))
	b.StartVector(16, len(w.nodes), 8)
	for i := len(w.nodes) - 1; i >= 0; i-- {
		b.Prep(8, 16)
		b.PrependInt64(w.nodes[i].nulls)
		b.PrependInt64(w.nodes[i].length)
	}
	nodes := b.EndVector(len(w.nodes))
	b.StartObject(5) // RecordBatch
	b.PrependInt64Slot(0, length, 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, buffers, 0)
	header := b.EndObject()
	if kind == headerDictionaryBatch {
		b.StartObject(3) // DictionaryBatch
		b.PrependInt64Slot(0, id, 0)
		b.PrependUOffsetTSlot(1, header, 0)
		b.PrependBoolSlot(2, delta, false)
		header = b.EndObject()
	}
	b.StartObject(5) // Message
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, kind, 0)
	b.PrependUOffsetTSlot(2, header, 0)
	b.PrependInt64Slot(3, int64(len(w.body)), 0)
	b.Finish(b.EndObject())
	return w.sink.SendMessage(b.FinishedBytes(), w.body)
}

// bufferBytes is b's bytes; nil for a nil buffer.
func bufferBytes(b *memory.Buffer) []byte {
	if b == nil {
		return nil
	}
	return b.Bytes()
}
