package testsnap

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

var (
	uniformMu   sync.Mutex
	uniformDir  string                // removed by RemoveUniform
	uniformRoot = map[string]string{} // "series-rows" → root
)

// Uniform is a root directory holding dataset "B", built from
// testlake.WriteUniform(series, rows): the benchmarks' base, built once
// per process and shared by every benchmark that asks for the same shape.
// It is read-only: a benchmark that writes takes a PrivateCopy. A test
// binary's TestMain calls RemoveUniform at exit.
func Uniform(t testing.TB, series, rows int) string {
	t.Helper()
	key := fmt.Sprintf("%d-%d", series, rows)
	uniformMu.Lock()
	defer uniformMu.Unlock()
	if r, ok := uniformRoot[key]; ok {
		return r
	}
	if uniformDir == "" {
		d, err := os.MkdirTemp("", "uniform-bench-")
		if err != nil {
			t.Fatal(err)
		}
		uniformDir = d
	}
	dir := filepath.Join(uniformDir, "bench-"+key)
	lake := filepath.Join(dir, "lake")
	testlake.WriteUniform(t, lake, series, rows)
	r := filepath.Join(dir, "root")
	if _, err := sortwrite.Build(context.Background(), sortwrite.Options{Input: lake, Out: filepath.Join(r, "B"), Parallel: runtime.GOMAXPROCS(0)}); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(lake)
	uniformRoot[key] = r
	return r
}

// RemoveUniform removes every root Uniform built.
func RemoveUniform() {
	uniformMu.Lock()
	defer uniformMu.Unlock()
	if uniformDir != "" {
		os.RemoveAll(uniformDir)
	}
	uniformDir, uniformRoot = "", map[string]string{}
}

// PrivateCopy is a copy of root src in a temporary directory of t's, for
// a test that writes to it: files are hard-linked (snapshot files are
// never modified), directories made anew, write-ahead logs and leases left
// out.
func PrivateCopy(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "root")
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			if e.Name() == dataset.WALDir || e.Name() == dataset.LeasesDir {
				return fs.SkipDir
			}
			return os.MkdirAll(to, 0o755)
		}
		return os.Link(p, to)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's build wrote (and its lake's removal freed) hundreds
	// of megabytes just before: flush them now, so that their writeback
	// and the journal's commit of them are not a cause of a measured
	// load's slow WAL fsyncs.
	syscall.Sync()
	return dst
}
