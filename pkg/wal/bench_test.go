package wal

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchDir is where benchmarks write: $WAL_BENCH_DIR if set (to compare
// file systems, e.g. /dev/shm), else the test's temporary directory.
func benchDir(b *testing.B) string {
	if d := os.Getenv("WAL_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "walbench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

// BenchmarkAppend measures durable appends: each Append returns after its
// fsync. Records of 200 KiB stand for a 10k-row DoPut batch, 1 KiB for a
// small one; with more concurrent appenders, group commit shares each
// fsync among more records (records/write).
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 200 << 10} {
		for _, writers := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("size=%dKiB/writers=%d", size>>10, writers), func(b *testing.B) {
				w, err := Open(benchDir(b), Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				p := payload(1, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				var next atomic.Int64
				lat := make([][]time.Duration, writers)
				for g := range lat {
					lat[g] = make([]time.Duration, 0, b.N/writers+1)
				}
				var wg sync.WaitGroup
				writes0 := w.writes.Load()
				b.ResetTimer()
				for g := range writers {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							if _, err := w.Append(context.Background(), p); err != nil {
								b.Error(err)
								return
							}
							lat[g] = append(lat[g], time.Since(t0))
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				all := slices.Concat(lat...)
				slices.Sort(all)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
				b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(b.N)/float64(w.writes.Load()-writes0), "records/write")
			})
		}
	}
}

// BenchmarkAppendPaced is one writer appending 200 KiB records at a fixed
// rate, as the server's acks are paced in production (about 25-100 DoPut
// batches a second): each Append is due at its slot and its latency runs
// from its start to its return, so the figures are those of
// an fsync on an otherwise idle log rather than of a saturated one.
func BenchmarkAppendPaced(b *testing.B) {
	for _, rate := range []int{50} {
		b.Run(fmt.Sprintf("size=200KiB/rate=%d", rate), func(b *testing.B) {
			w, err := Open(benchDir(b), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			p := payload(1, 200<<10)
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			interval := time.Second / time.Duration(rate)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			due := time.Now()
			for range b.N {
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				}
				t0 := time.Now()
				if _, err := w.Append(context.Background(), p); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				due = due.Add(interval)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkReplay measures start-up replay of 64 MiB of 200 KiB records.
func BenchmarkReplay(b *testing.B) {
	w, total := replayBenchLog(b)
	defer w.Close()
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Replay(Position{}, func(Position, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// replayBenchLog is a log of 64 MiB of 200 KiB records, appended eight to
// a group, and its size.
func replayBenchLog(b *testing.B) (*WAL, int64) {
	w, err := Open(benchDir(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := payload(1, 200<<10)
	var total int64
	for total < 64<<20 {
		batch := [][]byte{p, p, p, p, p, p, p, p}
		if _, err := w.Append(context.Background(), batch...); err != nil {
			w.Close()
			b.Fatal(err)
		}
		total += int64(len(batch) * len(p))
	}
	return w, total
}
