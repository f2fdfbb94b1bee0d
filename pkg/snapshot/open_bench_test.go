package snapshot_test

// BenchmarkOpen measures what a server pays per dataset at start-up:
// snapshot.Open without VerifyData, warm page cache, by number of series
// (one row each, so the lake stays small and only the index grows). Each
// case also reports the anonymous memory of a fresh process that opened
// the snapshot (MiB-anon-open, from /proc/self/status in a subprocess, so
// the benchmark's own heap does not count):
//
//	go test -run '^$' -bench Open -benchtime 20x ./pkg/snapshot/
//
// The datasets are built once into $SERVINGSNAP_OPEN_BENCH_DIR when set
// (kept between runs: build them with one version of the code and open
// them with another), else into a temporary directory.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// envRSSChild names the dataset a child process opens to report its
// anonymous memory; see init.
const envRSSChild = "SERVINGSNAP_OPEN_RSS_CHILD"

// init turns the test binary into the RssAnon probe when the benchmark
// re-executes it: open the dataset, collect garbage, print RssAnon before
// and after in MiB, exit. (No TestMain, so the package's other tests are
// free to define one.)
func init() {
	ds := os.Getenv(envRSSChild)
	if ds == "" {
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := rssAnon()
	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runtime.GC()
	debug.FreeOSMemory()
	after := rssAnon()
	fmt.Printf("rss %.2f %.2f\n", before, after)
	s.Close()
	os.Exit(0)
}

func rssAnon() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return -1
}

func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000, 2_800_000} {
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			ds := openBenchDataset(b, n)
			b.ReportAllocs()
			lat := make([]time.Duration, 0, 64)
			for b.Loop() {
				t0 := time.Now()
				s, err := snapshot.Open(ds, snapshot.Options{})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				s.Close()
			}
			if len(lat) > 0 {
				sortDurations(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
			}
			before, after := childRSS(b, ds)
			b.ReportMetric(before, "MiB-anon-base")
			b.ReportMetric(after, "MiB-anon-open")
		})
	}
}

func sortDurations(d []time.Duration) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// childRSS re-executes the test binary as the probe of init.
func childRSS(b *testing.B, ds string) (before, after float64) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRSSChild+"="+ds)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("probe: %v: %s", err, out)
	}
	if _, err := fmt.Sscanf(string(out), "rss %g %g", &before, &after); err != nil {
		b.Fatalf("probe output %q: %v", out, err)
	}
	return before, after
}

var benchTmp string

// openBenchDataset returns a dataset of n one-row series, building it once.
func openBenchDataset(b *testing.B, n int) string {
	b.Helper()
	root := os.Getenv("SERVINGSNAP_OPEN_BENCH_DIR")
	if root == "" {
		if benchTmp == "" {
			d, err := os.MkdirTemp("", "open-bench-")
			if err != nil {
				b.Fatal(err)
			}
			benchTmp = d
			// The directory outlives this benchmark on purpose (the other
			// cases reuse it); the OS temp cleaner or the caller removes it.
		}
		root = benchTmp
	}
	ds := filepath.Join(root, fmt.Sprintf("series-%d", n), "B")
	if _, err := os.Stat(filepath.Join(ds, "CURRENT")); err == nil {
		return ds
	}
	lake := filepath.Join(root, fmt.Sprintf("series-%d", n), "lake")
	writeOneRowLake(b, lake, n)
	if _, err := sortwrite.Build(context.Background(), sortwrite.Options{Input: lake, Out: ds, Parallel: runtime.GOMAXPROCS(0)}); err != nil {
		b.Fatal(err)
	}
	os.RemoveAll(lake)
	return ds
}

// writeOneRowLake writes n series of one row each with EIA-like
// attributes: units (3 values) and category (20 values), which the v1
// writer dictionary-encodes, and a name unique to each series.
func writeOneRowLake(b *testing.B, dir string, n int) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "units", Type: arrow.BinaryTypes.String},
		{Name: "category", Type: arrow.BinaryTypes.String},
		{Name: "name", Type: arrow.BinaryTypes.String},
	}, nil)
	f, err := os.Create(filepath.Join(dir, "part-0.parquet"))
	if err != nil {
		b.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1<<20)), pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	units := []string{"$/bbl", "$/MMBtu", "thousand barrels per day"}
	rows := 0
	flush := func() {
		rec := bld.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
		rows = 0
	}
	for s := 0; s < n; s++ {
		bld.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("PET.S%07d.M", s))
		bld.Field(1).(*array.Date32Builder).Append(arrow.Date32(10957 + s%3650))
		bld.Field(2).(*array.Float64Builder).Append(float64(s) / 7)
		bld.Field(3).(*array.StringBuilder).Append(units[s%3])
		bld.Field(4).(*array.StringBuilder).Append("Category " + strconv.Itoa(s%20))
		bld.Field(5).(*array.StringBuilder).Append("Weekly product supplied, series " + strconv.Itoa(s))
		if rows++; rows == 1<<20 {
			flush()
		}
	}
	flush()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}
