package sortwrite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// BenchmarkBuild builds a generated lake of SERVINGSNAP_BENCH_SERIES series
// (default 100,000: about 15M rows, the size of the extract the design was
// measured on). The lake is generated once and cached under the temp dir.
// Reported: build time per op, peak RSS of the build (VmHWM, reset after
// generation), index/data size ratio, rows/s.
//
//	go test -run '^$' -bench BenchmarkBuild -benchtime 3x ./pkg/sortwrite
func BenchmarkBuild(b *testing.B) { benchBuild(b, 0) }

// BenchmarkBuildExternal is BenchmarkBuild under a 512 MiB budget, or
// SERVINGSNAP_BENCH_MEMORY MiB: the external sort (the goal: at most 3×
// the in-memory build). A smaller lake needs a smaller budget to take the
// external path (the "runs" metric is 0 when it did not):
//
//	go test -run '^$' -bench BenchmarkBuildExternal -benchtime 3x ./pkg/sortwrite
//	SERVINGSNAP_BENCH_SERIES=7000 SERVINGSNAP_BENCH_MEMORY=256 go test -run '^$' -bench BenchmarkBuildExternal ./pkg/sortwrite
func BenchmarkBuildExternal(b *testing.B) {
	mem := int64(512)
	if v := os.Getenv("SERVINGSNAP_BENCH_MEMORY"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("SERVINGSNAP_BENCH_MEMORY=%q: want a positive number of MiB", v)
		}
		mem = n
	}
	benchBuild(b, mem<<20)
}

// BenchmarkSplitBuild is the two-phase sharded build of the same lake:
// 4 split parts, then 4 shard builds from their pieces (one op is all 8
// jobs, one after another). Reported beside the time: CPU per op and the
// bytes the jobs read as a multiple of the lake (bench/shard_split.py
// sets this against N shard builds of the lake).
//
//	go test -run '^$' -bench BenchmarkSplitBuild -benchtime 3x ./pkg/sortwrite
func BenchmarkSplitBuild(b *testing.B) {
	const n = 4
	lake := benchLake(b)
	var size int64
	filepath.Walk(lake, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	b.ReportAllocs()
	var read int64
	cpu0 := cpuTime()
	for b.Loop() {
		dir := b.TempDir()
		read = 0
		for j := range n {
			s, err := Split(context.Background(), Options{Input: lake, Shard: shard.Spec{Count: n}}, SplitPart{Index: j, Count: n}, filepath.Join(dir, "split"))
			if err != nil {
				b.Fatal(err)
			}
			read += s.BytesRead
		}
		for i := range n {
			sum, err := Build(context.Background(), Options{FromSplit: filepath.Join(dir, "split"), Out: filepath.Join(dir, "DS"), Shard: shard.Spec{Index: i, Count: n}})
			if err != nil {
				b.Fatal(err)
			}
			read += sum.BytesRead
		}
		os.RemoveAll(dir)
	}
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(read)/float64(size), "read-x-lake")
}

// benchLake is the generated lake of SERVINGSNAP_BENCH_SERIES series
// (default 100,000), cached under the temp dir.
func benchLake(b *testing.B) string {
	series := 100000
	if v := os.Getenv("SERVINGSNAP_BENCH_SERIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		series = n
	}
	lake := filepath.Join(os.TempDir(), fmt.Sprintf("servingsnap-bench-lake-%d", series))
	if _, err := os.Stat(lake); err != nil {
		if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: series, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return lake
}

func benchBuild(b *testing.B, memory int64) {
	lake := benchLake(b)
	resetPeakRSS()
	b.ReportAllocs()
	var sum *Summary
	cpu0 := cpuTime()
	for b.Loop() {
		out := filepath.Join(b.TempDir(), "DS")
		var err error
		sum, err = Build(context.Background(), Options{Input: lake, Out: out, MemoryLimit: memory})
		if err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(out)
	}
	// CPU time (user+sys of the whole process) per build: on a shared
	// machine it moves far less with the load than the wall time does.
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	// Wall seconds per phase, of the last build.
	b.ReportMetric(sum.Phases.Read, "read-s")
	b.ReportMetric(sum.Phases.Sort, "sort-s")
	b.ReportMetric(sum.Phases.Write, "write-s")
	b.ReportMetric(float64(sum.Rows), "rows")
	b.ReportMetric(float64(sum.Rows)/sum.Seconds, "rows/s")
	b.ReportMetric(100*sum.IndexDataRatio, "index/data-%")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(sum.Runs), "runs")
}

// resetPeakRSS clears the kernel's high-water mark of this process's RSS
// (Linux: writing 5 to clear_refs), so the peak measured is the build's.
func resetPeakRSS() { os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// cpuTime is the process's user+sys CPU time so far (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
