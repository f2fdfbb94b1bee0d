//go:build linux

package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestColdOpenReadsMetadataOnly: opening a snapshot whose files are not in
// the page cache reads the pages it touches (every batch's metadata, the
// footers), not a readahead window around each. The data file here has
// batches about a megabyte apart, so the kernel's default readahead (at
// least 128 KiB) would leave tens of pages resident per batch.
func TestColdOpenReadsMetadataOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1M-row sample")
	}
	root := t.TempDir()
	_, dir := testsnap.Sample(t, root, "cold", 8000, 7, func(o *sortwrite.Options) { o.BatchRows = 40_000 })
	evictDir(t, dir)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pages := (len(s.data.Data) + os.Getpagesize() - 1) / os.Getpagesize()
	vec := make([]byte, pages)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&s.data.Data[0])), uintptr(len(s.data.Data)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	batches := s.NumBatches()
	if batches < 10 {
		t.Fatalf("sample has %d batches, want at least 10 for the test to mean anything", batches)
	}
	// A batch's metadata is one page, sometimes two; the footer a few.
	if limit := 4*batches + 16; resident > limit {
		t.Errorf("cold open left %d of %d pages of %d batches resident, want at most %d", resident, pages, batches, limit)
	}
	t.Logf("%d batches, %d of %d pages resident after a cold open", batches, resident, pages)
}

// evictDir drops every file of dir from the page cache (after syncing it,
// as DONTNEED keeps dirty pages).
func evictDir(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return err
		}
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadAheadParts: after ReadAhead of an open snapshot's index and data
// file whose pages were evicted (all but those open mapped in), every page
// of both is in the page cache.
func TestReadAheadParts(t *testing.T) {
	root := t.TempDir()
	_, dir := testsnap.Sample(t, root, "ahead", 2000, 7, nil)
	evictDir(t, dir)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evictDir(t, dir)
	for _, p := range []Part{PartIndex, PartData} {
		m := s.index
		if p == PartData {
			m = s.data
		}
		if n, all := resident(t, m.Data); n == all {
			t.Fatalf("%s: all %d pages resident after eviction: the test cannot tell", p, n)
		}
		if err := s.ReadAhead(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		if n, all := resident(t, m.Data); n != all || int64(len(m.Data)) != s.Bytes(p) {
			t.Errorf("%s: %d of %d pages resident after ReadAhead (%d bytes, Bytes says %d)", p, n, all, len(m.Data), s.Bytes(p))
		}
	}
}

// resident counts the pages of a mapping in the page cache, and all of them.
func resident(t *testing.T, b []byte) (n, all int) {
	t.Helper()
	all = (len(b) + os.Getpagesize() - 1) / os.Getpagesize()
	vec := make([]byte, all)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, all
}
