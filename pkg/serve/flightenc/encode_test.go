package flightenc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	flatbuffers "github.com/google/flatbuffers/go"
)

// collector is a Sink keeping every message as an IPC stream (each
// message framed as the stream format frames it), so arrow-go's stream
// reader can decode what a Flight client would.
type collector struct {
	buf   bytes.Buffer
	kinds []string
}

func (c *collector) SendMessage(header, body []byte) error {
	padded := (len(header) + 7) &^ 7
	var pre [8]byte
	binary.LittleEndian.PutUint32(pre[:4], 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(pre[4:], uint32(padded))
	c.buf.Write(pre[:])
	c.buf.Write(header)
	c.buf.Write(make([]byte, padded-len(header)))
	c.buf.Write(body)
	c.kinds = append(c.kinds, describe(header))
	if len(body)%alignment != 0 {
		return fmt.Errorf("%s: body of %d bytes is not a multiple of %d", describe(header), len(body), alignment)
	}
	return nil
}

// payloadCollector is the same for arrow-go's ipc.Writer.
type payloadCollector struct{ collector }

func (p *payloadCollector) Start() error { return nil }
func (p *payloadCollector) Close() error { return nil }
func (p *payloadCollector) WritePayload(pl ipc.Payload) error {
	m := pl.Meta()
	defer m.Release()
	var body bytes.Buffer
	if err := pl.SerializeBody(&body); err != nil {
		return err
	}
	return p.SendMessage(m.Bytes(), body.Bytes())
}

// describe names a message from its flatbuffer header: its type, and
// for dictionary batches whether it is a delta (Message.fbs: Message field
// 1 header_type, field 2 header; DictionaryBatch field 2 isDelta).
func describe(header []byte) string {
	var msg flatbuffers.Table
	msg.Bytes, msg.Pos = header, flatbuffers.GetUOffsetT(header)
	kind := byte(0)
	if o := flatbuffers.UOffsetT(msg.Offset(6)); o != 0 {
		kind = msg.GetByte(o + msg.Pos)
	}
	switch kind {
	case 1:
		return "Schema"
	case headerRecordBatch:
		return "RecordBatch"
	case headerDictionaryBatch:
		o := flatbuffers.UOffsetT(msg.Offset(8))
		var hdr flatbuffers.Table
		hdr.Bytes, hdr.Pos = header, msg.Indirect(o+msg.Pos)
		delta := false
		if o := flatbuffers.UOffsetT(hdr.Offset(8)); o != 0 {
			delta = hdr.GetBool(o + hdr.Pos)
		}
		return fmt.Sprintf("DictionaryBatch(delta=%v)", delta)
	}
	return fmt.Sprintf("message type %d", kind)
}

// decode reads a whole stream with arrow-go's reader, copying every batch
// out of the reader.
func decode(t *testing.T, mem memory.Allocator, stream []byte) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	eos := []byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0}
	r, err := ipc.NewReader(bytes.NewReader(append(stream[:len(stream):len(stream)], eos...)), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var recs []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return r.Schema(), recs
}

// TestWriterMatchesIPCWriter: for every type an answer carries, the
// messages Writer sends decode with arrow-go's stream reader to the same
// schema and batches as arrow-go's own writer's, in the same sequence of
// messages (schema, dictionaries sent whole or as deltas, batches).
func TestWriterMatchesIPCWriter(t *testing.T) {
	for _, tc := range streamCases() {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			recs := tc.build(mem)
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			schema := tc.schema

			var ours collector
			var w Writer
			if err := w.Reset(&ours, schema); err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}

			var theirs payloadCollector
			iw := ipc.NewWriterWithPayloadWriter(&theirs, ipc.WithSchema(schema), ipc.WithAllocator(mem), ipc.WithDictionaryDeltas(true))
			for _, r := range recs {
				if err := iw.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := iw.Close(); err != nil {
				t.Fatal(err)
			}

			gotKinds, wantKinds := ours.kinds, theirs.kinds
			if fmt.Sprint(gotKinds) != fmt.Sprint(wantKinds) {
				t.Errorf("messages:\n got %v\nwant %v", gotKinds, wantKinds)
			}
			if fmt.Sprint(gotKinds) != fmt.Sprint(tc.kinds) {
				t.Errorf("messages %v, want %v", gotKinds, tc.kinds)
			}

			gotSchema, got := decode(t, mem, ours.buf.Bytes())
			wantSchema, want := decode(t, mem, theirs.buf.Bytes())
			defer func() {
				for _, r := range append(got, want...) {
					r.Release()
				}
			}()
			if !gotSchema.Equal(wantSchema) || !gotSchema.Metadata().Equal(wantSchema.Metadata()) {
				t.Fatalf("schema\n got %s\nwant %s", gotSchema, wantSchema)
			}
			if len(got) != len(want) || len(got) != len(recs) {
				t.Fatalf("%d batches, arrow-go's writer %d, written %d", len(got), len(want), len(recs))
			}
			for i := range got {
				if !array.RecordEqual(got[i], want[i]) || !array.RecordEqual(got[i], recs[i]) {
					t.Errorf("batch %d:\n got %v\nwant %v", i, got[i], recs[i])
				}
			}
		})
	}
}

type streamCase struct {
	name   string
	schema *arrow.Schema
	build  func(memory.Allocator) []arrow.RecordBatch
	kinds  []string
}

var (
	idType   = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	answerMD = arrow.NewMetadata([]string{"servingsnap.snapshot_id", "servingsnap.dataset"}, []string{"7", "B"})
)

func streamCases() []streamCase {
	const (
		schemaMsg = "Schema"
		dict      = "DictionaryBatch(delta=false)"
		delta     = "DictionaryBatch(delta=true)"
		batch     = "RecordBatch"
	)
	answer := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: idType},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, &answerMD)
	every := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: idType},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "i64", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "f16", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "d64", Type: arrow.FixedWidthTypes.Date64, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "t32", Type: arrow.FixedWidthTypes.Time32s, Nullable: true},
		{Name: "dur", Type: arrow.FixedWidthTypes.Duration_ms, Nullable: true},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 20, Scale: 3}, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lnote", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "lblob", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: "category", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "units", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Int64}, Nullable: true},
		{Name: "scale", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.PrimitiveTypes.Float64}, Nullable: true},
	}, &answerMD)
	return []streamCase{
		{"one series, one batch", answer, func(mem memory.Allocator) []arrow.RecordBatch {
			ids := stringArray(mem, "A.1")
			defer ids.Release()
			return []arrow.RecordBatch{sliced(mem, answer, 150, 0, 150, []arrow.Array{ids}, func(int) int32 { return 0 })}
		}, []string{schemaMsg, dict, batch}},
		{"every type, sliced at odd offsets", every, func(mem memory.Allocator) []arrow.RecordBatch {
			dicts := everyDicts(mem, 4)
			defer release(dicts)
			return []arrow.RecordBatch{
				sliced(mem, every, 100, 3, 40, dicts, func(i int) int32 { return int32(i % 4) }),
				sliced(mem, every, 100, 43, 100, dicts, func(i int) int32 { return int32(i % 4) }),
			}
		}, []string{schemaMsg, dict, dict, dict, dict, batch, batch}},
		{"dictionaries growing by deltas", every, func(mem memory.Allocator) []arrow.RecordBatch {
			full := everyDicts(mem, 9)
			defer release(full)
			var out []arrow.RecordBatch
			for _, end := range []int64{3, 3, 6, 9} {
				part := make([]arrow.Array, len(full))
				for i, d := range full {
					part[i] = array.NewSlice(d, 0, end)
				}
				out = append(out, sliced(mem, every, 20, 1, 13, part, func(i int) int32 { return int32(end-1) - int32(i%3) }))
				release(part)
			}
			return out
		}, []string{schemaMsg, dict, dict, dict, dict, batch, batch, delta, delta, delta, delta, batch, delta, delta, delta, delta, batch}},
		{"dictionary replaced", answer, func(mem memory.Allocator) []arrow.RecordBatch {
			a, b := stringArray(mem, "A.1", "A.2"), stringArray(mem, "B.1", "B.2")
			defer a.Release()
			defer b.Release()
			same := stringArray(mem, "B.1", "B.2")
			defer same.Release()
			return []arrow.RecordBatch{
				sliced(mem, answer, 10, 0, 4, []arrow.Array{a}, func(i int) int32 { return int32(i % 2) }),
				sliced(mem, answer, 10, 4, 10, []arrow.Array{b}, func(i int) int32 { return int32(i % 2) }),
				sliced(mem, answer, 10, 2, 3, []arrow.Array{same}, func(i int) int32 { return 1 }),
			}
		}, []string{schemaMsg, dict, batch, dict, batch, batch}},
		{"no batches", every, func(memory.Allocator) []arrow.RecordBatch { return nil }, []string{schemaMsg}},
		{"empty batch", every, func(mem memory.Allocator) []arrow.RecordBatch {
			dicts := everyDicts(mem, 2)
			defer release(dicts)
			return []arrow.RecordBatch{sliced(mem, every, 10, 5, 5, dicts, func(int) int32 { return 0 })}
		}, []string{schemaMsg, dict, dict, dict, dict, batch}},
	}
}

func release(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

func stringArray(mem memory.Allocator, vs ...string) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.AppendValues(vs, nil)
	return b.NewArray()
}

// everyDicts builds n entries of each dictionary of the "every" schema:
// series ids, category (with a null), units, scale.
func everyDicts(mem memory.Allocator, n int) []arrow.Array {
	ids, cats := array.NewStringBuilder(mem), array.NewStringBuilder(mem)
	units, scale := array.NewInt64Builder(mem), array.NewFloat64Builder(mem)
	defer ids.Release()
	defer cats.Release()
	defer units.Release()
	defer scale.Release()
	for i := range n {
		ids.Append(fmt.Sprintf("S.%03d", i))
		if i == 1 {
			cats.AppendNull()
		} else {
			cats.Append(fmt.Sprintf("cat-%d", i))
		}
		units.Append(int64(i) * 1000)
		scale.Append(float64(i) / 4)
	}
	return []arrow.Array{ids.NewArray(), cats.NewArray(), units.NewArray(), scale.NewArray()}
}

// sliced builds a batch of n rows of schema (every column with nulls at
// rows divisible by 5, but series_id and period) and returns its rows
// [lo, hi). dicts are the dictionaries of the schema's dictionary fields in
// order; code gives row i's code into them.
func sliced(mem memory.Allocator, schema *arrow.Schema, n int, lo, hi int64, dicts []arrow.Array, code func(int) int32) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	ib := array.NewInt32Builder(mem)
	defer ib.Release()
	for i := range n {
		ib.Append(code(i))
	}
	idx := ib.NewInt32Array()
	defer idx.Release()
	nullIdx := func() arrow.Array {
		b := array.NewInt16Builder(mem)
		defer b.Release()
		for i := range n {
			if i%7 == 3 {
				b.AppendNull()
			} else {
				b.Append(int16(code(i)))
			}
		}
		return b.NewArray()
	}
	d := 0
	for j, f := range schema.Fields() {
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			if dt.IndexType.ID() == arrow.INT16 {
				ix := nullIdx()
				cols[j] = array.NewDictionaryArray(dt, ix, dicts[d])
				ix.Release()
			} else {
				cols[j] = array.NewDictionaryArray(dt, idx, dicts[d])
			}
			d++
			continue
		}
		b := array.NewBuilder(mem, f.Type)
		for i := range n {
			if f.Nullable && i%5 == 0 {
				b.AppendNull()
				continue
			}
			appendValue(b, i)
		}
		cols[j] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(schema, cols, int64(n))
	release(cols)
	defer rec.Release()
	return rec.NewSlice(lo, hi)
}

func appendValue(b array.Builder, i int) {
	switch b := b.(type) {
	case *array.Date32Builder:
		b.Append(arrow.Date32(18000 + i*31))
	case *array.Float64Builder:
		b.Append(float64(i) * 1.5)
	case *array.Int8Builder:
		b.Append(int8(i))
	case *array.Int16Builder:
		b.Append(int16(i))
	case *array.Int32Builder:
		b.Append(int32(-i))
	case *array.Int64Builder:
		b.Append(int64(i) << 33)
	case *array.Uint8Builder:
		b.Append(uint8(i))
	case *array.Uint64Builder:
		b.Append(uint64(i) << 40)
	case *array.Float32Builder:
		b.Append(float32(i) / 3)
	case *array.Float16Builder:
		b.AppendValueFromString(fmt.Sprint(i))
	case *array.BooleanBuilder:
		b.Append(i%3 == 0)
	case *array.Date64Builder:
		b.Append(arrow.Date64(int64(i) * 86_400_000))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(int64(i) * 1_000_003))
	case *array.Time32Builder:
		b.Append(arrow.Time32(i))
	case *array.DurationBuilder:
		b.Append(arrow.Duration(i * 7))
	case *array.Decimal128Builder:
		b.Append(decimal128.FromI64(int64(i) * 12345))
	case *array.FixedSizeBinaryBuilder:
		b.Append([]byte{byte(i), byte(i >> 8), 7})
	case *array.StringBuilder:
		b.Append(fmt.Sprintf("note %d%s", i, string(make([]byte, i%4))))
	case *array.BinaryBuilder:
		b.Append([]byte(fmt.Sprintf("blob-%d", i*i)))
	case *array.LargeStringBuilder:
		b.Append(fmt.Sprintf("large note %d", i))
	default:
		panic(fmt.Sprintf("no value for %T", b))
	}
}

// TestFlat: which schemas Writer encodes; the others are refused by Reset
// with the field named, for the caller to use arrow-go's writer.
func TestFlat(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  arrow.DataType
		flat bool
	}{
		{"float64", arrow.PrimitiveTypes.Float64, true},
		{"utf8", arrow.BinaryTypes.String, true},
		{"large binary", arrow.BinaryTypes.LargeBinary, true},
		{"bool", arrow.FixedWidthTypes.Boolean, true},
		{"dictionary of utf8", idType, true},
		{"list", arrow.ListOf(arrow.PrimitiveTypes.Int32), false},
		{"struct", arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}), false},
		{"string view", arrow.BinaryTypes.StringView, false},
		{"null", arrow.Null, false},
		{"dictionary of a list", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.ListOf(arrow.PrimitiveTypes.Int32)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := arrow.NewSchema([]arrow.Field{{Name: "period", Type: arrow.FixedWidthTypes.Date32}, {Name: "col", Type: tc.typ}}, nil)
			if got := Flat(s); got != tc.flat {
				t.Fatalf("Flat = %v, want %v", got, tc.flat)
			}
			var w Writer
			err := w.Reset(&collector{}, s)
			if tc.flat != (err == nil) {
				t.Fatalf("Reset: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), `"col"`) {
				t.Errorf("Reset's error %q does not name the field", err)
			}
		})
	}
}

// TestWriteOtherSchema: a batch of another schema is refused, and the
// writer stays failed.
func TestWriteOtherSchema(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := arrow.NewSchema([]arrow.Field{{Name: "y", Type: arrow.PrimitiveTypes.Int64}}, nil)
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	ib.Append(1)
	col := ib.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(b, []arrow.Array{col}, 1)
	defer rec.Release()
	var w Writer
	var c collector
	if err := w.Reset(&c, a); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); !errors.Is(err, ErrSchema) {
		t.Fatalf("Write: %v, want ErrSchema", err)
	}
	if err := w.Close(); !errors.Is(err, ErrSchema) {
		t.Fatalf("Close: %v, want ErrSchema", err)
	}
	if len(c.kinds) != 0 {
		t.Errorf("sent %v", c.kinds)
	}
}

// TestWriteMalformed: an array whose buffers are shorter than its length
// says is an error naming the column, not a panic.
func TestWriteMalformed(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
	values := memory.NewBufferBytes(make([]byte, 10*8))
	validity := memory.NewBufferBytes([]byte{0xFE}) // 8 bits for 10 rows
	d := array.NewData(arrow.PrimitiveTypes.Float64, 10, []*memory.Buffer{validity, values}, nil, 1, 0)
	col := array.MakeFromData(d)
	d.Release()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 10)
	defer rec.Release()
	var w Writer
	if err := w.Reset(&collector{}, schema); err != nil {
		t.Fatal(err)
	}
	err := w.Write(rec)
	if err == nil || !strings.Contains(err.Error(), `"value"`) || !strings.Contains(err.Error(), "bitmap") {
		t.Fatalf("Write: %v, want an error naming the column and its bitmap", err)
	}
}
