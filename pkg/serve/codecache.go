package serve

import (
	"hash/maphash"
	"strings"
	"sync"

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
// It is safe for the DoPut goroutines of a dataset at once: entries are
// split over shards, each under its own lock.
type codeCache struct {
	x     *sidecar.Index
	seed  maphash.Seed
	shard [codeCacheShards]codeShard
}

type codeShard struct {
	mu sync.RWMutex
	m  map[string]int32
}

const (
	codeCacheShards = 16
	// codeCacheMax bounds the series remembered: about 60 bytes each
	// (id, map slot), so 64 MiB at most for a dataset's writes.
	codeCacheMax = 1 << 20
)

func newCodeCache(x *sidecar.Index) *codeCache {
	c := &codeCache{x: x, seed: maphash.MakeSeed()}
	for i := range c.shard {
		c.shard[i].m = map[string]int32{}
	}
	return c
}

// lookup is x.Lookup(id), remembered.
func (c *codeCache) lookup(id string) (int, bool) {
	s := &c.shard[maphash.String(c.seed, id)%codeCacheShards]
	s.mu.RLock()
	code, ok := s.m[id]
	s.mu.RUnlock()
	if ok {
		return int(code), code >= 0
	}
	i, found := c.x.Lookup(id)
	code = -1
	if found {
		code = int32(i)
	}
	s.mu.Lock()
	if len(s.m) < codeCacheMax/codeCacheShards {
		// the id may point into a batch's buffer: keep a copy
		s.m[strings.Clone(id)] = code
	}
	s.mu.Unlock()
	return i, found
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
