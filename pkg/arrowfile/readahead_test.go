//go:build linux

package arrowfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"
)

// TestReadAhead: after ReadAhead every page of a mapped file that was not
// in the page cache is, whatever the chunk size against the file's; a bad
// chunk, a file cut short while mapped and a cancelled context are errors.
func TestReadAhead(t *testing.T) {
	path := bigFile(t, 3<<20)
	for _, tc := range []struct {
		name  string
		chunk int64
		err   string
	}{
		{"chunks and a tail", 1 << 20, ""},
		{"one page a chunk", 4096, ""},
		{"a chunk larger than the file", 64 << 20, ""},
		{"zero chunk", 0, "want a positive size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Map(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			evict(t, path)
			if n := residentPages(t, m.Data); n == pages(m.Data) {
				t.Fatalf("all %d pages resident after eviction: the test cannot tell", n)
			}
			err = m.ReadAhead(context.Background(), tc.chunk)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadAhead: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := residentPages(t, m.Data); n != pages(m.Data) {
				t.Errorf("%d of %d pages resident after ReadAhead", n, pages(m.Data))
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		m, err := Map(path)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := m.ReadAhead(ctx, 1<<20); !errors.Is(err, context.Canceled) {
			t.Errorf("ReadAhead after cancel: %v, want context.Canceled", err)
		}
	})
	t.Run("file cut short", func(t *testing.T) {
		cut := filepath.Join(t.TempDir(), "cut.arrow")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cut, b, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Map(cut)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := os.Truncate(cut, int64(len(b)/2)); err != nil {
			t.Fatal(err)
		}
		if err := m.ReadAhead(context.Background(), 1<<20); err == nil || !strings.Contains(err.Error(), "file changed while mapped") {
			t.Errorf("ReadAhead of a truncated file: %v, want an error saying it changed", err)
		}
	})
}

// TestReadAheadMaps: after ReadAhead a first touch of every page of the
// mapping takes (almost) no page fault: the pages are in the process's
// page tables, not only in the page cache. Without the mapping step a
// touch faults every fault-around window (16 pages by default), 48 times
// for this file.
func TestReadAheadMaps(t *testing.T) {
	path := bigFile(t, 3<<20)
	m, err := Map(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	evict(t, path)
	if err := m.ReadAhead(context.Background(), 1<<20); err != nil {
		t.Fatal(err)
	}
	if populateRefused.Load() {
		t.Fatalf("the kernel (%s) refused MADV_POPULATE_READ: ReadAhead cannot map pages here", kernelRelease(t))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	faults := func() int64 {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
			t.Fatal(err)
		}
		return ru.Minflt + ru.Majflt
	}
	sum := byte(0)
	before := faults()
	for i := 0; i < len(m.Data); i += os.Getpagesize() {
		sum += m.Data[i]
	}
	n := faults() - before
	runtime.KeepAlive(sum)
	if n > 4 {
		t.Errorf("%d page faults touching %d pages after ReadAhead, want none", n, pages(m.Data))
	}
}

func kernelRelease(t *testing.T) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// bigFile writes an Arrow IPC file of one int64 column of about n bytes.
func bigFile(t *testing.T, n int) string {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n / 8 {
		b.Append(int64(i) * 7919)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	path := filepath.Join(t.TempDir(), "big.arrow")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sc))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path
}

// evict drops a file's pages from the page cache.
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

func pages(b []byte) int { return (len(b) + os.Getpagesize() - 1) / os.Getpagesize() }

// residentPages counts the pages of a mapping that are in the page cache.
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, pages(b))
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
