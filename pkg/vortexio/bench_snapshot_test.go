package vortexio

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The snapshot benchmarks measure the writer and reader on a real hot data
// file of a snapshot (series_code sorted, period sorted within a series,
// value a random walk with ~0.5% nulls), which is where the file size and
// write speed matter. VORTEXIO_BENCH_ARROW names the Arrow IPC data file;
// without it a synthetic table of the same shape (seriesBatch) stands in.
// To build the real one:
//
//	snapbuild gen --out /tmp/blake --series 100000
//	snapbuild build --input /tmp/blake --out /tmp/bsnap/SYN
//	VORTEXIO_BENCH_ARROW=/tmp/bsnap/SYN/snapshots/000001/data.arrow \
//	  go test -run '^$' -bench Snapshot -benchtime 3x ./pkg/vortexio
//
// VORTEXIO_BENCH_ROWS limits the rows used (default 1,048,576; 0 = all).

func snapshotTable(b testing.TB) (arrow.RecordBatch, []arrow.RecordBatch) {
	path := os.Getenv("VORTEXIO_BENCH_ARROW")
	if path == "" {
		// Stand-in: the synthetic snapshot-shaped table, ~1M rows.
		rec := seriesBatch(6600, 1)
		var batches []arrow.RecordBatch
		for a := int64(0); a < rec.NumRows(); a += 1 << 17 {
			batches = append(batches, rec.NewSlice(a, min(rec.NumRows(), a+1<<17)))
		}
		return rec, batches
	}
	limit := int64(1 << 20)
	if s := os.Getenv("VORTEXIO_BENCH_ROWS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		limit = n
	}
	fh, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	r, err := ipc.NewFileReader(fh)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var batches []arrow.RecordBatch
	rows := int64(0)
	for i := 0; i < r.NumRecords() && (limit == 0 || rows < limit); i++ {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			b.Fatal(err)
		}
		if limit > 0 && rows+rec.NumRows() > limit {
			rec = rec.NewSlice(0, limit-rows)
		} else {
			rec.Retain()
		}
		batches = append(batches, rec)
		rows += rec.NumRows()
	}
	cols := make([]arrow.Array, r.Schema().NumFields())
	for i := range cols {
		parts := make([]arrow.Array, len(batches))
		for k, rec := range batches {
			parts[k] = rec.Column(i)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(r.Schema(), cols, rows), batches
}

func writeBatches(tb testing.TB, sc *arrow.Schema, batches []arrow.RecordBatch, opts WriterOptions) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, sc, opts)
	if err != nil {
		tb.Fatal(err)
	}
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkSnapshot reports, per chunk size: file size and bytes per
// column, write throughput (rows/s, fed as the file's own batches), full
// decode throughput and the latency of reading one 150-row range (about one
// series) of all columns.
func BenchmarkSnapshot(b *testing.B) {
	rec, batches := snapshotTable(b)
	defer rec.Release()
	rows := rec.NumRows()
	for _, chunk := range []int{8192, 16384, 65536} {
		opts := WriterOptions{ChunkRows: chunk}
		data := writeBatches(b, rec.Schema(), batches, opts)
		f, err := Open(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("chunk=%d/write", chunk), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				writeBatches(b, rec.Schema(), batches, opts)
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
			b.ReportMetric(float64(len(data))/(1<<20), "MiB")
			for name, n := range columnBytes(f) {
				b.ReportMetric(float64(n)*8/float64(rows), name+"_bits/row")
			}
		})
		benchReads(b, f, rows, chunk, 0)
	}
}

// columnBytes sums the flat segment sizes under each top-level column.
func columnBytes(f *File) map[string]int64 {
	out := map[string]int64{}
	kids := f.root.Children
	if f.dtype.Nullable {
		kids = kids[1:]
	}
	var walk func(l *Layout) int64
	walk = func(l *Layout) int64 {
		s := int64(0)
		for _, seg := range l.Segments {
			s += int64(f.segs[seg].length)
		}
		for _, k := range l.Children {
			s += walk(k)
		}
		return s
	}
	for i, k := range kids {
		out[f.dtype.Names[i]] = walk(k)
	}
	return out
}
