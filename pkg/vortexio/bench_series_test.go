package vortexio

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// BenchmarkSeriesRange is the cold tier's read: all the rows of one series
// (all columns), from a file whose chunks are either a fixed size (what
// BenchmarkSnapshot's range150 measures: a range straddles up to two 8192-row
// chunks, decoded whole) or cut at series boundaries with Cut once a chunk
// holds target rows (the read decodes only chunks holding the series and
// the few series sharing them). The table is BenchmarkSnapshot's
// (VORTEXIO_BENCH_ARROW, else the synthetic stand-in).
func BenchmarkSeriesRange(b *testing.B) {
	rec, batches := snapshotTable(b)
	defer rec.Release()
	codes := rec.Column(0).(*array.Uint32).Uint32Values()
	var bounds []int64 // series starts, then len
	for i := range codes {
		if i == 0 || codes[i] != codes[i-1] {
			bounds = append(bounds, int64(i))
		}
	}
	bounds = append(bounds, int64(len(codes)))
	for _, cfg := range []struct {
		name   string
		target int // 0: fixed 8192-row chunks, no cuts
	}{{"fixed8192", 0}, {"series1024", 1024}, {"series2048", 2048}, {"series4096", 4096}} {
		var data []byte
		if cfg.target == 0 {
			data = writeBatches(b, rec.Schema(), batches, WriterOptions{ChunkRows: 8192})
		} else {
			data = writeSeriesAligned(b, rec, bounds, cfg.target)
		}
		f, err := Open(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(cfg.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			b.ReportAllocs()
			rows := 0
			for i := 0; i < b.N; i++ {
				s := rng.IntN(len(bounds) - 1)
				r, err := f.ReadRange(nil, bounds[s], bounds[s+1])
				if err != nil {
					b.Fatal(err)
				}
				rows += int(r.NumRows())
				r.Release()
			}
			b.ReportMetric(float64(len(data))/(1<<20), "MiB")
			b.ReportMetric(float64(rows)/float64(b.N), "rows/read")
		})
	}
}

// writeSeriesAligned writes rec with a chunk cut at the first series
// boundary once a chunk holds target rows (a series longer than the
// writer's ChunkRows still spans chunks of that size).
func writeSeriesAligned(tb testing.TB, rec arrow.RecordBatch, bounds []int64, target int) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, rec.Schema(), WriterOptions{ChunkRows: 65536})
	if err != nil {
		tb.Fatal(err)
	}
	start := int64(0)
	for k := 1; k < len(bounds); k++ {
		if bounds[k]-start >= int64(target) || k == len(bounds)-1 {
			part := rec.NewSlice(start, bounds[k])
			err := w.Write(part)
			part.Release()
			if err == nil {
				err = w.Cut()
			}
			if err != nil {
				tb.Fatal(err)
			}
			start = bounds[k]
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
