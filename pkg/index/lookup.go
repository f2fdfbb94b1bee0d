package index

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cespare/xxhash/v2"

	"github.com/energyscope/servingsnap/pkg/mapbuf"
)

// The lookup table of a version-5 index (FORMAT.md §4): a hash table over
// the series ids, stored as two uint32 columns after the fixed (and tier)
// columns, so that finding a series costs a hash and about four cache
// misses instead of a binary search's twenty-odd string comparisons over
// the whole id column: at 2.82M series, the binary searches were most of
// a latest-of-1000 request, which went from 3.0 to 1.1 ms on the server
// (bench/results/2026-12-07-lookup-go-bench.txt). The table is plain Arrow and maps
// like every other column: opening still builds nothing per series.
//
// Bucket b of an index of n series holds the codes of the series whose
// ids hash to b (Bucket), in increasing code order, at positions
// [lookup_start[b], lookup_start[b+1]) of lookup_code (the last bucket
// ends at n). With as many buckets as series a bucket holds one code on
// average.
//
// The table is a shortcut, never the authority: Lookup answers a code
// only when that code's id is the one asked for, and falls back to the
// binary search when the table has no such code, so a damaged table
// costs time, never a wrong answer (CheckLookup, run by VerifyData and
// snapverify, reports it).

// Bucket is the lookup-table bucket of id in an index of n series: the
// top 32 bits of id's XXH64 hash (seed 0) scaled to [0, n), so that a
// reader in any language with an XXH64 computes it exactly.
func Bucket(id string, n int) int {
	return int((xxhash.Sum64String(id) >> 32) * uint64(n) >> 32)
}

// lookupTable is a mapped version-5 lookup table; its zero value (an
// index of an earlier version) has none.
type lookupTable struct {
	start []uint32 // bucket b's first position in code
	code  []uint32 // series codes, bucket by bucket
}

// find returns the code of id if the table holds it. It bounds-checks
// what it reads, so a damaged table cannot make it index out of range.
func (x *Reader) find(id string) (int, bool) {
	t := &x.lookup
	n := len(t.code)
	if n == 0 {
		return 0, false
	}
	b := Bucket(id, n)
	lo, hi := int(t.start[b]), n
	if b+1 < n {
		hi = int(t.start[b+1])
	}
	if lo > hi || hi > n {
		return 0, false
	}
	for _, c := range t.code[lo:hi] {
		if int(c) < n && x.ID(int(c)) == id {
			return int(c), true
		}
	}
	return 0, false
}

// LookupMany is Lookup for many ids at once (a request's series list):
// codes[i] becomes ids[i]'s code, or -1 when it is not in the index;
// codes must be as long as ids. Through a version-5 table it works in
// passes (hash every id; read every bucket's first code; compare every
// id), so that the cache misses of different ids overlap instead of
// waiting one behind the other as Lookup's do; an id that is not its
// bucket's first code takes Lookup's path. It allocates nothing.
func (x *Reader) LookupMany(ids []string, codes []int32) {
	t := &x.lookup
	n := len(t.code)
	if n == 0 {
		for i, id := range ids {
			codes[i] = lookupCode(x.search(id))
		}
		return
	}
	for i, id := range ids {
		codes[i] = int32(Bucket(id, n))
	}
	for i, b := range codes[:len(ids)] {
		codes[i] = -1
		if lo := int(t.start[b]); lo < n && (int(b)+1 == n || lo < int(t.start[b+1])) && int(t.code[lo]) < n {
			codes[i] = int32(t.code[lo])
		}
	}
	for i, id := range ids {
		if c := codes[i]; c < 0 || x.ID(int(c)) != id {
			codes[i] = lookupCode(x.Lookup(id))
		}
	}
}

// lookupCode is a lookup's answer as LookupMany writes it.
func lookupCode(c int, ok bool) int32 {
	if !ok {
		return -1
	}
	return int32(c)
}

// CheckLookup checks a version-5 index's lookup table against its ids:
// the bucket starts begin at 0, never decrease and stay inside the table,
// and within each bucket the codes are below the number of series,
// increasing, and hash to that bucket. That is all it takes for every
// code to appear exactly once: no code repeats (it can only be in its own
// bucket, where codes increase), and there are as many entries as codes.
// It reads the ids once, in order, to hash each into a buffer of 4 bytes a
// series (for the 2.82M series of the seed, 11 MiB, freed on return), then
// the table once, in order: no random reads of the ids, which would be
// most of the cost. Nil for earlier versions.
func (x *Reader) CheckLookup() error {
	t := &x.lookup
	if x.version != Version {
		return nil
	}
	n := x.Len()
	if len(t.code) != n || len(t.start) != n {
		return x.corruptf(fmt.Errorf("index lookup table has %d and %d rows for %d series", len(t.start), len(t.code), n))
	}
	if n > 0 && t.start[0] != 0 {
		return x.corruptf(fmt.Errorf("index column %q: the first bucket starts at %d, not 0", ColLookupStart, t.start[0]))
	}
	bucket := make([]uint32, n)
	for c := range n {
		bucket[c] = uint32(Bucket(x.ID(c), n))
	}
	for b := range n {
		lo, hi := int(t.start[b]), n
		if b+1 < n {
			hi = int(t.start[b+1])
		}
		if lo > hi || hi > n {
			return x.corruptf(fmt.Errorf("index column %q: bucket %d spans [%d, %d) of %d", ColLookupStart, b, lo, hi, n))
		}
		prev := -1
		for p := lo; p < hi; p++ {
			c := int(t.code[p])
			switch {
			case c >= n:
				return x.corruptf(fmt.Errorf("index column %q: row %d holds code %d of %d series", ColLookupCode, p, c, n))
			case c <= prev:
				return x.corruptf(fmt.Errorf("index column %q: row %d: code %d after %d in bucket %d; codes increase within a bucket", ColLookupCode, p, c, prev, b))
			case int(bucket[c]) != b:
				return x.corruptf(fmt.Errorf("index column %q: row %d: series %q (code %d) is in bucket %d, its id hashes to %d", ColLookupCode, p, x.ID(c), c, b, bucket[c]))
			}
			prev = c
		}
	}
	return nil
}

// buildLookup makes the lookup table of the n ids whose bytes are data,
// delimited by offs (n+1 offsets), in two buffers of a: a counting sort
// of the codes by bucket. Both passes hash every id (about 10 ns at ids
// of a few dozen bytes) rather than keeping each id's bucket, which would
// be a third buffer of 4 bytes a series.
func buildLookup(a *mapbuf.Arena, offs []int32, data []byte, n int) (start, code *mapbuf.Buf) {
	start, code = a.New(), a.New()
	if n == 0 {
		return start, code
	}
	sb, cb := start.AppendZeros(4*n), code.AppendZeros(4*n)
	if a.Err() != nil {
		return start, code
	}
	st, co := arrow.Uint32Traits.CastFromBytes(sb), arrow.Uint32Traits.CastFromBytes(cb)
	id := func(i int) string { return unsafeString(data[offs[i]:offs[i+1]]) }
	// st[b] counts bucket b, then becomes the end of bucket b; filling
	// each bucket from its end, codes in decreasing order, leaves st[b]
	// at the bucket's start and its codes increasing.
	for i := range n {
		st[Bucket(id(i), n)]++
	}
	end := uint32(0)
	for b := range n {
		end += st[b]
		st[b] = end
	}
	for i := n - 1; i >= 0; i-- {
		b := Bucket(id(i), n)
		st[b]--
		co[st[b]] = uint32(i)
	}
	return start, code
}
