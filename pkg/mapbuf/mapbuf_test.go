package mapbuf

import (
	"bytes"
	"os"
	"runtime"
	"testing"
)

// fill appends n bytes of a pattern that tells positions apart.
func fill(b *Buf, n int) []byte {
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*7 + i>>8)
	}
	for i := 0; i < n; i += 1000 {
		b.Append(want[i:min(i+1000, n)]...)
	}
	return want
}

func TestBufGrowth(t *testing.T) {
	for _, tc := range []struct {
		name       string
		heapMax    int
		n          int
		wantMapped bool
	}{
		{"small stays on the heap", 1 << 20, 100_000, false},
		{"past the heap limit moves to a file", 64 << 10, 100_000, true},
		{"growth across several remaps", 0, 5 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			a := NewArena(dir, tc.heapMax)
			b := a.New()
			want := fill(b, tc.n)
			z := b.AppendZeros(3)
			if !bytes.Equal(z, []byte{0, 0, 0}) {
				t.Fatalf("AppendZeros = %v", z)
			}
			want = append(want, 0, 0, 0)
			if err := a.Err(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Fatalf("buffer holds %d bytes differing from the %d appended", b.Len(), len(want))
			}
			mapped := a.Mapped() > 0
			if mapped != tc.wantMapped && runtime.GOOS == "linux" {
				t.Fatalf("mapped = %v, want %v", mapped, tc.wantMapped)
			}
			b.Bytes()[1] = 42 // changed in place
			if b.Bytes()[1] != 42 {
				t.Fatal("a change in place did not hold")
			}
			// The files are unlinked from the start: nothing to clean up.
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("dir holds %d entries, want none (%s)", len(ents), ents[0].Name())
			}
			if err := a.Release(); err != nil {
				t.Fatal(err)
			}
			if b.Len() != 0 || a.Mapped() != 0 {
				t.Fatalf("after Release: %d bytes held, %d mapped", b.Len(), a.Mapped())
			}
			if err := a.Release(); err != nil {
				t.Fatalf("second Release: %v", err)
			}
		})
	}
}
