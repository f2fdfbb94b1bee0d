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
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/delta"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// replayed is what a replay read from the log.
type replayed struct {
	st      *delta.State
	records int
	rows    int64
	end     wal.Position // after the last record replayed (zero: none)
}

// replay reads the records after folded and builds the delta they make
// over base as one bulk load (delta.Bulk): at start-up nothing reads the
// delta and nothing compacts it, so the records need not be applied one
// write at a time. The log hands out its segments' records from memory;
// they are decoded on every core without copying their buffers, and a
// record that does not decode, or does not have the dataset's write
// schema, stops the replay naming its position.
//
// Records were checked (Normalize) before they were logged, so the checks
// a write gets are not run again: a record holds a write as it was
// accepted, and Bulk gives each key the row of the latest record, as
// applying them in log order does.
func replay(ctx context.Context, l *wal.WAL, mem memory.Allocator, s *delta.Schema, folded uint64, base delta.Base) (replayed, error) {
	var out replayed
	var payloads [][]byte
	var ends []wal.Position
	err := l.Replay(wal.PositionFromUint64(folded), func(pos wal.Position, payload []byte) error {
		payloads = append(payloads, payload) // Replay never reuses the buffer
		ends = append(ends, pos)
		return nil
	})
	if err != nil {
		return out, err
	}
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
				recs[i], errs[i] = decodeRecord(payloads[i], s.Write)
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
	out.st, err = delta.Bulk(ctx, mem, s, recs, uint64(out.records), out.end.Uint64(), base)
	if err != nil {
		return out, fmt.Errorf("records through %s: %w", out.end, err)
	}
	return out, nil
}

// decodeRecord reads a WAL payload, one Arrow IPC stream of one record
// batch, whose buffers alias the payload (the bulk load copies the rows it
// keeps), and checks it holds a write of the dataset's schema with sound
// buffers: a record that passed its checksum but does not decode must stop
// the replay, not a later step.
func decodeRecord(payload []byte, want *arrow.Schema) (rec arrow.RecordBatch, err error) {
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
	if !r.Schema().Equal(want) {
		return nil, fmt.Errorf("record has columns %v, the dataset's writes %v: the snapshot's schema changed under a live delta", r.Schema(), want)
	}
	if !r.Next() {
		if err := r.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("no record batch")
	}
	rec = r.RecordBatch()
	rec.Retain()
	for c, col := range rec.Columns() {
		if v, ok := col.(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				rec.Release()
				return nil, fmt.Errorf("column %s: %w", want.Field(c).Name, err)
			}
		}
	}
	return rec, nil
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

func (m *sliceMessages) Retain() { m.refs.Add(1) }

func (m *sliceMessages) Release() {
	if m.refs.Add(-1) == 0 && m.msg != nil {
		m.msg.Release()
		m.msg = nil
	}
}
