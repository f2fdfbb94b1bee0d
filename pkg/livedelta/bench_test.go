package livedelta

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchWrites are writes of 10k rows each cycling through the base's
// series, as the server's DoPut benchmark sends them: revise=true puts a
// period inside the base's, false one after it.
func benchWrites(s *Schema, base *fakeBase, writes int, revise bool) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, writes)
	for w := range out {
		rows := make([]row, 10_000)
		for i := range rows {
			j := w*len(rows) + i
			p := int32(10 * ((j / len(base.ids)) % base.nPeriods))
			if !revise {
				p = int32(10 * (base.nPeriods + j/len(base.ids)))
			}
			rows[i] = row{id: base.ids[j%len(base.ids)], period: p, value: float64(j), status: "ok"}
		}
		out[w] = write(s, rows, nil)
	}
	return out
}

// BenchmarkApply: 150 writes of 10k rows (1.5M rows) applied one by one
// to an empty State over a 100k-series base, merges included: the write
// path's CPU cost per row, without the WAL and the transport.
func BenchmarkApply(b *testing.B) {
	benchLoad(b, func(ctx context.Context, s *Schema, writes []arrow.RecordBatch, base *fakeBase) error {
		st := Empty(s)
		for i, w := range writes {
			var err error
			if st, err = st.Apply(ctx, memory.DefaultAllocator, w, uint64(i+1), uint64(i+1), base); err != nil {
				return err
			}
		}
		return nil
	})
}

// benchLoad times load over 150 writes of 10k rows of a 100k-series base,
// appends and then revisions, reporting rows/s and the process's CPU time
// (GC included) per row: what a loaded machine's wall clock hides.
func benchLoad(b *testing.B, load func(ctx context.Context, s *Schema, writes []arrow.RecordBatch, base *fakeBase) error) {
	s := testSchema(b)
	base := newFakeBase(100_000, 150)
	for _, revise := range []bool{false, true} {
		b.Run(fmt.Sprintf("revise=%v", revise), func(b *testing.B) {
			writes := benchWrites(s, base, 150, revise)
			ctx := context.Background()
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				if err := load(ctx, s, writes, base); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*150*10_000)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*150*10_000), "cpu-ns/row")
		})
	}
}

// BenchmarkNewRun: sorting one 10k-row write into a run.
func BenchmarkNewRun(b *testing.B) {
	s := testSchema(b)
	base := newFakeBase(100_000, 150)
	w := benchWrites(s, base, 1, false)[0]
	ctx := context.Background()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, _, err := newRun(ctx, memory.DefaultAllocator, s, w, 1, newKeyIndex(base)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*10_000), "cpu-ns/row")
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkMerge: one background merge of MergeFanIn runs, as the write
// path's merger makes them from 10k-row writes over a 100k-series base:
// four writes (tier 0: a series a row), and four merges of four writes each
// (tier 1, the series of one run overlapping another's). As in the
// server's ingest benchmarks, a write's series are scattered over the base
// (its ids shuffled), not neighbours.
func BenchmarkMerge(b *testing.B) {
	s := testSchema(b)
	base := newFakeBase(100_000, 150)
	shuffled := &fakeBase{ids: slices.Clone(base.ids), nPeriods: base.nPeriods}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled.ids), func(i, j int) {
		shuffled.ids[i], shuffled.ids[j] = shuffled.ids[j], shuffled.ids[i]
	})
	ctx, mem := context.Background(), memory.DefaultAllocator
	st := Empty(s)
	for i, w := range benchWrites(s, shuffled, 4*MergeFanIn, false) {
		var err error
		if st, err = st.Append(ctx, mem, w, uint64(i+1), uint64(i+1), base); err != nil {
			b.Fatal(err)
		}
	}
	writes := st.Runs()
	var merged []*Run
	for g := 0; g < MergeFanIn; g++ {
		m, err := st.Merge(ctx, mem, writes[g*MergeFanIn:(g+1)*MergeFanIn])
		if err != nil {
			b.Fatal(err)
		}
		merged = append(merged, m)
	}
	for _, c := range []struct {
		name string
		runs []*Run
	}{{"tier=0", writes[:MergeFanIn]}, {"tier=1", merged}} {
		b.Run(c.name, func(b *testing.B) {
			rows := 0
			for _, r := range c.runs {
				rows += r.Len()
			}
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := st.Merge(ctx, mem, c.runs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*rows), "cpu-ns/row")
		})
	}
}
