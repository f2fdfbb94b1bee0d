package mapbuf

import (
	"bytes"
	"os"
	"testing"
)

func TestBufReleaseClosesFiles(t *testing.T) {
	before := openFiles(t)
	a := NewArena(t.TempDir(), 0)
	for range 5 {
		fill(a.New(), 10_000)
	}
	if got := openFiles(t); got != before+5 {
		t.Fatalf("%d open files with 5 mapped buffers, want %d", got, before+5)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if got := openFiles(t); got != before {
		t.Fatalf("%d open files after Release, want %d", got, before)
	}
}

func TestBufGrowFailureKeepsBytes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		breakBuf func(t *testing.T, b *Buf)
	}{
		{"the file is closed (ftruncate and fallocate fail)", func(t *testing.T, b *Buf) { b.m.f.Close() }},
		{"the directory is gone before the first file", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := NewArena(dir, 0)
			b := a.New()
			var want []byte
			if tc.breakBuf != nil {
				want = fill(b, 1000)
				if a.Mapped() == 0 {
					t.Fatal("the buffer is not mapped")
				}
				tc.breakBuf(t, b)
			} else if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			want = append(want, fill(b, 3<<20)...) // past the first mapping
			if a.Err() == nil {
				t.Fatal("Err is nil after a failed growth")
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Fatalf("buffer holds %d bytes differing from the %d appended", b.Len(), len(want))
			}
			if a.Mapped() != 0 {
				t.Fatalf("%d bytes still mapped after the fallback to the heap", a.Mapped())
			}
			a.Release()
		})
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
