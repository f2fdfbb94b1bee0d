package coldfile

import (
	"container/list"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
)

// Cache keeps decoded cold series under a memory budget, least recently
// used first out, so repeated reads of old history do not decode again
// (`snapbuild serve --cold-cache`). One cache serves every cold file of a
// server; entries are keyed by file and first row. Safe for concurrent
// use: one mutex, held only to look up, insert and evict (never while
// decoding, so two readers may decode the same series at once and one
// insert wins).
type Cache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	lru    *list.List // of *entry, front = most recent
	byKey  map[key]*list.Element
	files  uint64

	hits, misses, evictions int64
}

type key struct {
	file  uint64
	start int64
}

type entry struct {
	k     key
	rec   arrow.RecordBatch
	bytes int64
}

// NewCache returns a cache holding at most budget bytes of decoded rows
// (a batch larger than the budget is returned but not kept).
func NewCache(budget int64) *Cache {
	return &Cache{budget: budget, lru: list.New(), byKey: map[key]*list.Element{}}
}

// CacheStats are a cache's counters.
type CacheStats struct {
	Budget, Used, Entries   int64
	Hits, Misses, Evictions int64
}

// Stats reads the counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Budget: c.budget, Used: c.used, Entries: int64(c.lru.Len()), Hits: c.hits, Misses: c.misses, Evictions: c.evictions}
}

func (c *Cache) newFile() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files++
	return c.files
}

func (c *Cache) get(file uint64, start int64) (arrow.RecordBatch, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key{file, start}]; ok {
		c.lru.MoveToFront(el)
		c.hits++
		return el.Value.(*entry).rec, true
	}
	c.misses++
	return nil, false
}

// put inserts rec (or returns the batch another reader inserted first).
func (c *Cache) put(file uint64, start int64, rec arrow.RecordBatch) arrow.RecordBatch {
	n := recordBytes(rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := key{file, start}
	if el, ok := c.byKey[k]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*entry).rec
	}
	if n > c.budget {
		return rec
	}
	for c.used+n > c.budget {
		c.removeLocked(c.lru.Back())
		c.evictions++
	}
	c.byKey[k] = c.lru.PushFront(&entry{k: k, rec: rec, bytes: n})
	c.used += n
	return rec
}

// removeLocked drops an entry. Requires c.mu held. The batch is not
// released: a reader may still be sending it (see File.Series).
func (c *Cache) removeLocked(el *list.Element) {
	e := el.Value.(*entry)
	c.lru.Remove(el)
	delete(c.byKey, e.k)
	c.used -= e.bytes
}

func (c *Cache) dropFile(file uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.lru.Front(); el != nil; {
		next := el.Next()
		if el.Value.(*entry).k.file == file {
			c.removeLocked(el)
		}
		el = next
	}
}

// recordBytes is the memory a decoded batch holds.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, col := range rec.Columns() {
		for _, b := range col.Data().Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
	}
	return n
}
