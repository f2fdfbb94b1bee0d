package compact_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/compact"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// BenchmarkCompactMemory compacts a delta of 100k rows (a revision, an
// appended period and a series the base lacks, for 33k series each) into
// bases of growing size, and reports the process's peak RssAnon above
// what it held before the compaction (peak-MiB) and what it holds after
// (retained-MiB, after debug.FreeOSMemory, as a server calls it after a
// compaction): a compaction's memory should follow
// the delta and a fixed budget, not the base. (The 1M-series base takes
// a minute or more to build, once per process.)
func BenchmarkCompactMemory(b *testing.B) {
	for _, series := range []int{100_000, 400_000, 1_000_000} {
		b.Run(strconv.Itoa(series), func(b *testing.B) {
			src := testsnap.Uniform(b, series, 10)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				root := testsnap.PrivateCopy(b, src)
				dir := filepath.Join(root, "B")
				s, err := snapshot.Open(dir, snapshot.Options{})
				if err != nil {
					b.Fatal(err)
				}
				base, err := query.FromSnapshot("B", s)
				if err != nil {
					b.Fatal(err)
				}
				st := memoryDelta(b, s, base, series)
				runtime.GC()
				debug.FreeOSMemory()
				before := rssAnon(b)
				var peak atomic.Int64
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { // sample RssAnon while the compaction runs
					defer wg.Done()
					t := time.NewTicker(5 * time.Millisecond)
					defer t.Stop()
					for {
						if v := rssAnon(b); v > peak.Load() {
							peak.Store(v)
						}
						select {
						case <-stop:
							return
						case <-t.C:
						}
					}
				}()
				b.StartTimer()
				_, err = compact.Publish(context.Background(), s.Dataset, query.NewComposite(base, st), s.Manifest, 1, compact.Options{})
				b.StopTimer()
				close(stop)
				wg.Wait()
				if err != nil {
					b.Fatal(err)
				}
				st = nil
				s.Close()
				debug.FreeOSMemory() // as a server does after a compaction
				b.ReportMetric(float64(peak.Load()-before)/(1<<20), "peak-MiB")
				b.ReportMetric(float64(rssAnon(b)-before)/(1<<20), "retained-MiB")
			}
		})
	}
}

// memoryDelta is 100k rows over base: 33k revisions, 33k appends and 33k
// rows of series the base lacks.
func memoryDelta(b *testing.B, s *snapshot.Snapshot, base *query.SnapshotReader, series int) *livedelta.State {
	fields, _ := s.Index().Attributes()
	sc, err := livedelta.NewSchema(s.Schema(), fields)
	if err != nil {
		b.Fatal(err)
	}
	ids := testlake.UniformIDs(series)
	fresh := make([]string, 33_333)
	for i := range fresh {
		fresh[i] = "T." + strconv.Itoa(1_000_000+i)
	}
	mem := memory.NewGoAllocator()
	st := livedelta.Empty(sc)
	for k, w := range []struct {
		ids    []string
		revise bool
	}{{ids, true}, {ids, false}, {fresh, false}} {
		rec := testlake.UniformBatch(w.ids, 0, 33_333, w.revise)
		if k == 2 { // new series give their attributes
			cb := array.NewStringBuilder(mem)
			for j := 0; j < int(rec.NumRows()); j++ {
				cb.Append("Cat/new")
			}
			cat := cb.NewArray()
			cols := append(append([]arrow.Array{}, rec.Columns()...), cat)
			fs := append(append([]arrow.Field{}, rec.Schema().Fields()...), arrow.Field{Name: "category", Type: arrow.BinaryTypes.String})
			with := array.NewRecordBatch(arrow.NewSchema(fs, nil), cols, rec.NumRows())
			cat.Release()
			cb.Release()
			rec.Release()
			rec = with
		}
		norm, err := livedelta.Normalize(context.Background(), mem, sc, rec, k, base)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
		if st, err = st.Apply(context.Background(), mem, norm, uint64(k+1), uint64(k+1), base); err != nil {
			b.Fatal(err)
		}
		norm.Release()
	}
	return st
}

// rssAnon is the process's resident anonymous memory in bytes.
func rssAnon(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status: RssAnon is Linux's")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no RssAnon in /proc/self/status")
	return 0
}
