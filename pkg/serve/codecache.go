package serve

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/sidecar"
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
// Series the base has live in an open-addressing table of 64-bit slots,
// each the hash's top 32 bits beside the index row + 1 (0: empty): no id
// is copied, since the index holds them, and a probe that matches the tag
// confirms the id against the index row itself, so a hash collision can
// cost a comparison but never give a wrong answer. A Go map of 100k
// string keys cost ~200 ns a probe here (its key strings scattered over
// the heap, each one more cache miss), most of the checks' CPU; a slot of
// this table is one 8-byte load in a dense array.
//
// Readers take no lock: the table's slots are loaded atomically and filled
// by compare-and-swap, and a table that grows past half full is rebuilt
// twice the size under mu and swapped in whole (a reader of the old one
// still reads correct, if fewer, rows). A series the base lacks is
// remembered too, in a small copy-on-write map (read, rebuilt from dirty
// as before): a write of new series asks again each batch otherwise.
type codeCache struct {
	x       *sidecar.Index
	seed    maphash.Seed
	tab     atomic.Pointer[codeTable]
	retired atomic.Bool // replaced by a newer base's cache: warm stops

	read atomic.Pointer[map[string]struct{}] // series the base lacks

	mu    sync.Mutex // serialises growing tab and rebuilding read
	dirty map[string]struct{}
}

// codeTable is one generation of the open-addressing table; len(slots)
// is a power of two.
type codeTable struct {
	slots []atomic.Uint64
	n     atomic.Int64 // filled slots
}

// codeCacheMax bounds the series remembered: a table slot of 8 bytes, at
// most half full, so 16 MiB at most for a dataset's writes; and as many
// series the base lacks (id and map slot, ~60 bytes each).
const codeCacheMax = 1 << 20

// codeTableMin is the first table's slots (64 KiB).
const codeTableMin = 1 << 13

func newCodeCache(x *sidecar.Index) *codeCache {
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
func newCodeCacheSlots(x *sidecar.Index, slots int) *codeCache {
	c := &codeCache{x: x, seed: maphash.MakeSeed(), dirty: map[string]struct{}{}}
	c.tab.Store(&codeTable{slots: make([]atomic.Uint64, slots)})
	m := map[string]struct{}{}
	c.read.Store(&m)
	return c
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

// lookupAll sets codes[i] to ids[i]'s index row, -1 for a series the
// base lacks. It answers what lookup does row by row, but in passes over
// the whole column, each a short loop whose iterations do not depend on
// each other: hash every id, load every id's first slot, confirm every
// candidate against the index (sidecar.Index.SameIDs, itself in passes).
// A CPU then has many of the cache misses in flight at once (one row's
// slot, the next rows' slots) instead of one row's three misses after
// each other, which was most of a probe's time. Rows the first slot does
// not answer take lookup's path.
func (r codeReader) lookupAll(ids *array.String, codes []int32) {
	c := r.c
	t := c.tab.Load()
	mask := uint64(len(t.slots) - 1)
	hs := make([]uint64, len(codes))
	for i := range hs {
		hs[i] = maphash.String(c.seed, ids.Value(i))
	}
	const unknown = -2
	for i, h := range hs {
		codes[i] = unknown
		if s := t.slots[h&mask].Load(); s != 0 && s>>32 == h>>32 {
			codes[i] = int32(uint32(s)) - 1
		}
	}
	same := make([]bool, len(codes))
	c.x.SameIDs(codes, ids, same)
	for i, ok := range same {
		if !ok {
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
		c.insert(h, i)
	} else {
		c.addAbsent(id)
	}
	return i, found
}

// find probes the table for id (hash h).
func (c *codeCache) find(h uint64, id string) (int, bool) {
	t := c.tab.Load()
	mask := uint64(len(t.slots) - 1)
	tag := h >> 32
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i].Load()
		if s == 0 {
			return 0, false
		}
		if s>>32 == tag {
			if code := int(uint32(s)) - 1; c.x.ID(code) == id {
				return code, true
			}
		}
	}
}

// insert remembers that the series hashed h is index row code.
func (c *codeCache) insert(h uint64, code int) {
	for {
		t := c.tab.Load()
		if 2*(t.n.Load()+1) > int64(len(t.slots)) {
			if !c.grow(t) {
				return // full: codeCacheMax series
			}
			continue
		}
		if t.put(h, code) {
			return
		}
	}
}

// put sets a free slot of t to (h, code), or finds code there already;
// false if t is full (a concurrent grow's turn).
func (t *codeTable) put(h uint64, code int) bool {
	mask := uint64(len(t.slots) - 1)
	want := h>>32<<32 | uint64(uint32(code+1))
	for i, probes := h&mask, 0; probes < len(t.slots); i, probes = (i+1)&mask, probes+1 {
		s := t.slots[i].Load()
		if s == want {
			return true
		}
		if s == 0 {
			if t.slots[i].CompareAndSwap(0, want) {
				t.n.Add(1)
				return true
			}
			if t.slots[i].Load() == want {
				return true
			}
		}
	}
	return false
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
	nt := &codeTable{slots: make([]atomic.Uint64, 2*len(t.slots))}
	for i := range t.slots {
		// a slot set while copying is lost to the new table: only a
		// remembered row, looked up again next time
		if s := t.slots[i].Load(); s != 0 {
			code := int(uint32(s)) - 1
			nt.put(maphash.String(c.seed, c.x.ID(code)), code)
		}
	}
	c.tab.Store(nt)
	return true
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
		c.insert(maphash.String(c.seed, c.x.ID(i)), i)
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
func (d *dataset) codes(v *view) *codeCache {
	x := v.Index()
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
			if v.Acquire() {
				go func() {
					defer v.Release()
					n.warm()
				}()
			}
			return n
		}
	}
}
