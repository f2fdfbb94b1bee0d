package served

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/index"
)

// codeCache remembers, for one base index, the index row of the series
// DoPut batches name, so that checking a batch's series against the base
// (putKnown) costs a hash probe per series instead of a binary search over
// every id of the index: that search was a third of a DoPut's CPU on the
// ack path (10k distinct series a batch, 17 string comparisons each over
// 100k series). It holds at most codeCacheMax series; beyond that a
// series is looked up in the index as before.
//
// A base of at most codeCacheMax series is remembered whole, in the
// background (warm), as soon as the cache is made: when a dataset takes
// its first write, and when a new base is installed under a live writer
// (a compaction, a reload). Filled only as writes named series, a cache
// made anew left the next batches each looking 10k series up by binary
// search (7 ms a batch against 0.5 ms warm, BenchmarkCodeLookup), the
// slowest acknowledgements of a run. A larger base is filled as writes
// name series. Nothing of it happens at open (invariant 3): a server that
// takes no writes never makes one.
//
// The layout is for a batch of thousands of series that finds the cache
// out of CPU caches: a server's writes come tens of milliseconds apart,
// with merges, collections and gRPC buffers between them. Every series
// the table holds has an entry in the table's arena (its index row, its
// id's length, the id's bytes), and a slot of the open-addressing table
// is one 64-bit word, the hash's top 32 bits beside the entry's offset +
// 1 (0: empty). A probe that matches the tag confirms the id against the
// entry's bytes, so a hash collision can cost a comparison but never give
// a wrong answer. A row so costs two cache misses, the slot and the
// entry; with the ids confirmed in the index itself (its offsets, then
// its bytes) it cost three, and a cold batch ~140 ns a row against ~100
// now (BenchmarkCodeLookup/cold, lookupAll's passes in both). The arena is
// the price: a copy of the ids plus 8 bytes each (~1.7 MB for 100k series
// of 9-byte ids; ~33 MB at codeCacheMax series of 25 bytes).
//
// Readers take no lock: slots are loaded atomically and filled by
// compare-and-swap after their entry is written (an entry is never
// changed once a slot points at it), and a table that grows past half
// full, or whose arena is full, is rebuilt twice the size under mu and
// swapped in whole (a reader of the old one still reads correct, if fewer,
// rows). A series the base lacks is remembered too, in a small
// copy-on-write map (read, rebuilt from dirty as before): a write of new
// series asks again each batch otherwise.
type codeCache struct {
	x       *index.Reader
	seed    maphash.Seed
	tab     atomic.Pointer[codeTable]
	retired atomic.Bool // replaced by a newer base's cache: warm stops
	avgID   int         // the index's mean id length, for sizing arenas

	read atomic.Pointer[map[string]struct{}] // series the base lacks

	mu    sync.Mutex // serialises growing tab and rebuilding read
	dirty map[string]struct{}
}

// codeTable is one generation of the open-addressing table and its
// arena; len(slots) is a power of two.
type codeTable struct {
	slots []atomic.Uint64
	arena []byte       // entries: index row (u32), id length (u32), id bytes
	used  atomic.Int64 // arena bytes handed out
	n     atomic.Int64 // filled slots
}

// entryHeader is an arena entry's bytes before its id: the index row and
// the id's length, little-endian u32 each.
const entryHeader = 8

// maxArena bounds a table's arena: slots hold an entry's offset in 32 bits.
const maxArena = math.MaxUint32 - 1

func newCodeTable(slots int, arena int64) *codeTable {
	return &codeTable{slots: make([]atomic.Uint64, slots), arena: make([]byte, min(arena, maxArena))}
}

// entry is the index row and id of the entry at off, ok false if off is
// not inside the arena (never, for an offset a slot holds).
func (t *codeTable) entry(off uint32) (code int, id string, ok bool) {
	a := t.arena
	if int64(off)+entryHeader > int64(len(a)) {
		return 0, "", false
	}
	code = int(binary.LittleEndian.Uint32(a[off:]))
	n := int64(binary.LittleEndian.Uint32(a[off+4:]))
	lo := int64(off) + entryHeader
	if lo+n > int64(len(a)) {
		return 0, "", false
	}
	return code, unsafe.String(unsafe.SliceData(a[lo:]), int(n)), true
}

// add writes an entry for (code, id) into t's arena and returns its
// offset; false if the arena has no room left.
func (t *codeTable) add(code int, id string) (uint32, bool) {
	need := int64(entryHeader + len(id))
	end := t.used.Add(need)
	if end > int64(len(t.arena)) {
		return 0, false
	}
	off := end - need
	binary.LittleEndian.PutUint32(t.arena[off:], uint32(code))
	binary.LittleEndian.PutUint32(t.arena[off+4:], uint32(len(id)))
	copy(t.arena[off+entryHeader:], id)
	return uint32(off), true
}

// codeCacheMax bounds the series remembered: a table slot of 8 bytes, at
// most half full, so 16 MiB of slots at most for a dataset's writes, and
// an arena entry each; and as many series the base lacks (id and map
// slot, ~60 bytes each).
const codeCacheMax = 1 << 20

// codeTableMin is the first table's slots (64 KiB).
const codeTableMin = 1 << 13

func newCodeCache(x *index.Reader) *codeCache {
	slots := codeTableMin
	if n := x.Len(); n <= codeCacheMax {
		for slots < 2*n+2 { // room for warm's rows without growing
			slots *= 2
		}
	}
	return newCodeCacheSlots(x, slots)
}

// newCodeCacheSlots is newCodeCache with a first table of slots (a power
// of two; tests start small to grow it often).
func newCodeCacheSlots(x *index.Reader, slots int) *codeCache {
	c := &codeCache{x: x, seed: maphash.MakeSeed(), dirty: map[string]struct{}{}}
	if n := x.Len(); n > 0 {
		c.avgID = (x.IDBytes() + n - 1) / n
	}
	c.tab.Store(newCodeTable(slots, c.arenaFor(slots)))
	m := map[string]struct{}{}
	c.read.Store(&m)
	return c
}

// arenaFor is the arena of a table of slots: entries for the most series
// it holds (half its slots), or for the whole base if that is fewer, at
// the base's mean id length. Entries longer than the mean can fill it
// before the slots are: the table then grows early.
func (c *codeCache) arenaFor(slots int) int64 {
	n := int64(slots / 2)
	if whole := int64(c.x.Len()); whole < n {
		return int64(c.x.IDBytes()) + entryHeader*whole
	}
	return n * int64(entryHeader+c.avgID)
}

// codeReader is one batch's view of a codeCache.
type codeReader struct {
	c      *codeCache
	absent map[string]struct{}
}

func (c *codeCache) reader() codeReader { return codeReader{c: c, absent: *c.read.Load()} }

// lookup is x.Lookup(id), remembered.
func (r codeReader) lookup(id string) (int, bool) {
	return r.lookupHash(maphash.String(r.c.seed, id), id)
}

// probeScratch is lookupAll's temporaries, recycled (probeScratches): a
// batch's would be 16 bytes a row of garbage otherwise.
type probeScratch struct {
	hs    []uint64 // every row's hash
	slots []uint64 // every row's candidate slot (0: none)
}

var probeScratches sync.Pool

// lookupAll sets codes[i] to ids[i]'s index row, -1 for a series the
// base lacks. It answers what lookup does row by row, but in passes over
// the whole column, each a short loop whose iterations do not depend on
// each other, so that a CPU has many cache misses in flight at once
// rather than one row's after another's: hash every id; find every row's
// candidate slot (the first of its probe chain whose tag matches: the
// chain's next slots are mostly in the same cache line); load every
// candidate's index row from its entry (a tight loop of loads, which
// brings the entries' cache lines in); then confirm every candidate's id
// against its entry, the comparisons' calls and branches finding the
// bytes in cache. Rows without a confirmed candidate (series not
// remembered yet, lacking from the base, a tag collision) take lookup's
// path.
//
// A batch sorted by slot first, so that the probes and entries are read
// forwards in memory, was slower (BenchmarkCodeLookup/cold 125-135
// against 96-105 ns a row): the sort's own passes, and the rows' ids and
// codes then read out of order.
func (r codeReader) lookupAll(ids *array.String, codes []int32) {
	c := r.c
	t := c.tab.Load()
	n := len(codes)
	sc, _ := probeScratches.Get().(*probeScratch)
	if sc == nil {
		sc = &probeScratch{}
	}
	defer probeScratches.Put(sc)
	hs := slices.Grow(sc.hs[:0], n)[:n]
	cand := slices.Grow(sc.slots[:0], n)[:n]
	sc.hs, sc.slots = hs, cand
	for i := range hs {
		hs[i] = maphash.String(c.seed, ids.Value(i))
	}
	mask := uint64(len(t.slots) - 1)
	for i, h := range hs {
		var s uint64
		for j := h & mask; ; j = (j + 1) & mask {
			if s = t.slots[j].Load(); s == 0 || s>>32 == h>>32 {
				break
			}
		}
		cand[i] = s
	}
	const unknown = -2
	arena := t.arena
	for i, s := range cand {
		codes[i] = unknown
		if off := int64(uint32(s)) - 1; s != 0 && off+entryHeader <= int64(len(arena)) {
			codes[i] = int32(binary.LittleEndian.Uint32(arena[off:]))
		}
	}
	for i, s := range cand {
		if codes[i] == unknown {
			continue
		}
		if _, id, ok := t.entry(uint32(s) - 1); !ok || id != ids.Value(i) {
			codes[i] = unknown
		}
	}
	for i, code := range codes {
		if code != unknown {
			continue
		}
		codes[i] = -1
		if code, ok := r.lookupHash(hs[i], ids.Value(i)); ok {
			codes[i] = int32(code)
		}
	}
}

// lookupHash is lookup of id, whose hash is h.
func (r codeReader) lookupHash(h uint64, id string) (int, bool) {
	c := r.c
	if code, ok := c.find(h, id); ok {
		return code, true
	}
	if _, ok := r.absent[id]; ok {
		return 0, false
	}
	i, found := c.x.Lookup(id)
	if found {
		c.insert(h, i, id)
	} else {
		c.addAbsent(id)
	}
	return i, found
}

// find probes the table for id (hash h).
func (c *codeCache) find(h uint64, id string) (int, bool) {
	return c.tab.Load().find(h, id)
}

func (t *codeTable) find(h uint64, id string) (int, bool) {
	mask := uint64(len(t.slots) - 1)
	tag := h >> 32
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i].Load()
		if s == 0 {
			return 0, false
		}
		if s>>32 == tag {
			if code, eid, ok := t.entry(uint32(s) - 1); ok && eid == id {
				return code, true
			}
		}
	}
}

// insert remembers that the series id, hashed h, is index row code.
func (c *codeCache) insert(h uint64, code int, id string) {
	for {
		t := c.tab.Load()
		if 2*(t.n.Load()+1) > int64(len(t.slots)) {
			if !c.grow(t) {
				return // full: codeCacheMax series
			}
			continue
		}
		switch t.put(h, code, id) {
		case putDone:
			return
		case putArenaFull:
			if !c.grow(t) {
				return
			}
		}
		// putTableFull: a concurrent grow's turn
	}
}

type putResult int

const (
	putDone putResult = iota
	putTableFull
	putArenaFull
)

// put writes an entry for (code, id) and sets a free slot of t to it, or
// finds id there already.
func (t *codeTable) put(h uint64, code int, id string) putResult {
	mask := uint64(len(t.slots) - 1)
	tag := h >> 32
	var want uint64 // the slot's value once the entry is written
	for i, probes := h&mask, 0; probes < len(t.slots); i, probes = (i+1)&mask, probes+1 {
		s := t.slots[i].Load()
		for {
			if s != 0 {
				if s>>32 == tag {
					if _, eid, ok := t.entry(uint32(s) - 1); ok && eid == id {
						return putDone
					}
				}
				break
			}
			if want == 0 {
				off, ok := t.add(code, id)
				if !ok {
					return putArenaFull
				}
				want = tag<<32 | uint64(off+1)
			}
			if t.slots[i].CompareAndSwap(0, want) {
				t.n.Add(1)
				return putDone
			}
			s = t.slots[i].Load() // taken meanwhile: by this id?
		}
	}
	return putTableFull
}

// grow replaces t by a table twice its size holding its rows, unless
// another grow did already; false if t is as large as it may be.
func (c *codeCache) grow(t *codeTable) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tab.Load() != t {
		return true
	}
	if len(t.slots) >= 2*codeCacheMax {
		return false
	}
	c.tab.Store(c.rehashed(t, 2*len(t.slots)))
	return true
}

// rehashed is a table of slots holding t's rows, each entry copied into
// its arena. A slot set in t while this runs may be lost to the new
// table: only a remembered row, looked up again next time. Requires c.mu
// held.
func (c *codeCache) rehashed(t *codeTable, slots int) *codeTable {
	arena := c.arenaFor(slots)
	if used := 2 * t.used.Load(); arena < used { // entries longer than the mean
		arena = used
	}
	nt := newCodeTable(slots, arena)
	for i := range t.slots {
		if s := t.slots[i].Load(); s != 0 {
			if code, id, ok := t.entry(uint32(s) - 1); ok {
				nt.put(maphash.String(c.seed, id), code, id)
			}
		}
	}
	return nt
}

// warm remembers every series of a base of at most codeCacheMax series,
// in index order (the ids are read sequentially), unless the cache is
// retired meanwhile. Look-ups go on while it runs: a row it has not
// reached yet is found by the look-up's own path.
func (c *codeCache) warm() {
	n := c.x.Len()
	if n > codeCacheMax {
		return
	}
	for i := 0; i < n; i++ {
		if i%4096 == 0 && c.retired.Load() {
			return
		}
		id := c.x.ID(i)
		c.insert(maphash.String(c.seed, id), i, id)
	}
}

func (c *codeCache) addAbsent(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	read := *c.read.Load()
	if len(read)+len(c.dirty) >= codeCacheMax {
		return
	}
	// the id may point into a batch's buffer: keep a copy
	c.dirty[strings.Clone(id)] = struct{}{}
	if len(c.dirty) < max(4096, len(read)/2) {
		return
	}
	m := make(map[string]struct{}, len(read)+len(c.dirty))
	for k := range read {
		m[k] = struct{}{}
	}
	for k := range c.dirty {
		m[k] = struct{}{}
	}
	c.read.Store(&m)
	c.dirty = map[string]struct{}{}
}

// codes is the dataset's cache for v's base index, made anew (and warmed
// in the background) when the served snapshot changed. The caller holds a
// reference on v; warming takes one of its own, since it reads the index
// after the caller may have let go.
func (d *Dataset) codes(v *View) *codeCache {
	x := v.snap.Index()
	for {
		c := d.codeCache.Load()
		if c != nil && c.x == x {
			return c
		}
		n := newCodeCache(x)
		if d.codeCache.CompareAndSwap(c, n) {
			if c != nil {
				c.retired.Store(true)
			}
			if v.acquire() {
				go func() {
					defer v.Release()
					n.warm()
				}()
			}
			return n
		}
	}
}
