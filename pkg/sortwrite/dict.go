package sortwrite

import (
	"hash/maphash"
	"sync"
	"unsafe"
)

// dictionary interns the distinct values of a string column across all
// inputs. Workers map each chunk's local dictionary in one call, so a lock
// is taken once per chunk, not per row. The look-ups run under the read
// lock, so both readers hash at once: after the first row groups nearly
// every value is known, and a single mutex around the whole chunk made the
// interning (a hash and a string compare per distinct value per row group,
// about a fifth of the read phase's CPU on a 15M-row lake) run on one core
// at a time. Only the values not found take the write lock, once per chunk.
//
// The table is open addressing over one word per slot (code+1 in the high
// half, the hash's high half as a tag in the low; 0 empty), not a Go map:
// a chunk's look-ups are then done in passes (hash every value, load
// every value's first slot, then compare), so the cache misses of
// different values overlap instead of each look-up waiting for its own
// three in turn (group, key, key bytes), which was most of the interning's
// time with 16k values a row group over a dictionary of 100k (2 × 16k
// look-ups a row group on the 15M-row lake). Values are copied into
// shared blocks, not one allocation each.
type dictionary struct {
	mu     sync.RWMutex
	seed   maphash.Seed
	slots  []uint64 // len a power of two, at most half full
	hashes []uint64 // per code, to grow the table
	values []string
	block  []byte // the tail of the values' bytes
	blocks int64  // bytes of the blocks allocated
}

// footprint is the memory the dictionary holds: its table, hashes, value
// headers and the blocks of their bytes.
func (d *dictionary) footprint() int64 {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return int64(8*(cap(d.slots)+cap(d.hashes))+16*cap(d.values)) + d.blocks
}

func newDictionary() *dictionary {
	return &dictionary{seed: maphash.MakeSeed(), slots: make([]uint64, 1024)}
}

// code returns the code of v, if interned.
func (d *dictionary) code(v string) (uint32, bool) {
	h := maphash.String(d.seed, v)
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.findRLocked(h, v)
}

// findRLocked probes for v (hash h). Requires d.mu held (read or write).
func (d *dictionary) findRLocked(h uint64, v string) (uint32, bool) {
	mask := uint64(len(d.slots) - 1)
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		s := d.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s) == tag && d.values[s>>32-1] == v {
			return uint32(s>>32) - 1, true
		}
	}
}

// addLocked interns v (hash h), not yet in d, and returns its code.
// Requires d.mu held.
func (d *dictionary) addLocked(h uint64, v string) (uint32, error) {
	if len(d.values) >= nullCode-1 {
		return 0, errTooManyValues
	}
	if 2*(len(d.values)+1) > len(d.slots) {
		d.growLocked()
	}
	c := uint32(len(d.values))
	d.values = append(d.values, d.own(v))
	d.hashes = append(d.hashes, h)
	d.placeLocked(h, c)
	return c, nil
}

func (d *dictionary) placeLocked(h uint64, c uint32) {
	mask := uint64(len(d.slots) - 1)
	i := h & mask
	for d.slots[i] != 0 {
		i = (i + 1) & mask
	}
	d.slots[i] = uint64(c+1)<<32 | h>>32
}

func (d *dictionary) growLocked() {
	d.slots = make([]uint64, 2*len(d.slots))
	for c, h := range d.hashes {
		d.placeLocked(h, uint32(c))
	}
}

// own copies v's bytes into the dictionary's blocks (the chunk's buffers
// it aliases are released).
func (d *dictionary) own(v string) string {
	if len(v) == 0 {
		return ""
	}
	if cap(d.block)-len(d.block) < len(v) {
		d.block = make([]byte, 0, max(64<<10, len(v)))
		d.blocks += int64(cap(d.block))
	}
	n := len(d.block)
	d.block = append(d.block, v...)
	return unsafe.String(&d.block[n], len(v))
}

// probeScratch holds internLocal's per-value hashes and first slots.
var probeScratch = sync.Pool{New: func() any { return new([]uint64) }}

// internLocal maps the values of a chunk-local dictionary to global codes.
// Codes are given in the order values are first interned; which worker
// comes first does not matter to the output, which orders series by id
// and reads other columns' values, never their codes.
func (d *dictionary) internLocal(local []string, out []uint32) error {
	n := len(local)
	sp := probeScratch.Get().(*[]uint64)
	defer probeScratch.Put(sp)
	if cap(*sp) < 2*n {
		*sp = make([]uint64, 2*n)
	}
	hs, first := (*sp)[:n], (*sp)[n:2*n]
	for i, v := range local {
		hs[i] = maphash.String(d.seed, v)
	}
	var missing []int // positions in local not yet in the dictionary
	d.mu.RLock()
	slots, values := d.slots, d.values
	mask := uint64(len(slots) - 1)
	for i, h := range hs { // independent loads: their misses overlap
		first[i] = slots[h&mask]
	}
	for i, v := range local {
		h, s := hs[i], first[i]
		if s != 0 && uint32(s) == uint32(h>>32) && values[s>>32-1] == v {
			out[i] = uint32(s>>32) - 1
			continue
		}
		c, ok := d.findRLocked(h, v) // a collision, or not there
		if !ok {
			missing = append(missing, i)
			continue
		}
		out[i] = c
	}
	d.mu.RUnlock()
	if len(missing) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, i := range missing {
		v, h := local[i], hs[i]
		c, ok := d.findRLocked(h, v) // another worker may have added it meanwhile
		if !ok {
			var err error
			if c, err = d.addLocked(h, v); err != nil {
				return err
			}
		}
		out[i] = c
	}
	return nil
}
