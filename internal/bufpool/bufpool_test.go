package bufpool_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/bufpool"
)

// TestRecycler: a recycled buffer comes back zeroed, as from Go's
// allocator, and Reallocate keeps the bytes it had and zeroes the rest,
// whether it grows in place or moves to a larger class; for both
// allocators.
func TestRecycler(t *testing.T) {
	for name, r := range map[string]memory.Allocator{"Recycler": &bufpool.Recycler{}, "Kept": &bufpool.Kept{Keep: 2}} {
		t.Run(name, func(t *testing.T) { checkRecycles(t, r) })
	}
}

func checkRecycles(t *testing.T, r memory.Allocator) {
	for _, tc := range []struct {
		name         string
		size, resize int
	}{
		{"small in place", 100, 3000},
		{"grow to the next class", 5000, 9000},
		{"grow several classes", 4096, 1 << 20},
		{"shrink", 9000, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 3 { // the second and third rounds take recycled buffers
				b := r.Allocate(tc.size)
				if len(b) != tc.size {
					t.Fatalf("Allocate(%d) is %d bytes", tc.size, len(b))
				}
				for i, v := range b {
					if v != 0 {
						t.Fatalf("Allocate(%d): byte %d is %d, want 0", tc.size, i, v)
					}
				}
				for i := range b {
					b[i] = byte(i%251 + 1)
				}
				nb := r.Reallocate(tc.resize, b)
				if len(nb) != tc.resize {
					t.Fatalf("Reallocate(%d) is %d bytes", tc.resize, len(nb))
				}
				for i, v := range nb {
					want := byte(0)
					if i < tc.size {
						want = byte(i%251 + 1)
					}
					if v != want {
						t.Fatalf("Reallocate(%d) of %d bytes: byte %d is %d, want %d", tc.resize, tc.size, i, v, want)
					}
				}
				// Dirty the whole capacity before handing it back.
				full := nb[:cap(nb)]
				for i := range full {
					full[i] = 0xff
				}
				r.Free(nb)
			}
		})
	}
}

// TestKeptBound: Kept reuses what it keeps, and keeps at most Keep buffers
// of a size.
func TestKeptBound(t *testing.T) {
	k := &bufpool.Kept{Keep: 2}
	bufs := [][]byte{k.Allocate(5000), k.Allocate(5000), k.Allocate(5000)}
	for _, b := range bufs {
		k.Free(b)
	}
	// Two are kept: the next two allocations reuse them, the third is new.
	reused := 0
	for range 3 {
		b := k.Allocate(6000)
		for _, o := range bufs {
			if &b[:cap(b)][cap(b)-1] == &o[:cap(o)][cap(o)-1] {
				reused++
			}
		}
	}
	if reused != 2 {
		t.Fatalf("%d of 3 allocations reused a kept buffer, want 2", reused)
	}
	k.Free(make([]byte, 5000)) // not one of its own: left to the collector
	if b := k.Allocate(5000); cap(b) != 8192 {
		t.Fatalf("capacity %d, want the 8 KiB class", cap(b))
	}
}
