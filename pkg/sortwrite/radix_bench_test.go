package sortwrite

import (
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSortRowsLake sorts keys shaped like the 15M-row benchmark lake
// (BenchmarkBuild): 100,000 series in random input order, month-start
// periods over 25 years (2000..2024), rows in year order (a file per year)
// with the months of a year mixed.
//
//	go test -run '^$' -bench BenchmarkSortRowsLake -benchtime 5x ./pkg/sortwrite
func BenchmarkSortRowsLake(b *testing.B) {
	const n, series = 15_000_000, 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	ranks := make([]uint32, series)
	for i, r := range rng.Perm(series) {
		ranks[i] = uint32(r)
	}
	months := make([]int32, 0, 300)
	for y := 2000; y <= 2024; y++ {
		for m := time.January; m <= time.December; m++ {
			months = append(months, int32(time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Unix()/86400))
		}
	}
	codes := make([]uint32, n)
	periods := make([]int32, n)
	for i := range codes {
		codes[i] = uint32(rng.IntN(series))
		periods[i] = months[(i*25/n)*12+rng.IntN(12)] // a file per year, months mixed
	}
	keys, scratch := make([]uint64, n), make([]uint64, n)
	// The sort is single-threaded: the thread's CPU time is its cost even
	// on a loaded machine, where the wall time is not.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	for b.Loop() {
		t0 := threadCPU()
		sortRowsInto(ranks, codes, periods, keys, scratch)
		cpu += threadCPU() - t0
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// threadCPU is the calling thread's user+system CPU time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSortRowsLakeParallel is BenchmarkSortRowsLake on every core (as
// the in-memory build sorts): wall time, and the process's CPU time.
//
//	go test -run '^$' -bench BenchmarkSortRowsLakeParallel -benchtime 5x ./pkg/sortwrite
func BenchmarkSortRowsLakeParallel(b *testing.B) {
	const n, series = 15_000_000, 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	ranks := make([]uint32, series)
	for i, r := range rng.Perm(series) {
		ranks[i] = uint32(r)
	}
	codes := make([]uint32, n)
	periods := make([]int32, n)
	for i := range codes {
		codes[i] = uint32(rng.IntN(series))
		periods[i] = int32(10957 + (i*25/n)*365 + rng.IntN(12)*30)
	}
	keys, scratch := make([]uint64, n), make([]uint64, n)
	w := runtime.GOMAXPROCS(0)
	cpu0 := cpuTime()
	for b.Loop() {
		sortRowsOn(ranks, codes, periods, keys, scratch, w)
	}
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}
