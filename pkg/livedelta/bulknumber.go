package livedelta

import (
	"math/bits"
	"slices"
)

// numberSeries numbers the distinct series of the writes and each row's
// series (b.local), sharded by hash: every worker reads every row's id,
// but numbers only the ids whose hash falls in its share of the hash
// space, in a table of its own; a row's b.local is its number in its
// shard's list, shifted, with the shard in the low bits (see shardOf).
//
// Why sharded: a table of every series of a replay (100k of them) would
// not stay in a core's L2 cache, and a miss a row was half of Bulk; per
// worker tables over row ranges each held nearly every series too. A
// shard's table holds its share only, in 8 bytes a slot (a tag of the
// hash and the series number), and the ids it compares with sit together
// in one buffer, so most rows touch nothing outside L2. Reading every id
// in every worker costs a hash per row per worker, which is cheap next
// to the misses it saves.
func (b *bulk) numberSeries() {
	shards := max(1, min(b.workers, b.n/bulkRowsPerWorker, maxShards))
	b.shardBits = uint(bits.Len(uint(shards - 1)))
	b.local = make([]int32, b.n)
	b.series = make([][]bulkSeries, shards)
	parallel(shards, shards, func(i int) {
		var t shardTable
		t.grow()
		for k, ids := range b.ids {
			lo := b.off[k]
			prev, mine, l := "", false, uint32(0)
			for j := 0; j < ids.Len(); j++ {
				id := ids.Value(j)
				// A write often holds a series' rows one after another:
				// those need no hash.
				if j == 0 || id != prev {
					h := bulkHash(id)
					prev, mine = id, shardOf(h, shards) == i
					if mine {
						l = t.add(h, id)
					}
				}
				if mine {
					b.local[lo+j] = int32(l<<b.shardBits | uint32(i))
				}
			}
		}
		b.series[i] = t.list()
	})
}

// maxShards bounds numberSeries's shards so that a row's number and its
// shard fit in 32 bits (a run holds fewer than 1<<28 rows).
const maxShards = 16

// shardOf is the shard, of n, of hash h: its top bits scaled to n.
func shardOf(h uint64, n int) int { return int((h >> 32) * uint64(n) >> 32) }

// shardTable numbers one shard's distinct ids: open addressing, linear
// probing, at most 3/4 full. A slot is the series number + 1 (0: empty)
// in its low half and a tag of the hash in its high half; a tag match is
// checked against the id itself, kept with the others in one buffer.
type shardTable struct {
	slots  []uint64
	hashes []uint64 // each series' hash, to grow by
	bytes  []byte   // every series' id, one after the other
	end    []uint32 // series l's id is bytes[end[l]:end[l+1]]
}

// tag is the part of a hash kept in a slot: bits the slot's index (the
// low bits) and the shard (the top ones) do not use, as far as possible.
func tag(h uint64) uint64 { return h >> 16 << 32 }

// add returns id's number, numbering it if it is new.
func (t *shardTable) add(h uint64, id string) uint32 {
	mask := uint64(len(t.slots) - 1)
	tg := tag(h)
	for j := h & mask; ; j = (j + 1) & mask {
		sl := t.slots[j]
		if sl == 0 {
			l := uint32(len(t.hashes))
			t.hashes = append(t.hashes, h)
			t.bytes = append(t.bytes, id...)
			t.end = append(t.end, uint32(len(t.bytes)))
			t.slots[j] = tg | uint64(l+1)
			if 4*len(t.hashes) > 3*len(t.slots) {
				t.grow()
			}
			return l
		}
		if sl&^(1<<32-1) == tg {
			l := uint32(sl) - 1
			if string(t.bytes[t.end[l]:t.end[l+1]]) == id {
				return l
			}
		}
	}
}

// grow doubles the table (or makes its first one).
func (t *shardTable) grow() {
	if t.end == nil {
		t.end = []uint32{0}
	}
	slots := make([]uint64, max(1024, 2*len(t.slots)))
	mask := uint64(len(slots) - 1)
	for l, h := range t.hashes {
		j := h & mask
		for slots[j] != 0 {
			j = (j + 1) & mask
		}
		slots[j] = tag(h) | uint64(l+1)
	}
	t.slots = slots
}

// list is the shard's series in number order, their ids in one string.
func (t *shardTable) list() []bulkSeries {
	all := string(t.bytes)
	list := make([]bulkSeries, len(t.hashes))
	for l, h := range t.hashes {
		list[l] = bulkSeries{id: all[t.end[l]:t.end[l+1]], hash: h, code: -1}
	}
	return slices.Clip(list)
}
