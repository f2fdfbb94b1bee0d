package served

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsnap.RemoveUniform()
	os.Exit(code)
}

// benchDataset opens dataset B of root (a testsnap.Uniform root, or a
// PrivateCopy of one for a benchmark that writes), closed when b ends.
func benchDataset(b *testing.B, root string) *Dataset {
	b.Helper()
	d, err := Open(filepath.Join(root, "B"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	return d
}

// putDirect applies rows to dataset d through its write path (durably),
// in 10k-row batches of existing series.
func putDirect(b *testing.B, d *Dataset, ids []string, rows int, revise bool, seed int) {
	b.Helper()
	w, err := d.Writer()
	if err != nil {
		b.Fatal(err)
	}
	for k := 0; k < rows; k += 10_000 {
		rec := testlake.UniformBatch(ids, seed+k, min(10_000, rows-k), revise)
		_, err := d.Put(context.Background(), w, memory.DefaultAllocator, rec, 0)
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay: a WAL of 1.5M rows (150 writes of 10k rows) replayed
// onto the 15M-row base at open.
func BenchmarkReplay(b *testing.B) {
	root := testsnap.PrivateCopy(b, testsnap.Uniform(b, 100_000, 150))
	d := benchDataset(b, root)
	ids := testlake.UniformIDs(100_000)
	const rows = 1_500_000
	putDirect(b, d, ids, rows, false, 0)
	d.Close()
	dir := filepath.Join(root, "B")
	s, err := snapshot.Open(dir, snapshot.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	v, err := newView("B", s)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := schemaOf(v)
	if err != nil {
		b.Fatal(err)
	}
	var cpu, replayed int64
	for b.Loop() {
		cpu0 := liveCPUTime()
		w, info, err := live.Open(filepath.Join(dir, dsdir.WALDir), sc, 0, benchTarget{v}, live.Options{})
		if err != nil || info.Rows != rows {
			b.Fatalf("replay: %+v %v", info, err)
		}
		cpu += liveCPUTime() - cpu0
		replayed += info.Rows
		b.ReportMetric(float64(info.Rows)/info.Duration.Seconds(), "rows/s")
		w.Close()
	}
	b.ReportMetric(float64(cpu)/float64(max(replayed, 1)), "cpu-ns/row")
}

type benchTarget struct{ v *View }

func (t benchTarget) Base() livedelta.Base     { return t.v.base }
func (t benchTarget) Publish(*livedelta.State) {}

// liveCPUTime is the process's user and system CPU time in nanoseconds.
func liveCPUTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
