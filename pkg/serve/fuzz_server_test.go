package serve

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"go.uber.org/goleak"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
)

// Fuzz input encoding: the first byte picks the call, the rest is its
// payload.
const (
	fuzzDoGet   = 0 // the rest is a ticket
	fuzzInfo    = 1 // the rest is a GetFlightInfo command
	fuzzDoPut   = 2 // the rest is DoPut messages, each [u16 header length][header][u32 body length][body]
	fuzzOps     = 3
	fuzzMaxBody = 1 << 20
)

// captureStream collects what a record writer sends (the seeds' DoPut
// messages).
type captureStream struct{ msgs []*flight.FlightData }

func (c *captureStream) Send(d *flight.FlightData) error { c.msgs = append(c.msgs, d); return nil }

func encodePut(msgs []*flight.FlightData) []byte {
	b := []byte{fuzzDoPut}
	for _, m := range msgs {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(m.DataHeader)))
		b = append(b, m.DataHeader...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m.DataBody)))
		b = append(b, m.DataBody...)
	}
	return b
}

func decodePut(b []byte) []*flight.FlightData {
	var out []*flight.FlightData
	for len(b) >= 2 && len(out) < 64 {
		h := int(binary.LittleEndian.Uint16(b))
		b = b[2:]
		h = min(h, len(b))
		m := &flight.FlightData{DataHeader: b[:h]}
		b = b[h:]
		if len(b) >= 4 {
			n := int(min(binary.LittleEndian.Uint32(b), fuzzMaxBody))
			b = b[4:]
			n = min(n, len(b))
			m.DataBody = b[:n]
			b = b[n:]
		}
		out = append(out, m)
	}
	return out
}

// FuzzServer drives a live in-process server (the Flight surface through
// gRPC, middleware included) with random tickets, FlightInfo commands and
// DoPut bodies: no input crashes it, every call ends, and no goroutine
// outlives its call (goleak: the server's and the client connection's own
// goroutines are the baseline).
func FuzzServer(f *testing.F) {
	dir := f.TempDir()
	lake := filepath.Join(dir, "lake")
	testlake.WriteParquet(f, lake, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "A", "A", "B", "B")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2020-01", "2020-02", "2020-03", "2020-01", "2020-02")},
		testlake.Col{Name: "value", Vals: testlake.Floats(1, 2, 3, 10, 11)},
		testlake.Col{Name: "units", Vals: testlake.Strs("u", "u", "u", "v", "v")},
	)
	root := filepath.Join(dir, "root")
	testsnap.Build(f, lake, filepath.Join(root, "LIVE"), nil)
	srv := startServer(f, Config{Root: root, Options: Options{Limits: Limits{MaxTicketBytes: 1 << 16, MaxSeries: 100, MaxRows: 10000, BatchBytes: 1 << 16,
		MaxPutRows: 1000, MaxPutBytes: 8 << 20, MaxInFlightBytes: 8 << 20, StreamTimeout: 5 * time.Second, LeaseTimeout: time.Minute}}})
	c := dial(f, srv)

	// a valid put, as seed and to start the dataset's writer before the
	// goroutine baseline is taken
	rec := putRows{"series_id": {"A", "C"}, "period": {"2020-04", "2021-01"}, "value": {4.0, nil}, "units": {"u", "w"}}.record(f)
	cap := &captureStream{}
	w := flight.NewRecordWriter(cap, ipc.WithSchema(rec.Schema()))
	w.Write(rec)
	w.Close()
	rec.Release()
	validPut := encodePut(cap.msgs)
	for _, s := range [][]byte{
		append([]byte{fuzzDoGet}, `{"dataset":"LIVE","series":["A","B"],"attributes":true}`...),
		append([]byte{fuzzDoGet}, `{"dataset":"LIVE","prefix":"","latest":true,"start":"2020-02"}`...),
		append([]byte{fuzzDoGet}, `{"dataset":"LIVE","category":"x"}`...),
		append([]byte{fuzzDoGet}, `{"dataset":"LIVE","series":["\ud800"]}`...),
		append([]byte{fuzzInfo}, `{"dataset":"LIVE","prefix":"A","columns":["value"]}`...),
		validPut,
		validPut[:len(validPut)/2],
		{fuzzDoPut, 3, 0, 'a', 'b', 'c'},
	} {
		f.Add(s)
	}
	call(c, validPut...)
	// the baseline: what runs now, plus the fuzzing engine's signal
	// watcher, which it starts after this setup
	ignore := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreTopFunction("os/signal.NotifyContext.func1")}

	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		call(c, b...)
		if err := goleak.Find(ignore...); err != nil {
			t.Fatalf("goroutines left after a call on input %q: %v", b, err)
		}
	})
}

// call runs one fuzz input as a Flight call and drains its answer; errors
// are the expected outcome of most inputs.
func call(c flight.Client, in ...byte) {
	if len(in) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	op, body := in[0]%fuzzOps, in[1:]
	switch op {
	case fuzzDoGet:
		st, err := c.DoGet(ctx, &flight.Ticket{Ticket: body})
		if err != nil {
			return
		}
		for {
			if _, err := st.Recv(); err != nil {
				return
			}
		}
	case fuzzInfo:
		c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: body})
	case fuzzDoPut:
		st, err := c.DoPut(ctx)
		if err != nil {
			return
		}
		for i, m := range decodePut(body) {
			if i == 0 {
				m.FlightDescriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"LIVE"}}
			}
			if st.Send(m) != nil {
				break
			}
		}
		st.CloseSend()
		for {
			if _, err := st.Recv(); err != nil {
				return // io.EOF or the call's error
			}
		}
	}
}
