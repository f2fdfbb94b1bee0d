package arrowfile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteBehind: what goes through the write-behind reaches the file
// unchanged whatever the sizes of the writes, and writeback is started
// once per whole window written.
func TestWriteBehind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total int
		chunk int
	}{
		{"empty", 0, 1},
		{"under a window", writeBehindWindow - 1, 4096},
		{"one window exactly", writeBehindWindow, 1 << 20},
		{"windows and a tail, odd writes", 3*writeBehindWindow + 12345, 777_777},
		{"one write of many windows", 2*writeBehindWindow + 1, 2*writeBehindWindow + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]byte, tc.total)
			rng := rand.New(rand.NewPCG(1, uint64(tc.total)))
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			path := filepath.Join(t.TempDir(), "f")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w := &writeBehind{f: f}
			for p := want; len(p) > 0; {
				n := min(tc.chunk, len(p))
				if k, err := w.Write(p[:n]); err != nil || k != n {
					t.Fatalf("write %d: %d, %v", n, k, err)
				}
				p = p[n:]
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := w.started; got != int64(tc.total/writeBehindWindow*writeBehindWindow) {
				t.Errorf("writeback started for %d bytes of %d", got, tc.total)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("file differs from what was written (%d bytes, want %d)", len(got), len(want))
			}
		})
	}
}
