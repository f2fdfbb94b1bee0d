package serve

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/energyscope/servingsnap/pkg/sidecar"
)

// codeCache remembers, for one base index, the index row of the series
// DoPut batches name, so that checking a batch's series against the base
// (putKnown) costs a hash probe per series instead of a binary search over
// every id of the index: that search was a third of a DoPut's CPU on the
// ack path (10k distinct series a batch, 17 string comparisons each over
// 100k series). It is filled as writes name series, never at open
// (invariant 3), and holds at most codeCacheMax series; beyond that a
// series is looked up in the index as before. A series the base lacks is
// remembered too (code -1): a write of new series asks again each batch
// otherwise.
//
// Readers take no lock: a batch reads one immutable map (read). Series
// it misses are added to dirty under mu, and once dirty holds a fair share
// of read's size the two are copied into a new read map (each series is
// copied a few times in all, amortized). Locking on every probe of 10k a
// batch, from several DoPut goroutines at once, cost as much as the
// probes.
type codeCache struct {
	x    *sidecar.Index
	read atomic.Pointer[map[string]int32]

	mu    sync.Mutex
	dirty map[string]int32
}

// codeCacheMax bounds the series remembered: about 60 bytes each (id,
// map slot), so 64 MiB at most for a dataset's writes.
const codeCacheMax = 1 << 20

func newCodeCache(x *sidecar.Index) *codeCache {
	c := &codeCache{x: x, dirty: map[string]int32{}}
	m := map[string]int32{}
	c.read.Store(&m)
	return c
}

// codeReader is one batch's view of a codeCache.
type codeReader struct {
	c *codeCache
	m map[string]int32
}

func (c *codeCache) reader() codeReader { return codeReader{c: c, m: *c.read.Load()} }

// lookup is x.Lookup(id), remembered.
func (r codeReader) lookup(id string) (int, bool) {
	if code, ok := r.m[id]; ok {
		return int(code), code >= 0
	}
	i, found := r.c.x.Lookup(id)
	code := int32(-1)
	if found {
		code = int32(i)
	}
	r.c.add(id, code)
	return i, found
}

func (c *codeCache) add(id string, code int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	read := *c.read.Load()
	if len(read)+len(c.dirty) >= codeCacheMax {
		return
	}
	// the id may point into a batch's buffer: keep a copy
	c.dirty[strings.Clone(id)] = code
	if len(c.dirty) < max(4096, len(read)/2) {
		return
	}
	m := make(map[string]int32, len(read)+len(c.dirty))
	for k, v := range read {
		m[k] = v
	}
	for k, v := range c.dirty {
		m[k] = v
	}
	c.read.Store(&m)
	c.dirty = map[string]int32{}
}

// codes is the dataset's cache for the base index x, made anew when the
// served snapshot changed.
func (d *dataset) codes(x *sidecar.Index) *codeCache {
	for {
		c := d.codeCache.Load()
		if c != nil && c.x == x {
			return c
		}
		n := newCodeCache(x)
		if d.codeCache.CompareAndSwap(c, n) {
			return n
		}
	}
}
