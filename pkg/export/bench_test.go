package export_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// BenchmarkWritePortable writes the portable copy of a snapshot built from
// a generated lake of SERVINGSNAP_BENCH_SERIES series (default 20,000:
// about 3M rows; 100,000 is the 15M-row benchmark lake) to io.Discard: the
// copy's assembly, encoding and compression without the disk. The lake and
// its snapshot are built once and kept under the temp dir. Reported beside
// the wall time: CPU seconds (user+sys) per copy, which moves far less
// with the load of a shared machine, and rows/s.
//
//	go test -run '^$' -bench BenchmarkWritePortable -benchtime 3x ./pkg/export
func BenchmarkWritePortable(b *testing.B) {
	series := 20000
	if v := os.Getenv("SERVINGSNAP_BENCH_SERIES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		series = n
	}
	ds := benchSnapshot(b, series)
	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r, err := query.FromSnapshot("DS", s)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var (
		res *export.PortableResult
		out countingDiscard
	)
	cpu0 := cpuTime()
	for b.Loop() {
		out = 0
		if res, err = export.WritePortable(context.Background(), r, &out, export.PortableOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(out)/(1<<20), "MiB")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(res.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// countingDiscard discards what is written and counts its bytes.
type countingDiscard int64

func (c *countingDiscard) Write(p []byte) (int, error) {
	*c += countingDiscard(len(p))
	return len(p), nil
}

// benchSnapshot is dataset DS built from lakegen's lake of series series
// (seed 1), both kept under the temp dir across runs.
func benchSnapshot(b *testing.B, series int) string {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("servingsnap-bench-export-%d", series))
	ds := filepath.Join(dir, "root", "DS")
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return ds
	}
	os.RemoveAll(dir)
	lake := filepath.Join(dir, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: series, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	if _, err := sortwrite.Build(context.Background(), sortwrite.Options{Input: lake, Out: ds}); err != nil {
		b.Fatal(err)
	}
	os.RemoveAll(lake)
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return ds
}

// cpuTime is the process's user+sys CPU time so far (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
