package live

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// replayed is what a replay read from the log.
type replayed struct {
	st      *livedelta.State
	records int
	rows    int64
	end     wal.Position // after the last record replayed (zero: none)
}

// replay reads the records after folded (through through, when not zero)
// and builds the delta they make over base as one bulk load (livedelta.Bulk),
// its run numbered seq (zero: the number of records): at start-up nothing
// reads the delta and nothing compacts it, so the records need not be
// applied one write at a time. The log hands out its segments' records from memory;
// they are decoded on every core without copying their buffers, and a
// record that does not decode, or does not have the dataset's write
// schema, stops the replay naming its position.
//
// Records were checked (Normalize) before they were logged; replay checks
// again what a record holds on its own (livedelta.CheckWrite), since a valid
// checksum does not prove a sound writer, but not what needed the dataset
// of that moment (attributes against the base). Bulk gives each key the
// row of the latest record, as applying them in log order does.
func replay(ctx context.Context, l *wal.WAL, mem memory.Allocator, s *livedelta.Schema, folded, through, seq uint64, base livedelta.Base) (replayed, error) {
	var out replayed
	var payloads [][]byte
	var ends []wal.Position
	err := l.ReplayRetained(wal.PositionFromUint64(folded), func(pos wal.Position, payload []byte) error {
		if through != 0 && pos.Uint64() > through {
			return errReplayed
		}
		payloads = append(payloads, payload)
		ends = append(ends, pos)
		return nil
	})
	if err != nil && err != errReplayed {
		return out, err
	}
	return bulkLoad(ctx, mem, s, payloads, ends, seq, base)
}

// errReplayed stops a replay at its bound.
var errReplayed = errors.New("replayed through the bound")

// bulkLoad decodes the payloads (records at positions ends) on every core
// and builds the delta they make over base in one bulk load.
func bulkLoad(ctx context.Context, mem memory.Allocator, s *livedelta.Schema, payloads [][]byte, ends []wal.Position, seq uint64, base livedelta.Base) (replayed, error) {
	var out replayed
	recs := make([]arrow.RecordBatch, len(payloads))
	errs := make([]error, len(payloads))
	defer func() {
		for _, r := range recs {
			if r != nil {
				r.Release()
			}
		}
	}()
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(1, len(payloads))) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(payloads) {
					return
				}
				recs[i], errs[i] = decodeRecord(payloads[i], s)
				if errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			// The first damaged record in log order; records after it
			// may not have been decoded.
			return out, fmt.Errorf("record at %s: %w", ends[i], err)
		}
	}
	for _, r := range recs {
		out.rows += r.NumRows()
	}
	out.records = len(recs)
	if len(ends) > 0 {
		out.end = ends[len(ends)-1]
	}
	// One sequence number per record, as incremental applies use: the
	// writes after the replay continue after them.
	if seq == 0 {
		seq = uint64(out.records)
	}
	var err error
	out.st, err = livedelta.Bulk(ctx, mem, s, recs, seq, out.end.Uint64(), base)
	if err != nil {
		return out, fmt.Errorf("records through %s: %w", out.end, err)
	}
	return out, nil
}

// decodeRecord reads a WAL payload, one Arrow IPC stream of one record
// batch, whose buffers alias the payload (the bulk load copies the rows it
// keeps), and checks it holds a write of the dataset's schema with sound
// buffers and the values DoPut accepts (livedelta.CheckWrite): a record that
// passed its checksum but does not decode, or holds what no DoPut could
// have written, must stop the replay, not be served and compacted.
func decodeRecord(payload []byte, s *livedelta.Schema) (rec arrow.RecordBatch, err error) {
	rec, err = decodeStructure(payload, s.Write)
	if err != nil {
		return nil, err
	}
	if err := livedelta.CheckWrite(s, rec); err != nil {
		rec.Release()
		return nil, err
	}
	return rec, nil
}

// decodeStructure is decodeRecord without the checks of the values.
func decodeStructure(payload []byte, want *arrow.Schema) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			if rec != nil {
				rec.Release()
			}
			rec, err = nil, fmt.Errorf("undecodable record: %v", p)
		}
	}()
	mr := &sliceMessages{b: payload}
	mr.refs.Store(1)
	r, err := ipc.NewReaderFromMessageReader(mr)
	mr.Release() // the reader holds it
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("no record batch")
	}
	rec = r.RecordBatch()
	for c, col := range rec.Columns() {
		if err := checkBuffers(col, rec.NumRows()); err != nil {
			return nil, fmt.Errorf("column %s: %w", rec.Schema().Field(c).Name, err)
		}
	}
	if rec.Schema().Equal(want) {
		rec.Retain()
		return rec, nil
	}
	return project(rec, want)
}

// project carries a record logged under other columns over to the
// dataset's write schema want (a lake build changed the snapshot's columns
// under a live delta): a column want has and the record lacks is null in
// every row; a column the record has and want lacks is dropped when it
// holds no value, and refused otherwise (its values would silently stop
// being served); a column whose type changed is refused. The builder
// refuses a snapshot that would need a refusal here while live writes
// exist (docs/OPERATIONS.md "Live writes and a lake build").
func project(rec arrow.RecordBatch, want *arrow.Schema) (arrow.RecordBatch, error) {
	have := rec.Schema()
	cols := make([]arrow.Array, want.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range want.Fields() {
		j := have.FieldIndices(f.Name)
		if len(j) == 0 {
			if !f.Nullable {
				return nil, fmt.Errorf("record lacks column %q, which the dataset's writes need", f.Name)
			}
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rec.NumRows()))
			continue
		}
		if got := have.Field(j[0]).Type; !arrow.TypeEqual(got, f.Type) {
			return nil, fmt.Errorf("record has column %q as %s, the dataset's writes as %s: the snapshot's columns changed under a live delta", f.Name, got, f.Type)
		}
		cols[i] = rec.Column(j[0])
		cols[i].Retain()
	}
	for j, f := range have.Fields() {
		if want.HasField(f.Name) {
			continue
		}
		if c := rec.Column(j); c.NullN() < c.Len() {
			return nil, fmt.Errorf("record has %d values of column %q, which the snapshot no longer has: the snapshot's columns changed under a live delta", c.Len()-c.NullN(), f.Name)
		}
	}
	return array.NewRecordBatch(want, cols, rec.NumRows()), nil
}

// checkBuffers checks that a decoded column's buffers hold its rows: the
// IPC reader takes buffer sizes and offsets from the record as written,
// and the bulk load indexes them without bounds it could trust. (UTF-8 is
// livedelta.CheckWrite's, for the series ids.)
func checkBuffers(col arrow.Array, rows int64) error {
	d := col.Data()
	n, off := int64(d.Len()), int64(d.Offset())
	if n != rows {
		return fmt.Errorf("%d values in a record of %d rows", n, rows)
	}
	bufs := d.Buffers()
	bytes := func(i int) int64 {
		if i >= len(bufs) || bufs[i] == nil {
			return 0
		}
		return int64(bufs[i].Len())
	}
	if col.NullN() > 0 && bytes(0)*8 < off+n {
		return fmt.Errorf("validity bitmap of %d bytes for %d values", bytes(0), off+n)
	}
	switch dt := col.DataType().(type) {
	case *arrow.BooleanType:
		if bytes(1)*8 < off+n {
			return fmt.Errorf("bitmap of %d bytes for %d values", bytes(1), off+n)
		}
	case *arrow.StringType, *arrow.BinaryType:
		if n == 0 {
			return nil
		}
		if bytes(1) < 4*(off+n+1) {
			return fmt.Errorf("%d bytes of offsets for %d values", bytes(1), off+n)
		}
		o := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[off : off+n+1]
		if o[0] < 0 || int64(o[n]) > bytes(2) {
			return fmt.Errorf("offsets %d to %d out of %d bytes", o[0], o[n], bytes(2))
		}
		for i := int64(1); i <= n; i++ {
			if o[i] < o[i-1] {
				return fmt.Errorf("offsets decrease at value %d", i-1)
			}
		}
	case arrow.FixedWidthDataType:
		if w := int64(dt.BitWidth()); w%8 == 0 && bytes(1) < w/8*(off+n) {
			return fmt.Errorf("%d bytes for %d values of %d bytes", bytes(1), off+n, w/8)
		}
	}
	return nil
}

// sliceMessages reads the messages of an IPC stream held in memory, each
// message's metadata and body aliasing the bytes (ipc.NewMessageReader
// copies every body into a fresh buffer). A body that is not 8-byte
// aligned, which Arrow's readers assume, is copied.
type sliceMessages struct {
	b    []byte
	msg  *ipc.Message
	refs atomic.Int64
}

// ipcContinuation marks a message whose length follows (the stream
// format since Arrow 0.15; older streams start with the length).
const ipcContinuation = 0xFFFFFFFF

func (m *sliceMessages) Message() (*ipc.Message, error) {
	if m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
	b := m.b
	if len(b) < 4 {
		return nil, fmt.Errorf("arrow/ipc: stream cut short: %w", io.ErrUnexpectedEOF)
	}
	length, at := int64(binary.LittleEndian.Uint32(b)), 4
	switch length {
	case 0:
		return nil, io.EOF
	case ipcContinuation:
		if len(b) < 8 {
			return nil, fmt.Errorf("arrow/ipc: stream cut short: %w", io.ErrUnexpectedEOF)
		}
		length, at = int64(int32(binary.LittleEndian.Uint32(b[4:]))), 8
		if length == 0 {
			return nil, io.EOF
		}
	default:
		length = int64(int32(length))
	}
	if length < 4 || length > int64(len(b)-at) {
		return nil, fmt.Errorf("arrow/ipc: message metadata of %d bytes in %d", length, len(b)-at)
	}
	if err := checkSchemaMessage(b[at : at+int(length)]); err != nil {
		return nil, err
	}
	meta := memory.NewBufferBytes(b[at : at+int(length)])
	rest := b[at+int(length):]
	probe := ipc.NewMessage(meta, memory.NewBufferBytes(nil))
	bodyLen := probe.BodyLen()
	probe.Release()
	if bodyLen < 0 || bodyLen > int64(len(rest)) {
		return nil, fmt.Errorf("arrow/ipc: message body of %d bytes in %d", bodyLen, len(rest))
	}
	body := rest[:bodyLen]
	if bodyLen > 0 && uintptr(unsafe.Pointer(&body[0]))%8 != 0 {
		body = append(make([]byte, 0, bodyLen), body...)
	}
	m.b = rest[bodyLen:]
	m.msg = ipc.NewMessage(meta, memory.NewBufferBytes(body))
	return m.msg, nil
}

// checkSchemaMessage bounds the lists a schema message claims to hold:
// the IPC reader allocates as many fields (children, metadata entries) as
// a list's length says, so a damaged length must not reach it. A list
// can hold no more entries than its message has 4-byte words.
func checkSchemaMessage(meta []byte) error {
	if len(meta) < 4 {
		return fmt.Errorf("arrow/ipc: message metadata of %d bytes", len(meta))
	}
	const (
		msgHeaderType, msgHeader, msgMetadata = 6, 8, 12 // Message's vtable slots
		schemaFields, schemaMetadata          = 6, 8
		fieldChildren, fieldMetadata          = 14, 16
		headerSchema                          = 1 // MessageHeader.Schema
	)
	limit := len(meta) / 4
	seen := 0
	vector := func(t *flatbuffers.Table, slot flatbuffers.VOffsetT) (flatbuffers.UOffsetT, int, error) {
		o := flatbuffers.UOffsetT(t.Offset(slot))
		if o == 0 {
			return 0, 0, nil
		}
		n := t.VectorLen(o)
		if seen += n; n < 0 || seen > limit {
			return 0, 0, fmt.Errorf("arrow/ipc: schema message claims %d entries in %d bytes", n, len(meta))
		}
		return t.Vector(o), n, nil
	}
	root := flatbuffers.Table{Bytes: meta, Pos: flatbuffers.GetUOffsetT(meta)}
	if _, _, err := vector(&root, msgMetadata); err != nil {
		return err
	}
	if o := root.Offset(msgHeaderType); o == 0 || root.GetByte(flatbuffers.UOffsetT(o)+root.Pos) != headerSchema {
		return nil
	}
	var schema flatbuffers.Table
	o := root.Offset(msgHeader)
	if o == 0 {
		return nil
	}
	root.Union(&schema, flatbuffers.UOffsetT(o))
	if _, _, err := vector(&schema, schemaMetadata); err != nil {
		return err
	}
	var fields func(t *flatbuffers.Table, slot flatbuffers.VOffsetT, depth int) error
	fields = func(t *flatbuffers.Table, slot flatbuffers.VOffsetT, depth int) error {
		if depth > 64 {
			return errors.New("arrow/ipc: schema nested more than 64 levels")
		}
		at, n, err := vector(t, slot)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			f := flatbuffers.Table{Bytes: meta, Pos: t.Indirect(at + flatbuffers.UOffsetT(i)*4)}
			if _, _, err := vector(&f, fieldMetadata); err != nil {
				return err
			}
			if err := fields(&f, fieldChildren, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fields(&schema, schemaFields, 0)
}

func (m *sliceMessages) Retain() { m.refs.Add(1) }

func (m *sliceMessages) Release() {
	if m.refs.Add(-1) == 0 && m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}
