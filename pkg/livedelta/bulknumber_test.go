package livedelta

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestNumberSeries: the sharded numbering gives every row its series'
// number, one per distinct id, whether ids share hashes (narrowed to 2
// bits, or tags only) or not, with one shard or several, and tables that
// grow.
func TestNumberSeries(t *testing.T) {
	defer func(r int, h uint64) { bulkRowsPerWorker, bulkHashBits = r, h }(bulkRowsPerWorker, bulkHashBits)
	// Writes of a few rows each, ids repeating within and across them,
	// one write empty.
	var writes [][]string
	for k := range 12 {
		var ids []string
		for j := range (k * 7) % 23 {
			ids = append(ids, fmt.Sprintf("s%d", (k*j+j/3)%17))
		}
		if k == 5 {
			// Enough ids to grow a table, some longer than a word.
			for j := range 3000 {
				ids = append(ids, fmt.Sprintf("series/%d", j*7%2500))
			}
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
		name string
		bits uint64
	}{
		{"full hashes", ^uint64(0)},
		{"2-bit hashes", 0x3<<32 | 0x3},
		{"one tag", 1<<16 - 1},
	} {
		for _, workers := range []int{1, 2, 3, 9} {
			t.Run(fmt.Sprintf("%s/workers=%d", tc.name, workers), func(t *testing.T) {
				bulkHashBits, bulkRowsPerWorker = tc.bits, 1
				b.workers = workers
				b.numberSeries()
				if want := min(workers, maxShards); len(b.series) != want {
					t.Fatalf("%d shards, want %d", len(b.series), want)
				}
				var list []bulkSeries
				shard := uint32(1)<<b.shardBits - 1
				at := func(g int) (*bulkSeries, int) {
					v := uint32(b.local[g])
					return &b.series[v&shard][v>>b.shardBits], int(v & shard)
				}
				for _, l := range b.series {
					list = append(list, l...)
				}
				seen := map[string]*bulkSeries{}
				for g := range b.n {
					id := rowID(g)
					x, sh := at(g)
					if x.id != id {
						t.Fatalf("row %d: series %q, want %q", g, x.id, id)
					}
					if sh != shardOf(bulkHash(id), len(b.series)) {
						t.Fatalf("row %d: %q in shard %d", g, id, sh)
					}
					if y, dup := seen[id]; dup && y != x {
						t.Fatalf("row %d: %q numbered twice", g, id)
					}
					seen[id] = x
				}
				if len(list) != len(seen) {
					t.Fatalf("%d series, want %d", len(list), len(seen))
				}
			})
		}
	}
}
