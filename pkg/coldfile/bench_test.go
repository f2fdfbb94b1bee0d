package coldfile

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The tier benchmarks run on a snapshot's data.arrow named by
// COLDFILE_BENCH_ARROW (else a synthetic table of 2000 series):
//
//	snapbuild gen --out /tmp/tl --series 20000
//	snapbuild build --input /tmp/tl --out /tmp/ts/SYN
//	COLDFILE_BENCH_ARROW=/tmp/ts/SYN/snapshots/000001/data.arrow \
//	  go test -run '^$' -bench Tier -benchtime 2000x ./pkg/coldfile

func benchTable(b *testing.B) []arrow.RecordBatch {
	path := os.Getenv("COLDFILE_BENCH_ARROW")
	if path == "" {
		rng := rand.New(rand.NewPCG(1, 2))
		ns := make([]int, 2000)
		for i := range ns {
			ns[i] = 20 + rng.IntN(400)
		}
		return []arrow.RecordBatch{table(ns)}
	}
	fh, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	r, err := ipc.NewFileReader(fh, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		b.Fatal(err)
	}
	var out []arrow.RecordBatch
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			b.Fatal(err)
		}
		rec.Retain()
		out = append(out, rec)
	}
	return out
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// arrowSize is the size of an Arrow IPC file of the given slices.
func arrowSize(b *testing.B, sc *arrow.Schema, parts []arrow.RecordBatch) int64 {
	var c counter
	w, err := ipc.NewFileWriter(io.Writer(&c), ipc.WithSchema(sc))
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range parts {
		if err := w.Write(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return c.n
}

type span struct {
	rec    arrow.RecordBatch
	lo, hi int64
}

// seriesSpans lists each series' rows (series never straddle batches).
func seriesSpans(batches []arrow.RecordBatch) []span {
	var out []span
	for _, rec := range batches {
		codes := rec.Column(0).(*array.Uint32).Uint32Values()
		lo := 0
		for i := 1; i <= len(codes); i++ {
			if i == len(codes) || codes[i] != codes[lo] {
				out = append(out, span{rec, int64(lo), int64(i)})
				lo = i
			}
		}
	}
	return out
}

// BenchmarkTierSizes reports the bytes on disk of the all-hot data file
// against a hot data file with a 10% hot window plus cold.vortex: hot
// since the period at or after which 10% of all rows lie. It also times
// the write of the cold file (ns/op is one whole cold file).
func BenchmarkTierSizes(b *testing.B) {
	batches := benchTable(b)
	sc := batches[0].Schema()
	spans := seriesSpans(batches)
	var all []int32
	for _, rec := range batches {
		for _, p := range rec.Column(1).(*array.Date32).Date32Values() {
			all = append(all, int32(p))
		}
	}
	slices.Sort(all)
	pol := Policy{HasHotSince: true, HotSince: all[len(all)*9/10]}
	allHot := arrowSize(b, sc, batches)
	var hot []arrow.RecordBatch
	cold := make([]int64, len(spans))
	var hotRows int64
	for i, s := range spans {
		ps := s.rec.Column(1).(*array.Date32).Date32Values()[s.lo:s.hi]
		cold[i] = pol.ColdRows(ps)
		hot = append(hot, s.rec.NewSlice(s.lo+cold[i], s.hi))
		hotRows += s.hi - s.lo - cold[i]
	}
	// The hot file is written as the builder would: few large batches,
	// not one per series.
	hotSize := arrowSize(b, sc, []arrow.RecordBatch{concatRows(b, sc, hot)})
	dir := b.TempDir()
	for _, chunk := range []int{1024, 2048, 4096, 8192} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			var info Info
			for i := 0; i < b.N; i++ {
				w, err := Create(filepath.Join(dir, FileName), sc, Options{ChunkRows: chunk})
				if err != nil {
					b.Fatal(err)
				}
				for k, s := range spans {
					if _, err := w.Add(s.rec, s.lo, s.lo+cold[k]); err != nil {
						b.Fatal(err)
					}
				}
				if info, err = w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(allHot)/(1<<20), "allhot_MiB")
			b.ReportMetric(float64(hotSize)/(1<<20), "hot_MiB")
			b.ReportMetric(float64(info.Size)/(1<<20), "cold_MiB")
			b.ReportMetric(float64(hotSize+info.Size)/float64(allHot)*100, "tiered_%_of_allhot")
			b.ReportMetric(float64(hotRows)/float64(hotRows+info.Rows)*100, "hot_%_rows")
		})
	}
}

// BenchmarkTierRead is a one-series read of its cold rows (all columns)
// from cold.vortex: decode (no cache), and a cache hit.
func BenchmarkTierRead(b *testing.B) {
	batches := benchTable(b)
	sc := batches[0].Schema()
	spans := seriesSpans(batches)
	for _, chunk := range []int{1024, 2048, 4096, 8192} {
		benchTierRead(b, sc, spans, chunk)
	}
}

func benchTierRead(b *testing.B, sc *arrow.Schema, spans []span, chunk int) {
	pol := Policy{HotRows: 1}
	path := filepath.Join(b.TempDir(), FileName)
	w, err := Create(path, sc, Options{ChunkRows: chunk})
	if err != nil {
		b.Fatal(err)
	}
	var locs []Location
	for _, s := range spans {
		c := pol.ColdRows(s.rec.Column(1).(*array.Date32).Date32Values()[s.lo:s.hi])
		l, err := w.Add(s.rec, s.lo, s.lo+c)
		if err != nil {
			b.Fatal(err)
		}
		if l.Rows > 0 {
			locs = append(locs, l)
		}
	}
	if _, err := w.Close(); err != nil {
		b.Fatal(err)
	}
	for _, cached := range []bool{false, true} {
		var cache *Cache
		if cached {
			cache = NewCache(math.MaxInt64)
		}
		f, err := Open(path, sc, "", cache)
		if err != nil {
			b.Fatal(err)
		}
		if cached {
			for _, l := range locs {
				f.Series(l)
			}
		}
		b.Run(fmt.Sprintf("chunk=%d/cached=%v", chunk, cached), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			rows := int64(0)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				l := locs[rng.IntN(len(locs))]
				rec, lo, hi, err := f.Rows(l, math.MinInt32, math.MaxInt32)
				if err != nil || rec == nil {
					b.Fatal(err)
				}
				rows += hi - lo
			}
			b.ReportMetric(float64(rows)/float64(b.N), "rows/read")
		})
		f.Close()
	}
}

func concatRows(b *testing.B, sc *arrow.Schema, parts []arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, sc.NumFields())
	var n int64
	for _, p := range parts {
		n += p.NumRows()
	}
	for i := range cols {
		arrs := make([]arrow.Array, len(parts))
		for k, p := range parts {
			arrs[k] = p.Column(i)
		}
		c, err := array.Concatenate(arrs, memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(sc, cols, n)
}
