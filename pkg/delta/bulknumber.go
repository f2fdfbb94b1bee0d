package delta

import (
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
)

// bulkRowsPerPart is about how many rows numberByHash gives one hash
// partition: few enough that a partition's table (16 bytes a slot, at
// most half full) stays in a core's L2 cache. A variable for the tests.
var bulkRowsPerPart = 1 << 13

// numberByHash numbers the distinct series of the writes (filling
// b.local) by their 64-bit hashes alone, then checks that guess against
// the ids themselves; it reports false, with b.local garbage, if two ids
// share a hash, and probe then numbers them exactly with numberByTable.
//
// Why: a table of every series of a replay (100k of them: 8 MiB) misses
// the cache on nearly every row, and that miss was half of Bulk. Here
// every step reads and writes memory in order or within a small table:
//
//  1. each worker hashes its rows in log order and counts them per
//     partition (the hash's top bits);
//  2. each worker scatters its rows' (hash, row) pairs to their
//     partitions, in log order (a partition holds worker 0's rows, then
//     worker 1's);
//  3. each partition numbers its distinct hashes in a table sized to its
//     rows, taking the first row of each as the series' id;
//  4. the series are numbered globally, partition after partition, their
//     ids copied into one string (which the run's ids are then copied
//     from, so nothing aliases the writes);
//  5. each worker turns its rows' numbers global and compares every id
//     with its series' id (which, all in one string, stays in cache).
//
// Of two ids with one hash, step 5 finds the one that is not its series'.
func (b *bulk) numberByHash(w int, first []int) ([]bulkSeries, bool) {
	// The partitions: a power of two, about n/bulkRowsPerPart of them.
	pbits := 0
	if parts := b.n / max(1, bulkRowsPerPart); parts > 1 {
		pbits = min(bits.Len(uint(parts-1)), 12)
	}
	nparts := 1 << pbits
	part := func(h uint64) uint64 { return h >> (64 - pbits) } // 0 when pbits is 0
	rowLo := func(i int) int { return b.off[first[i]] }

	// 1. Hashes and counts.
	hashes := make([]uint64, b.n)
	counts := make([][]int32, w)
	parallel(w, w, func(i int) {
		c := make([]int32, nparts)
		for k := first[i]; k < first[i+1]; k++ {
			ids, lo := b.ids[k], b.off[k]
			prev, h := "", uint64(0)
			for j := 0; j < ids.Len(); j++ {
				// A write often holds a series' rows one after another.
				if id := ids.Value(j); j == 0 || id != prev {
					prev, h = id, bulkHash(id)
				}
				hashes[lo+j] = h
				c[part(h)]++
			}
		}
		counts[i] = c
	})
	// counts[i][p] becomes where worker i's rows of partition p go.
	partLo := make([]int32, nparts+1)
	at := int32(0)
	for p := range nparts {
		partLo[p] = at
		for i := range w {
			c := counts[i][p]
			counts[i][p] = at
			at += c
		}
	}
	partLo[nparts] = at

	// 2. Scatter.
	entHash := make([]uint64, b.n)
	entRow := make([]uint32, b.n)
	parallel(w, w, func(i int) {
		next := counts[i]
		for g := rowLo(i); g < rowLo(i+1); g++ {
			h := hashes[g]
			p := part(h)
			entHash[next[p]], entRow[next[p]] = h, uint32(g)
			next[p]++
		}
	})

	// 3. Each partition's distinct hashes, on every core: reps[p] lists
	// the first row of each, in the order numbered.
	reps := make([][]uint32, nparts)
	var nextPart atomic.Int64
	parallel(b.workers, b.workers, func(int) {
		var slots []hashSlot
		for {
			p := int(nextPart.Add(1) - 1)
			if p >= nparts {
				return
			}
			lo, hi := int(partLo[p]), int(partLo[p+1])
			size := 1 << bits.Len(uint(2*(hi-lo)))
			if cap(slots) < size {
				slots = make([]hashSlot, size)
			}
			slots = slots[:size]
			clear(slots)
			mask := uint64(size - 1)
			var rp []uint32
			for e := lo; e < hi; e++ {
				h, g := entHash[e], entRow[e]
				j := h & mask
				for {
					sl := &slots[j]
					if sl.series == 0 {
						rp = append(rp, g)
						*sl = hashSlot{hash: h, series: int32(len(rp))}
						b.local[g] = int32(len(rp) - 1)
						break
					}
					if sl.hash == h {
						b.local[g] = sl.series - 1
						break
					}
					j = (j + 1) & mask
				}
			}
			reps[p] = rp
		}
	})

	// 4. Global numbers and one string of every series' id.
	partBase := make([]int32, nparts+1)
	idBytes := 0
	idOf := func(g uint32) string {
		// The write holding row g: the last k with off[k] <= g (writes
		// of no rows share their offset with the next).
		k, _ := slices.BinarySearch(b.off, int(g)+1)
		k--
		return b.ids[k].Value(int(g) - b.off[k])
	}
	for p, rp := range reps {
		partBase[p+1] = partBase[p] + int32(len(rp))
		for _, g := range rp {
			idBytes += len(idOf(g))
		}
	}
	d := int(partBase[nparts])
	var sb strings.Builder
	sb.Grow(idBytes)
	idEnd := make([]int32, d+1)
	list := make([]bulkSeries, d)
	for p, rp := range reps {
		for l, g := range rp {
			s := int(partBase[p]) + l
			sb.WriteString(idOf(g))
			idEnd[s+1] = int32(sb.Len())
			list[s].hash = hashes[g]
		}
	}
	all := sb.String()
	for s := range list {
		list[s].id, list[s].code = all[idEnd[s]:idEnd[s+1]], -1
	}

	// 5. Global numbers per row, each id checked against its series'.
	var collided atomic.Bool
	parallel(w, w, func(i int) {
		for k := first[i]; k < first[i+1]; k++ {
			ids, lo := b.ids[k], b.off[k]
			for j := 0; j < ids.Len(); j++ {
				g := lo + j
				s := partBase[part(hashes[g])] + b.local[g]
				b.local[g] = s
				if ids.Value(j) != all[idEnd[s]:idEnd[s+1]] {
					collided.Store(true)
					return
				}
			}
		}
	})
	return list, !collided.Load()
}

// hashSlot is a slot of numberByHash's table: a hash and its series'
// number in the partition + 1 (0: empty).
type hashSlot struct {
	hash   uint64
	series int32
}
