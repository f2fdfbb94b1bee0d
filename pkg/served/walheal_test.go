package served

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// TestWritesHealAfterFullDisk: a DoPut whose log write meets a full disk
// fails, and so do the next ones, naming the cause; status shows writes
// failing with the reason; once the disk has room the dataset takes
// writes again without a restart, and a restart replays exactly the
// acknowledged writes.
func TestWritesHealAfterFullDisk(t *testing.T) {
	root := testsnap.PrivateCopy(t, testsnap.Uniform(t, 200, 5))
	dir := filepath.Join(root, "B")
	var full atomic.Bool
	fault := func(op string, seg uint32) error {
		if full.Load() && (op == "write" || op == "create") {
			return syscall.ENOSPC
		}
		return nil
	}
	d, err := Open(dir, Options{WAL: wal.Options{Fault: fault, HealBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	ids := testlake.UniformIDs(200)
	put := func(seed int) error {
		w, err := d.Writer()
		if err != nil {
			return err
		}
		rec := testlake.UniformBatch(ids, seed, 100, false)
		defer rec.Release()
		_, err = d.Put(context.Background(), w, memory.DefaultAllocator, rec, 0)
		return err
	}
	if err := put(1000); err != nil {
		t.Fatal(err)
	}

	full.Store(true)
	for i := 0; i < 3; i++ {
		if err := put(2000 + i); !errors.Is(err, wal.ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("put %d on a full disk: %v, want wal.ErrFailed wrapping ENOSPC", i, err)
		}
	}
	time.Sleep(20 * time.Millisecond) // heals are tried, and fail
	st, _ := d.Status()
	if st.Writes != WritesFailing || !strings.Contains(st.WritesReason, "no space left on device") || !d.WritesFailing() {
		t.Fatalf("status while the disk is full: writes %q (%s)", st.Writes, st.WritesReason)
	}

	full.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for d.WritesFailing() {
		if time.Now().After(deadline) {
			st, _ := d.Status()
			t.Fatalf("writes did not heal: %s", st.WritesReason)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := put(3000); err != nil {
		t.Fatalf("put after the disk has room: %v", err)
	}
	st, _ = d.Status()
	if st.Writes != WritesWriter || st.Delta == nil || st.Delta.Writes != 2 {
		t.Fatalf("status after healing: writes %q, delta %+v", st.Writes, st.Delta)
	}
	rows := st.Delta.Rows

	d.Close()
	d, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Writer(); err != nil {
		t.Fatal(err)
	}
	st, _ = d.Status()
	// the refused writes left nothing: the log healed into a new segment
	if st.Delta == nil || st.Delta.Rows != rows || st.Delta.WALSegments != 2 {
		t.Fatalf("after a restart: delta %+v, want the 2 acknowledged writes (%d rows) in 2 segments", st.Delta, rows)
	}
}
