package served

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestCodeCache: the cache answers as the index does, for series the base
// has and ones it lacks, before and after its read map is rebuilt (more
// misses than the rebuild threshold), asked once and again.
func TestCodeCache(t *testing.T) {
	d, v := synView(t)
	x := v.snap.Index()
	c := d.codes(v)
	if d.codes(v) != c {
		t.Fatal("a second call made another cache for the same index")
	}
	var ids []string
	for i := 0; i < x.Len(); i++ {
		ids = append(ids, x.SeriesID(i))
	}
	for i := 0; i < 5000; i++ { // beyond the 4096 misses that rebuild it
		ids = append(ids, fmt.Sprintf("absent-%d", i))
	}
	for pass := 0; pass < 3; pass++ {
		r := c.reader()
		for _, id := range ids {
			want, wok := x.Lookup(id)
			got, ok := r.lookup(id)
			if ok != wok || (ok && got != want) {
				t.Fatalf("pass %d, %q: (%d, %v), the index says (%d, %v)", pass, id, got, ok, want, wok)
			}
		}
	}
	if n := len(*c.read.Load()); n < 4096 {
		t.Fatalf("read map holds %d series after %d misses: never rebuilt", n, len(ids))
	}
}

// TestCodeCacheGrows: from a table of 2 slots the cache grows many times
// while several goroutines fill it at once (tags collide in so small a
// table, so a probe must confirm the id), and every answer, then and
// after, is the index's.
func TestCodeCacheGrows(t *testing.T) {
	_, v := synView(t)
	x := v.snap.Index()
	c := newCodeCacheSlots(x, 2)
	var ids []string
	for i := 0; i < x.Len(); i++ {
		ids = append(ids, x.SeriesID(i), fmt.Sprintf("absent-%d", i))
	}
	check := func(from int) error {
		r := c.reader()
		for k := range ids {
			id := ids[(from+k)%len(ids)]
			want, wok := x.Lookup(id)
			got, ok := r.lookup(id)
			if ok != wok || (ok && got != want) {
				return fmt.Errorf("%q: (%d, %v), the index says (%d, %v)", id, got, ok, want, wok)
			}
		}
		return nil
	}
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() { errs <- check(g * 97) }()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := check(0); err != nil {
		t.Fatal(err)
	}
	tab := c.tab.Load()
	if len(tab.slots) < 2*x.Len() || tab.n.Load() < int64(x.Len()) {
		t.Fatalf("table of %d slots holds %d of %d series: did not grow to hold them", len(tab.slots), tab.n.Load(), x.Len())
	}
}

// TestCodeCacheLookupAll: a column at a time, the cache answers as the
// index does (rows of the base, rows it lacks, repeats), cold, warm, and
// with a table so small that first slots rarely answer.
func TestCodeCacheLookupAll(t *testing.T) {
	_, v := synView(t)
	x := v.snap.Index()
	bld := array.NewStringBuilder(memory.DefaultAllocator)
	defer bld.Release()
	for i := 0; i < x.Len(); i++ {
		bld.Append(x.SeriesID((i * 7) % x.Len()))
		bld.Append(fmt.Sprintf("absent-%d", i%13))
	}
	ids := bld.NewStringArray()
	defer ids.Release()
	for _, slots := range []int{2, codeTableMin} {
		c := newCodeCacheSlots(x, slots)
		for pass := 0; pass < 3; pass++ {
			codes := make([]int32, ids.Len())
			c.reader().lookupAll(ids, codes)
			for i, got := range codes {
				want, ok := x.Lookup(ids.Value(i))
				if !ok {
					want = -1
				}
				if int(got) != want {
					t.Fatalf("slots %d, pass %d, row %d %q: %d, the index says %d", slots, pass, i, ids.Value(i), got, want)
				}
			}
		}
	}
}

// BenchmarkCodeLookup: a DoPut batch's look-up of 10k distinct series (in
// no order) in the code cache of a 100k-series base: warm (every series
// remembered); new (the cache made, and its warming started, as the batch
// arrives: a dataset's first write); unwarmed (a new cache left to fill
// as writes name series, as a base over codeCacheMax series is). An op is
// one batch.
func BenchmarkCodeLookup(b *testing.B) {
	d := benchDataset(b, testsnap.Uniform(b, 100_000, 2))
	v := d.acquire()
	defer v.Release()
	x := v.snap.Index()
	ids := testlake.UniformIDs(x.Len())
	bld := array.NewStringBuilder(memory.DefaultAllocator)
	defer bld.Release()
	bld.AppendValues(ids[:10_000], nil)
	batch := bld.NewStringArray()
	defer batch.Release()
	codes := make([]int32, batch.Len())
	// cold: every batch other series, and the caches evicted between
	// batches (by a pass over 64 MiB), as a server sees them: its writes
	// come tens of milliseconds apart, with merges, GC and gRPC buffers
	// between them. warm: the same batch again, its rows hot.
	thrash := make([]byte, 64<<20)
	var batches []*array.String
	for k := 0; k+10_000 <= len(ids); k += 10_000 {
		bld.AppendValues(ids[k:k+10_000], nil)
		batches = append(batches, bld.NewStringArray())
	}
	defer func() {
		for _, a := range batches {
			a.Release()
		}
	}()
	for _, mode := range []string{"warm", "cold", "new", "unwarmed"} {
		b.Run(mode, func(b *testing.B) {
			c := newCodeCache(x)
			t0 := time.Now()
			c.warm()
			warmed := time.Since(t0)
			rot := 0
			for b.Loop() {
				if mode == "new" || mode == "unwarmed" {
					b.StopTimer()
					c = newCodeCache(x)
					b.StartTimer()
					if mode == "new" {
						go c.warm()
					}
				}
				if mode == "cold" {
					b.StopTimer()
					for i := 0; i < len(thrash); i += 64 {
						thrash[i]++
					}
					batch := batches[rot%len(batches)]
					rot++
					b.StartTimer()
					c.reader().lookupAll(batch, codes)
					continue
				}
				c.reader().lookupAll(batch, codes)
				if mode == "new" {
					b.StopTimer()
					c.retired.Store(true)
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch.Len()), "ns/row")
			b.ReportMetric(float64(warmed.Microseconds()), "warm-µs")
			if codes[0] < 0 {
				b.Fatalf("%q: not in the base", batch.Value(0))
			}
		})
	}
}

// TestCodeCacheWarm: warming remembers every series of the base (each is
// then found in the table itself, with no look-up in the index), and a
// retired cache is not warmed.
func TestCodeCacheWarm(t *testing.T) {
	_, v := synView(t)
	x := v.snap.Index()
	c := newCodeCache(x)
	c.warm()
	for i := 0; i < x.Len(); i++ {
		id := x.SeriesID(i)
		if code, ok := c.find(maphash.String(c.seed, id), id); !ok || code != i {
			t.Fatalf("series %d %q after warm: %d, %v", i, id, code, ok)
		}
	}
	r := newCodeCache(x)
	r.retired.Store(true)
	r.warm()
	if n := r.tab.Load().n.Load(); n != 0 {
		t.Errorf("a retired cache was warmed: %d series", n)
	}
}

// synView is a sample dataset (200 series) opened as a server opens it,
// and a view of it, both released when the test ends.
func synView(t *testing.T) (*Dataset, *View) {
	t.Helper()
	_, dir := testsnap.Sample(t, t.TempDir(), "SYN", 200, 3, func(o *sortwrite.Options) { o.BatchRows = 5000 })
	d, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	v, err := d.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Release)
	return d, v
}
