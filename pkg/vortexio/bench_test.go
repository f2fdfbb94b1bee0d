package vortexio

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// lakeBatch builds a lake-like table: nseries series of 150 daily rows, with
// sorted uint32 series codes, per-series sorted dates, decimal-like float
// values with ~3% nulls and a low-cardinality unit string.
func lakeBatch(nseries int) arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(7, 7))
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_code", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "unit", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	units := []string{"MWh", "GWh", "thousand barrels", "million cubic feet", "€/MWh"}
	for s := 0; s < nseries; s++ {
		first := 17897 + rng.IntN(30)
		level := 10 + rng.Float64()*490
		for i := 0; i < 150; i++ {
			b.Field(0).(*array.Uint32Builder).Append(uint32(1000 + 7*s))
			b.Field(1).(*array.Date32Builder).Append(arrow.Date32(first + i))
			if rng.Float64() < 0.03 {
				b.Field(2).AppendNull()
			} else {
				level = math.Abs(level + rng.Float64()*6 - 3)
				b.Field(2).(*array.Float64Builder).Append(math.Round(level*10) / 10)
			}
			b.Field(3).(*array.StringBuilder).Append(units[s%len(units)])
		}
	}
	return b.NewRecordBatch()
}

func writeVortex(tb testing.TB, rec arrow.RecordBatch, chunk int) []byte {
	return writeVortexWith(tb, rec, WriterOptions{ChunkRows: chunk})
}

func writeVortexWith(tb testing.TB, rec arrow.RecordBatch, opt WriterOptions) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, rec.Schema(), opt)
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func ipcSize(tb testing.TB, rec arrow.RecordBatch, opts ...ipc.Option) int {
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, append(opts, ipc.WithSchema(rec.Schema()))...)
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		tb.Fatal(err)
	}
	w.Close()
	return buf.Len()
}

const benchSeries = 2000 // 300k rows

// BenchmarkLake reports file size against Arrow IPC, full-decode
// throughput and the latency of reading one 150-row range (all columns).
func BenchmarkLake(b *testing.B) {
	rec := lakeBatch(benchSeries)
	defer rec.Release()
	rows := rec.NumRows()
	raw := ipcSize(b, rec)
	zst := ipcSize(b, rec, ipc.WithZstd())
	for _, chunk := range []int{8192, 65536} {
		data := writeVortex(b, rec, chunk)
		f, err := Open(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("chunk=%d/write", chunk), func(b *testing.B) {
			b.SetBytes(int64(raw))
			for i := 0; i < b.N; i++ {
				writeVortex(b, rec, chunk)
			}
			b.ReportMetric(float64(len(data)), "vortex_bytes")
			b.ReportMetric(float64(raw), "ipc_bytes")
			b.ReportMetric(float64(zst), "ipc_zstd_bytes")
		})
		benchReads(b, f, rows, chunk, int64(raw))
	}
}

// TestLakeSizes checks the writer's compression on the lake table stays far
// below Arrow IPC (a regression guard for the chooser).
func TestLakeSizes(t *testing.T) {
	rec := lakeBatch(200)
	defer rec.Release()
	data := writeVortex(t, rec, 8192)
	raw := ipcSize(t, rec)
	t.Logf("lake %d rows: vortex %d bytes, arrow ipc %d bytes (%.1f%%)", rec.NumRows(), len(data), raw, 100*float64(len(data))/float64(raw))
	if len(data)*4 > raw {
		t.Errorf("vortex file %d bytes is more than 1/4 of IPC %d", len(data), raw)
	}
	f, err := Open(bytes.NewReader(data), int64(len(data)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadRange(nil, 0, f.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i := 0; i < int(rec.NumCols()); i++ {
		sameArray(t, rec.ColumnName(i), rec.Column(i), got.Column(i))
	}
	var d bytes.Buffer
	if err := Describe(&d, f); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + d.String())
}

// benchReads measures what a reader of file f waits on: decoding every
// row, and reading one 150-row range (a series) at a random place. bytes,
// if non-zero, is reported per op for the full decode.
func benchReads(b *testing.B, f *File, rows int64, chunk int, bytes int64) {
	b.Run(fmt.Sprintf("chunk=%d/full_decode", chunk), func(b *testing.B) {
		if bytes > 0 {
			b.SetBytes(bytes)
		}
		for i := 0; i < b.N; i++ {
			r, err := f.ReadRange(nil, 0, rows)
			if err != nil {
				b.Fatal(err)
			}
			r.Release()
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
	})
	b.Run(fmt.Sprintf("chunk=%d/range150", chunk), func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 1))
		for i := 0; i < b.N; i++ {
			a := rng.Int64N(rows - 150)
			r, err := f.ReadRange(nil, a, a+150)
			if err != nil {
				b.Fatal(err)
			}
			r.Release()
		}
	})
}
