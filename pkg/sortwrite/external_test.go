package sortwrite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/verify"
)

// sameSnapshot fails unless the two datasets' current snapshots hold
// byte-identical data and index files (checksums and sizes in the
// manifests) and the same statistics.
func sameSnapshot(t *testing.T, a, b string) {
	t.Helper()
	load := func(dir string) *manifest.Manifest {
		ds, err := dataset.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ds.Current()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := load(a), load(b)
	for _, role := range []string{manifest.RoleData, manifest.RoleIndex} {
		fa, _ := ma.FileByRole(role)
		fb, _ := mb.FileByRole(role)
		if fa.Checksum != fb.Checksum || fa.Size != fb.Size || fa.Rows != fb.Rows || fa.Batches != fb.Batches {
			t.Errorf("%s differs: in memory %+v, external %+v", role, fa, fb)
		}
	}
	if fmt.Sprint(ma.Stats) != fmt.Sprint(mb.Stats) || fmt.Sprint(ma.Schema) != fmt.Sprint(mb.Schema) {
		t.Errorf("stats or schema differ:\n%+v %+v\n%+v %+v", ma.Stats, ma.Schema, mb.Stats, mb.Schema)
	}
}

func deepVerify(t *testing.T, ds, lake string) {
	t.Helper()
	rep, err := verify.Verify(ds, verify.Options{Deep: true, Against: lake})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("snapverify --deep --against: %+v", rep.Findings)
	}
}

// TestExternalMatchesInMemory: a build under a budget far below the
// in-memory need (many runs) writes the very bytes of the in-memory build.
func TestExternalMatchesInMemory(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 1500, Seed: 7, RowGroupRows: 4000, FilesPerYear: 2}); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []int{0, 5000} {
		t.Run(fmt.Sprint("batch-rows=", batch), func(t *testing.T) {
			mem := filepath.Join(root, fmt.Sprint("MEM", batch))
			ext := filepath.Join(root, fmt.Sprint("EXT", batch))
			ms, err := build(t, lake, mem, func(o *Options) { o.BatchRows = batch })
			if err != nil {
				t.Fatal(err)
			}
			if ms.External {
				t.Fatal("the reference build should run in memory")
			}
			es, err := build(t, lake, ext, func(o *Options) { o.BatchRows = batch; o.MemoryLimit = 2 << 20 })
			if err != nil {
				t.Fatal(err)
			}
			if !es.External || es.Runs < 5 || es.SpillBytes == 0 {
				t.Fatalf("want an external build of several runs, got external=%v runs=%d spill=%d", es.External, es.Runs, es.SpillBytes)
			}
			t.Logf("%d rows, %d series: %d runs, %d spill bytes", es.Rows, es.Series, es.Runs, es.SpillBytes)
			sameSnapshot(t, mem, ext)
			deepVerify(t, ext, lake)
			left, _ := os.ReadDir(filepath.Join(ext, dataset.TmpDir))
			if len(left) != 0 {
				t.Errorf("staging area not empty after the build: %v", left)
			}
		})
	}
}

// TestExternalEdgeCases: duplicates across runs (both policies), a column
// constant in some series only, nulls, missing columns, and sorted input.
func TestExternalEdgeCases(t *testing.T) {
	const n = 6000
	mk := func(t *testing.T, dup bool, sorted bool) string {
		lake := t.TempDir()
		for f := range 3 {
			var ids, pers, vals, units, note []any
			for i := range n {
				s := i % 97
				if sorted {
					s = i * 97 / n
				}
				y := 1900 + f*(n/97+1) + i/97
				if sorted {
					y = 1900 + f*(n/97+1) + i%(n/97+1)
				}
				ids = append(ids, fmt.Sprintf("S%03d", s))
				pers = append(pers, strconv.Itoa(y))
				if i%13 == 0 {
					vals = append(vals, nil)
				} else {
					vals = append(vals, float64(i*10+f))
				}
				units = append(units, fmt.Sprint("u", s%5))
				if s%3 == 0 {
					note = append(note, fmt.Sprint("n", i%2))
				} else {
					note = append(note, nil)
				}
			}
			if dup && f == 2 {
				// Rows repeating keys of file 0: later input wins with "last".
				pers = append([]any{}, pers...)
				for i := range n {
					if !sorted {
						pers[i] = strconv.Itoa(1900 + i/97)
					}
				}
			}
			cols := []testlake.Col{{Name: "series_id", Vals: ids}, {Name: "period", Vals: pers}, {Name: "value", Vals: vals}, {Name: "units", Vals: units}}
			if f != 1 {
				cols = append(cols, testlake.Col{Name: "note", Vals: note})
			}
			testlake.WriteParquet(t, lake, fmt.Sprintf("part-%d.parquet", f), 1000, cols...)
		}
		return lake
	}
	for _, c := range []struct {
		name        string
		dup, sorted bool
		onDup       string
	}{
		{"shuffled", false, false, ""},
		{"sorted", false, true, ""},
		{"duplicates-last", true, false, OnDuplicateLast},
		{"duplicates-error", true, false, OnDuplicateError},
	} {
		t.Run(c.name, func(t *testing.T) {
			lake := mk(t, c.dup, c.sorted)
			root := t.TempDir()
			mem, ext := filepath.Join(root, "MEM"), filepath.Join(root, "EXT")
			mod := func(limit int64) func(*Options) {
				return func(o *Options) { o.OnDuplicate = c.onDup; o.MemoryLimit = limit; o.BatchRows = 700 }
			}
			_, merr := build(t, lake, mem, mod(0))
			es, eerr := build(t, lake, ext, mod(200<<10))
			if c.onDup == OnDuplicateError {
				if merr == nil || eerr == nil || !strings.Contains(eerr.Error(), "duplicate key") {
					t.Fatalf("want duplicate errors, got %v / %v", merr, eerr)
				}
				if merr.Error() != eerr.Error() {
					t.Errorf("errors differ:\n%v\n%v", merr, eerr)
				}
				if left, _ := os.ReadDir(filepath.Join(ext, dataset.TmpDir)); len(left) != 0 {
					t.Errorf("a failed build left %v in the staging area", left)
				}
				return
			}
			if merr != nil || eerr != nil {
				t.Fatal(merr, eerr)
			}
			if !es.External || es.Runs < 3 {
				t.Fatalf("external=%v runs=%d", es.External, es.Runs)
			}
			sameSnapshot(t, mem, ext)
			deepVerify(t, ext, lake)
		})
	}
}

// TestExternalRowGroupOverBudget: a row group bigger than a run is refused
// with a message naming it, not read into memory.
func TestExternalRowGroupOverBudget(t *testing.T) {
	lake := t.TempDir()
	var ids, pers []any
	for i := range 50000 {
		ids = append(ids, fmt.Sprint("S", i%10))
		pers = append(pers, strconv.Itoa(1000+i/10))
	}
	testlake.WriteParquet(t, lake, "big.parquet", 0, testlake.Col{Name: "series_id", Vals: ids}, testlake.Col{Name: "period", Vals: pers},
		testlake.Col{Name: "value", Vals: testlake.Repeat(1.0, 50000)})
	_, err := build(t, lake, filepath.Join(t.TempDir(), "DS"), func(o *Options) { o.MemoryLimit = 100 << 10 })
	if err == nil || !strings.Contains(err.Error(), "big.parquet row group 0 holds 50000 rows") {
		t.Fatalf("got %v", err)
	}
}

// TestExternalPeakRSS builds a 600k-row lake in a child process, in memory
// and under a budget, and reports both peaks (rusage maxrss). It asserts
// only that the external build's peak is below the in-memory build's.
// (At 300k rows the in-memory build, its arrays off the Go heap since
// bigmem.go, peaked no higher than the external one: both were the
// process's baseline.)
func TestExternalPeakRSS(t *testing.T) {
	if lake := os.Getenv("SORTWRITE_RSS_CHILD_LAKE"); lake != "" {
		limit, _ := strconv.ParseInt(os.Getenv("SORTWRITE_RSS_CHILD_LIMIT"), 10, 64)
		s, err := Build(context.Background(), Options{Input: lake, Out: os.Getenv("SORTWRITE_RSS_CHILD_OUT"), MemoryLimit: limit, BatchRows: 1 << 16})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("external=%v runs=%d peak=%d\n", s.External, s.Runs, s.PeakRSS)
		os.Exit(0)
	}
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 24000, Seed: 3, RowGroupRows: 20000}); err != nil {
		t.Fatal(err)
	}
	peak := func(name string, limit int64) int64 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestExternalPeakRSS$")
		cmd.Env = append(os.Environ(), "SORTWRITE_RSS_CHILD_LAKE="+lake, "SORTWRITE_RSS_CHILD_OUT="+filepath.Join(root, name),
			"SORTWRITE_RSS_CHILD_LIMIT="+strconv.FormatInt(limit, 10))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		// The child's own VmHWM (Summary.PeakRSS), not its rusage: Linux
		// carries the parent's high-water mark over a vfork+exec into the
		// child's ru_maxrss, so once the build peaked below this test
		// process (the lake generated in it) both builds read the same.
		var external bool
		var runs int
		var peak int64
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "external=%t runs=%d peak=%d", &external, &runs, &peak); err != nil || peak <= 0 {
			t.Fatalf("%s: no peak RSS in the child's output (%v):\n%s", name, err, out)
		}
		t.Logf("%s (limit %d MiB): external=%v runs=%d peak RSS %d MiB", name, limit>>20, external, runs, peak>>20)
		return peak
	}
	mem := peak("MEM", 0)
	ext := peak("EXT", 48<<20)
	sameSnapshot(t, filepath.Join(root, "MEM"), filepath.Join(root, "EXT"))
	if ext >= mem {
		t.Errorf("external peak %d MiB is not below the in-memory peak %d MiB", ext>>20, mem>>20)
	}
}

// TestExternalStaleSpillRemoved: spill files a crashed build left in the
// staging area are removed by the next build.
func TestExternalStaleSpillRemoved(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 200, Seed: 1, RowGroupRows: 2000}); err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(root, "DS")
	stale := filepath.Join(ds, dataset.TmpDir, "build-123", "run-000000.spill")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := build(t, lake, ds, func(o *Options) { o.MemoryLimit = 256 << 10 })
	if err != nil {
		t.Fatal(err)
	}
	if !s.External {
		t.Fatal("want an external build")
	}
	if left, _ := os.ReadDir(filepath.Join(ds, dataset.TmpDir)); len(left) != 0 {
		t.Errorf("staging area holds %v after the build", left)
	}
}

// TestExternalMergePasses: with more runs than the merge reads at once,
// the runs are first merged a few at a time, in passes, into longer ones:
// the snapshot is still the in-memory build's, byte for byte, duplicates
// decided as in memory.
func TestExternalMergePasses(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 600, Seed: 3, RowGroupRows: 4000, FilesPerYear: 2}); err != nil {
		t.Fatal(err)
	}
	checks := 0
	defer func(f func(*external) int) { fanIn = f }(fanIn)
	fanIn = func(*external) int { checks++; return 3 }
	mem, ext := filepath.Join(root, "MEM"), filepath.Join(root, "EXT")
	if _, err := build(t, lake, mem, nil); err != nil {
		t.Fatal(err)
	}
	es, err := build(t, lake, ext, func(o *Options) { o.MemoryLimit = 2 << 20 })
	if err != nil {
		t.Fatal(err)
	}
	// More than 9 runs at 3 a time: at least two passes, then the check
	// that lets the final merge read the rest.
	if !es.External || es.Runs <= 9 || checks < 3 {
		t.Fatalf("want an external build merged in passes, got external=%v runs=%d fan-in checks=%d", es.External, es.Runs, checks)
	}
	sameSnapshot(t, mem, ext)
	if left, _ := os.ReadDir(filepath.Join(ext, dataset.TmpDir)); len(left) != 0 {
		t.Errorf("staging area not empty after the build: %v", left)
	}
}
