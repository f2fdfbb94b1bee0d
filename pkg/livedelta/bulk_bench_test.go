package livedelta

import (
	"context"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkBulkProbe: numbering the series of 150 writes of 10k rows
// (100k series), sorting them and looking them up in the base, alone.
func BenchmarkBulkProbe(b *testing.B) {
	s := testSchema(b)
	base := newFakeBase(100_000, 150)
	writes := benchWrites(s, base, 150, false)
	cpu0 := cpuTime()
	for b.Loop() {
		bk := &bulk{ctx: context.Background(), mem: memory.DefaultAllocator, s: s, writes: writes, base: base, workers: runtime.GOMAXPROCS(0)}
		bk.off = make([]int, len(writes)+1)
		bk.ids = make([]*array.String, len(writes))
		for k, w := range writes {
			bk.off[k+1] = bk.off[k] + int(w.NumRows())
			bk.ids[k] = w.Column(0).(*array.String)
		}
		bk.n = bk.off[len(writes)]
		bk.numberSeries()
		bk.rank()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*150*10_000), "cpu-ns/row")
}
