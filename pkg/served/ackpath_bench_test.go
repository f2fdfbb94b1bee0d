package served

// Benchmarks of the ack path's stages one at a time, each with the CPU
// caches evicted between batches: a server's writes come tens of
// milliseconds apart, with merges, collections and gRPC buffers between
// them, so a batch finds the code cache, the index and the base's periods
// out of cache, and a benchmark that repeats one batch hot measures
// something else (BenchmarkCodeLookup/warm: 20-35 ns a row against ~100
// cold).

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/query"
)

// ackBench is a dataset over the 100k-series, 150-period benchmark base,
// a view of its dataset and the delta schema writes to it have.
type ackBench struct {
	d      *Dataset
	v      *View
	schema *livedelta.Schema
	thrash []byte
}

func newAckBench(b *testing.B) *ackBench {
	d := benchDataset(b, testsnap.Uniform(b, 100_000, 150))
	v := d.acquire()
	b.Cleanup(v.Release)
	schema, err := schemaOf(v)
	if err != nil {
		b.Fatal(err)
	}
	return &ackBench{d: d, v: v, schema: schema, thrash: make([]byte, 64<<20)}
}

// evict writes a line of every 64 bytes of 64 MiB: what the batch will
// read is then out of the CPU's caches. Call it with the timer stopped.
func (a *ackBench) evict() {
	for i := 0; i < len(a.thrash); i += 64 {
		a.thrash[i]++
	}
}

// normBatch is a DoPut batch as the check leaves it: normalized, with its
// series' codes in the base.
type normBatch struct {
	norm  arrow.RecordBatch
	codes []int32
}

// batches are n batches of 10k distinct series (testlake.UniformBatch: revisions
// when revise(k), appends otherwise), normalized against the base.
func (a *ackBench) batches(b *testing.B, n int, revise func(k int) bool) []normBatch {
	ids := testlake.UniformIDs(100_000)
	var out []normBatch
	for k := 0; k < n; k++ {
		rec := testlake.UniformBatch(ids, k*10_000, 10_000, revise(k))
		kn := newPutKnown(a.d, a.v)
		norm, codes, err := livedelta.NormalizeCodes(context.Background(), memory.DefaultAllocator, a.schema, rec, 0, kn, kn)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(norm.Release)
		out = append(out, normBatch{norm, codes})
	}
	return out
}

// prepare is livedelta.Prepare of bt over the base.
func (a *ackBench) prepare(b *testing.B, bt normBatch) *livedelta.Prepared {
	p, err := livedelta.Prepare(context.Background(), memory.DefaultAllocator, a.schema, bt.norm, a.v.base, bt.codes)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// appendPrepared is st.AppendPrepared(p) as write seq, over the bench's base.
func (a *ackBench) appendPrepared(b *testing.B, st *livedelta.State, p *livedelta.Prepared, seq uint64) *livedelta.State {
	next, err := st.AppendPrepared(context.Background(), memory.DefaultAllocator, p, seq, seq, a.v.base)
	if err != nil {
		b.Fatal(err)
	}
	return next
}

// appended is st with batches prepared and appended in turn, as writes
// seq+1, seq+2, ….
func (a *ackBench) appended(b *testing.B, st *livedelta.State, seq uint64, batches ...normBatch) *livedelta.State {
	for _, bt := range batches {
		p := a.prepare(b, bt)
		seq++
		st = a.appendPrepared(b, st, p, seq)
		p.Release()
	}
	return st
}

func reportPerRow(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10_000), "ns/row")
}

// BenchmarkNormalize: a DoPut batch's check against the base
// (livedelta.NormalizeCodes through the warm code cache): the check stage.
// Its look-ups in the code cache are ~93% of it.
func BenchmarkNormalize(b *testing.B) {
	a := newAckBench(b)
	a.d.codes(a.v).warm()
	ids := testlake.UniformIDs(100_000)
	var recs []arrow.RecordBatch
	for k := 0; k < 8; k++ {
		recs = append(recs, testlake.UniformBatch(ids, k*10_000, 10_000, k%2 == 0))
		b.Cleanup(recs[k].Release)
	}
	a.timeCold(b, func(k int) (run, cleanup func()) {
		var norm arrow.RecordBatch
		return func() {
				kn := newPutKnown(a.d, a.v)
				var err error
				if norm, _, err = livedelta.NormalizeCodes(context.Background(), memory.DefaultAllocator, a.schema, recs[k%len(recs)], 0, kn, kn); err != nil {
					b.Fatal(err)
				}
			}, func() {
				norm.Release()
			}
	})
}

// BenchmarkPrepare: livedelta.Prepare of a batch (revisions, whose periods lie
// inside the base's, and appends, after them): the sorting into a run and
// the look-up of which rows the base holds (markInBase), beside the fsync.
func BenchmarkPrepare(b *testing.B) {
	a := newAckBench(b)
	for _, revise := range []bool{true, false} {
		b.Run(fmt.Sprintf("revise=%v", revise), func(b *testing.B) {
			batches := a.batches(b, 8, func(int) bool { return revise })
			a.timeCold(b, func(k int) (run, cleanup func()) {
				var p *livedelta.Prepared
				return func() { p = a.prepare(b, batches[k%len(batches)]) }, func() { p.Release() }
			})
		})
	}
}

// BenchmarkAppendPrepared: the applier's share of a batch
// (livedelta.State.AppendPrepared: the key index's bookkeeping, under the
// writer's lock, after the fsync). known: over a delta that already holds
// every series of the base (the steady state). first: each batch's series
// are new to the key index, as the first writes of each series after a
// start, a reload or a compaction are (a new index each time).
func BenchmarkAppendPrepared(b *testing.B) {
	a := newAckBench(b)
	batches := a.batches(b, 16, func(k int) bool { return k%2 == 0 })
	b.Run("known", func(b *testing.B) {
		var st *livedelta.State
		seq := uint64(0)
		fill := func() { // every series in the key index
			st = a.appended(b, livedelta.Empty(a.schema), seq, batches...)
			seq += uint64(len(batches))
		}
		fill()
		appendEach(b, a, batches, func(p *livedelta.Prepared) {
			seq++
			st = a.appendPrepared(b, st, p, seq)
			if len(st.Runs()) > 64 { // a server's merger keeps the runs few; here they just go
				b.StopTimer()
				fill()
				b.StartTimer()
			}
		})
	})
	b.Run("first", func(b *testing.B) {
		appendEach(b, a, batches, func(p *livedelta.Prepared) { a.appendPrepared(b, livedelta.Empty(a.schema), p, 1) })
	})
}

// appendEach times apply of each iteration's batch (the batches in turn),
// prepared with the timer stopped (timeCold).
func appendEach(b *testing.B, a *ackBench, batches []normBatch, apply func(*livedelta.Prepared)) {
	a.timeCold(b, func(k int) (run, cleanup func()) {
		p := a.prepare(b, batches[k%len(batches)])
		return func() { apply(p) }, p.Release
	})
}

// timeCold times run for iterations k = 0, 1, …: op(k) makes it (and
// whatever it needs) with the timer stopped, the CPU's caches are then
// evicted, run is timed, and cleanup (nil: none) runs with the timer
// stopped again. It reports the time a row of a 10k-row batch.
func (a *ackBench) timeCold(b *testing.B, op func(k int) (run, cleanup func())) {
	for k := 0; b.Loop(); k++ {
		b.StopTimer()
		run, cleanup := op(k)
		a.evict()
		b.StartTimer()
		run()
		b.StopTimer()
		if cleanup != nil {
			cleanup()
		}
		b.StartTimer()
	}
	reportPerRow(b)
}

// BenchmarkPublishNewSeries: the applier's work for one acknowledged
// batch of 10k series the base lacks (AppendPrepared, then
// query.NewComposite to publish, both under the writer's lock) when the
// delta already holds n such series. Until the delta kept its list of
// them (livedelta.State.Fresh, extended write by write), every publish
// collected and sorted all n anew: 5 ms at n = 10k, 81 ms at 100k.
func BenchmarkPublishNewSeries(b *testing.B) {
	a := newAckBench(b)
	ctx := context.Background()
	normalized := func(k int) normBatch {
		rec := newSeriesBatch(k*10_000, 10_000)
		defer rec.Release()
		kn := newPutKnown(a.d, a.v)
		norm, codes, err := livedelta.NormalizeCodes(ctx, memory.DefaultAllocator, a.schema, rec, 0, kn, kn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(norm.Release)
		return normBatch{norm, codes}
	}
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("new=%d", n), func(b *testing.B) {
			st := livedelta.Empty(a.schema)
			k := 0
			for ; k < n/10_000; k++ {
				st = a.appended(b, st, uint64(k), normalized(k))
			}
			next := normalized(k) // the batch every iteration appends to st
			for b.Loop() {
				b.StopTimer()
				p := a.prepare(b, next)
				b.StartTimer()
				st2, err := st.AppendPrepared(ctx, memory.DefaultAllocator, p, uint64(k+1), uint64(k+1), a.v.base)
				if err != nil {
					b.Fatal(err)
				}
				c := query.NewComposite(a.v.base, st2)
				b.StopTimer()
				if c.Info().Series != int64(a.v.snap.Index().Len()+n+10_000) {
					b.Fatalf("%d series", c.Info().Series)
				}
				p.Release()
				b.StartTimer()
			}
		})
	}
}

// newSeriesBatch is n rows of series the benchmark base lacks ("N.k"…),
// one row each, with the dataset's attribute.
func newSeriesBatch(k, n int) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "category", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	for i := k; i < k+n; i++ {
		bld.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("N.%07d", i))
		bld.Field(1).(*array.Date32Builder).Append(10957)
		bld.Field(2).(*array.Float64Builder).Append(float64(i))
		bld.Field(3).(*array.StringBuilder).Append("c")
	}
	return bld.NewRecordBatch()
}

// BenchmarkRebase: what a compaction's swap (DropFrozen) or a reload
// (Rebase) holds the writer's lock for when the delta holds 16 batches
// (160k rows over all 100k series of the base), every write waiting.
// whole: the rebase made under the lock, as it was. catchup: the rebase
// made beforehand from the State of a moment earlier, one batch written
// since (livedelta.State.CatchUp after live.Writer.HoldMerges): what the lock
// holds now.
func BenchmarkRebase(b *testing.B) {
	a := newAckBench(b)
	batches := a.batches(b, 17, func(k int) bool { return k%2 == 0 })
	pre := a.appended(b, livedelta.Empty(a.schema), 0, batches[:16]...)
	st := a.appended(b, pre, 16, batches[16])
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			st.Rebase(a.v.base)
		}
	})
	b.Run("catchup", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			done := pre.Rebase(a.v.base)
			b.StartTimer()
			if _, ok := st.CatchUp(pre, done); !ok {
				b.Fatal("not caught up")
			}
		}
	})
}
