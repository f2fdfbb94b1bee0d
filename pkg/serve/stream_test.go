package serve

import (
	"context"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/serve/flightenc"
)

// replay is a DoGet client stream over recorded messages.
type replay struct{ msgs []*flight.FlightData }

func (r *replay) Recv() (*flight.FlightData, error) {
	if len(r.msgs) == 0 {
		return nil, io.EOF
	}
	m := r.msgs[0]
	r.msgs = r.msgs[1:]
	return m, nil
}

// TestStreamWriter: a DoGet stream encodes flat answer schemas with
// flightenc and any other schema with arrow-go's ipc.Writer; both decode
// with arrow-go's Flight reader to what was written.
func TestStreamWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  arrow.DataType
		flat bool
	}{
		{"flat", arrow.PrimitiveTypes.Float64, true},
		{"nested", arrow.ListOf(arrow.PrimitiveTypes.Float64), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			schema := arrow.NewSchema([]arrow.Field{
				{Name: "series_id", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
				{Name: "value", Type: tc.typ, Nullable: true},
			}, nil)
			b := array.NewRecordBuilder(mem, schema)
			defer b.Release()
			ids := b.Field(0).(*array.BinaryDictionaryBuilder)
			for _, id := range []string{"A", "A", "B"} {
				if err := ids.AppendString(id); err != nil {
					t.Fatal(err)
				}
			}
			switch v := b.Field(1).(type) {
			case *array.Float64Builder:
				v.AppendValues([]float64{1, 2, 3}, []bool{true, false, true})
			case *array.ListBuilder:
				for i := range 3 {
					v.Append(true)
					v.ValueBuilder().(*array.Float64Builder).Append(float64(i))
				}
			}
			rec := b.NewRecordBatch()
			defer rec.Release()

			rs := &recordStream{ctx: context.Background()}
			cs := newCountingStream(rs, &streamFlow{})
			w, err := cs.writer(schema, mem)
			if err != nil {
				t.Fatal(err)
			}
			if _, isOurs := w.(*flightenc.Writer); isOurs != tc.flat {
				t.Errorf("writer %T for a flat=%v schema", w, tc.flat)
			} else if _, isIPC := w.(*ipc.Writer); !tc.flat && !isIPC {
				t.Errorf("writer %T for a nested schema, want *ipc.Writer", w)
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			cs.free()
			if len(rs.msgs) != 3 { // schema, dictionary, batch
				t.Fatalf("%d messages, want 3", len(rs.msgs))
			}
			rd, err := flight.NewRecordReader(&replay{msgs: rs.msgs}, ipc.WithAllocator(mem))
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Release()
			if !rd.Next() {
				t.Fatalf("no batch: %v", rd.Err())
			}
			if got := rd.RecordBatch(); !array.RecordEqual(got, rec) {
				t.Errorf("decoded %v, wrote %v", got, rec)
			}
		})
	}
}
