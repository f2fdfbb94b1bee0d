package delta

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestNumberByHash: the hash numbering gives every row its series'
// number, agreeing with the exact table, and owns up to a collision
// (hashes narrowed to 2 bits) so that probe falls back.
func TestNumberByHash(t *testing.T) {
	defer func(p int, h uint64) { bulkRowsPerPart, bulkHashBits = p, h }(bulkRowsPerPart, bulkHashBits)
	// Writes of a few rows each, ids repeating within and across them,
	// one write empty.
	var writes [][]string
	for k := range 12 {
		var ids []string
		for j := range (k * 7) % 23 {
			ids = append(ids, fmt.Sprintf("s%d", (k*j+j/3)%17))
		}
		writes = append(writes, ids)
	}
	b := &bulk{off: []int{0}}
	for _, ids := range writes {
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		sb.AppendValues(ids, nil)
		a := sb.NewStringArray()
		defer a.Release()
		b.ids = append(b.ids, a)
		b.off = append(b.off, b.off[len(b.off)-1]+len(ids))
	}
	b.n = b.off[len(b.off)-1]
	rowID := func(g int) string {
		for k := range writes {
			if g < b.off[k+1] {
				return writes[k][g-b.off[k]]
			}
		}
		panic(g)
	}
	for _, tc := range []struct {
		name    string
		perPart int
		bits    uint64
		ok      bool
	}{
		{"one partition", 1 << 20, ^uint64(0), true},
		{"many partitions", 3, ^uint64(0), true},
		{"collisions", 3, 0x3, false},
	} {
		for _, workers := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/workers=%d", tc.name, workers), func(t *testing.T) {
				bulkRowsPerPart, bulkHashBits = tc.perPart, tc.bits
				b.workers = workers
				w := min(workers, len(writes))
				first := make([]int, w+1)
				for i := 1; i < w; i++ {
					first[i] = len(writes) * i / w
				}
				first[w] = len(writes)
				b.local = make([]int32, b.n)
				list, ok := b.numberByHash(w, first)
				if ok != tc.ok {
					t.Fatalf("ok %v, want %v", ok, tc.ok)
				}
				if !ok {
					return
				}
				seen := map[string]int32{}
				for g := range b.n {
					id := rowID(g)
					if got := list[b.local[g]].id; got != id {
						t.Fatalf("row %d: series %q, want %q", g, got, id)
					}
					if s, dup := seen[id]; dup && s != b.local[g] {
						t.Fatalf("row %d: %q numbered %d and %d", g, id, s, b.local[g])
					}
					seen[id] = b.local[g]
				}
				if len(list) != len(seen) {
					t.Fatalf("%d series, want %d", len(list), len(seen))
				}
			})
		}
	}
}
