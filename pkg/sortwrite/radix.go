package sortwrite

import (
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// order is the output order of the rows: position j of the output holds
// input row row(j), whose series rank is rank(j) and period period(j).
//
// Why radix: comparing strings costs ~1.4 µs a row at 15M rows; sorting the
// series ids once (a dictionary of 100k–1M entries), then an LSD radix sort
// over packed integer keys costs a few tens of ns a row.
//
// When rank, period offset and row number fit together in 64 bits (15M rows
// × 1M series × 180 years of days do), each row is one packed uint64
// rank|period|row and only the rank and period bits are radix-sorted. The
// sort is stable, so rows with equal keys stay in input order, which is
// what --on-duplicate=last relies on. Reading rank and period back from the
// packed key is sequential, so the later passes never touch the input
// columns at random. When the key does not fit, a comparison sort over row
// numbers is used and the accessors read the input columns instead.
type order struct {
	keys  []uint64 // packed keys (fast path), or nil
	ibits uint     // row-number bits
	pbits uint     // period-offset bits
	minP  int32

	perm    []uint32 // fallback: input rows in output order
	rankOf  []uint32 // fallback: rank per dictionary code
	codes   []uint32 // fallback: the series column's codes
	periods []int32  // fallback: the input periods
}

func (o *order) len() int {
	if o.keys != nil {
		return len(o.keys)
	}
	return len(o.perm)
}

func (o *order) row(j int) uint32 {
	if o.keys != nil {
		return uint32(o.keys[j] & (1<<o.ibits - 1))
	}
	return o.perm[j]
}

// key is (rank, period) as one comparable number.
func (o *order) key(j int) uint64 {
	if o.keys != nil {
		return o.keys[j] >> o.ibits
	}
	r := o.perm[j]
	return uint64(o.rankOf[o.codes[r]])<<32 | uint64(uint32(o.periods[r]))
}

func (o *order) rank(j int) uint32 {
	if o.keys != nil {
		return uint32(o.keys[j] >> (o.ibits + o.pbits))
	}
	return o.rankOf[o.codes[o.perm[j]]]
}

func (o *order) period(j int) int32 {
	if o.keys != nil {
		return o.minP + int32((o.keys[j]>>o.ibits)&(1<<o.pbits-1))
	}
	return o.periods[o.perm[j]]
}

// move copies position src to position dst (used to drop duplicates in
// place), and truncate keeps the first n positions.
func (o *order) move(dst, src int) {
	if o.keys != nil {
		o.keys[dst] = o.keys[src]
	} else {
		o.perm[dst] = o.perm[src]
	}
}

func (o *order) truncate(n int) {
	if o.keys != nil {
		o.keys = o.keys[:n]
	} else {
		o.perm = o.perm[:n]
	}
}

// sortRowsInto orders rows by (rank of their series code, period), with the
// packed keys and the radix scratch in the given buffers when they are long enough (the external sort reuses
// them run after run). Rows already in order (an input written sorted by
// key) are detected in the pass that packs the keys and not sorted again.
func sortRowsInto(rank []uint32, codes []uint32, periods []int32, keys, scratch []uint64) *order {
	return sortRowsOn(rank, codes, periods, keys, scratch, 1)
}

// sortRowsOn is sortRowsInto on up to workers goroutines (see
// radixSortMSD); the order is the same for any number of workers.
func sortRowsOn(rank []uint32, codes []uint32, periods []int32, keys, scratch []uint64, workers int) *order {
	n := len(codes)
	if n == 0 {
		return &order{perm: []uint32{}}
	}
	workers = max(1, min(workers, n>>16))
	share := func(w int) (int, int) { return n * w / workers, n * (w + 1) / workers }
	mins, maxs := make([]int32, workers), make([]int32, workers)
	parallel(workers, func(w int) {
		a, b := share(w)
		lo, hi := periods[a], periods[a]
		for _, p := range periods[a:b] {
			lo, hi = min(lo, p), max(hi, p)
		}
		mins[w], maxs[w] = lo, hi
	})
	minP, maxP := slices.Min(mins), slices.Max(maxs)
	var maxRank uint32
	for _, r := range rank {
		maxRank = max(maxRank, r)
	}
	pbits := uint(bits.Len64(uint64(int64(maxP) - int64(minP))))
	rbits := uint(bits.Len32(maxRank))
	ibits := uint(bits.Len64(uint64(n - 1)))
	if pbits+rbits+ibits > 64 {
		return sortCompare(rank, codes, periods)
	}
	keys = resizeSlice(keys, n)
	hi := ibits + pbits + rbits
	o := &order{keys: keys, ibits: ibits, pbits: pbits, minP: minP}
	if hi-ibits > radixDigit && n >= 1<<14 {
		packSortMSD(keys, rank, codes, periods, minP, pbits, ibits, hi, scratch, workers)
		return o
	}
	unsorted := make([]bool, workers)
	parallel(workers, func(w int) {
		a, b := share(w)
		packKeys(keys[a:b], a, rank, codes[a:b], periods[a:b], minP, pbits, ibits, &unsorted[w])
	})
	sorted := !slices.Contains(unsorted, true)
	for w := 1; w < workers && sorted; w++ {
		a, _ := share(w)
		sorted = keys[a-1] <= keys[a]
	}
	if !sorted {
		radixSortWith(keys, scratch, ibits, hi)
	}
	return o
}

// packKeys packs the keys of rows first… of one share (a function, not a
// closure, so that its loop keeps everything in registers) and notes
// whether they are out of order.
func packKeys(keys []uint64, first int, rank, codes []uint32, periods []int32, minP int32, pbits, ibits uint, unsorted *bool) {
	codes, periods = codes[:len(keys)], periods[:len(keys)]
	var prev uint64
	out := false
	for i := range keys {
		k := (uint64(rank[codes[i]])<<pbits|uint64(int64(periods[i])-int64(minP)))<<ibits | uint64(first+i)
		keys[i] = k
		if k < prev {
			out = true
		}
		prev = k
	}
	*unsorted = out
}

// packSortMSD packs the keys of all rows and sorts them by bits [ibits,
// hi), stably, on up to workers goroutines. The rows are counted by their
// key's most significant digit first, each worker over its own contiguous
// share (noting whether the share is already in order), and then packed
// straight into their digit's bucket of keys, each worker's rows of a
// bucket after the earlier workers' (so the pass is stable). Each bucket
// (15M keys: ~7k, 60 KB) is then sorted by the remaining digits LSD while
// it sits in cache, with a scratch the size of the largest bucket, the
// buckets shared among the workers.
//
// Packing into the buckets rather than packing in row order and then
// scattering into a second array of n keys saves that array: 8 bytes a
// row of fresh memory (120 MB at 15M rows), whose first touch (the
// kernel zeroing the pages) cost more CPU than the scatter itself, and a
// pass reading every key back. Its price is computing each key twice
// (count, then pack), which reads only the codes and periods again.
func packSortMSD(keys []uint64, rank, codes []uint32, periods []int32, minP int32, pbits, ibits, hi uint, scratch []uint64, workers int) {
	n := len(keys)
	workers = max(1, min(workers, n>>14))
	share := func(w int) (int, int) { return n * w / workers, n * (w + 1) / workers }
	const buckets = 1 << radixDigit
	shift := hi - radixDigit
	p := keyPacker{rank: rank, minP: minP, pbits: pbits, ibits: ibits, shift: shift}
	counts := make([][buckets]int, workers)
	unsorted := make([]bool, workers)
	parallel(workers, func(w int) {
		a, b := share(w)
		unsorted[w] = p.count(&counts[w], a, codes[a:b], periods[a:b])
	})
	sorted := !slices.Contains(unsorted, true)
	for w := 1; w < workers && sorted; w++ {
		a, _ := share(w)
		sorted = p.key(a-1, codes[a-1], periods[a-1]) <= p.key(a, codes[a], periods[a])
	}
	if sorted {
		parallel(workers, func(w int) {
			a, b := share(w)
			var ignored bool
			packKeys(keys[a:b], a, rank, codes[a:b], periods[a:b], minP, pbits, ibits, &ignored)
		})
		return
	}
	var starts [buckets + 1]int
	sum, largest := 0, 0
	for d := range buckets {
		starts[d] = sum
		for w := range counts {
			c := counts[w][d]
			counts[w][d] = sum
			sum += c
		}
		largest = max(largest, sum-starts[d])
	}
	starts[buckets] = n
	parallel(workers, func(w int) {
		a, b := share(w)
		p.scatter(keys, &counts[w], a, codes[a:b], periods[a:b])
	})
	var next atomic.Int64
	parallel(workers, func(w int) {
		var tmp []uint64
		if len(scratch) >= workers*largest {
			tmp = scratch[w*largest : (w+1)*largest]
		} else {
			tmp = make([]uint64, largest)
		}
		for {
			d := int(next.Add(1) - 1)
			if d >= buckets {
				return
			}
			if s, e := starts[d], starts[d+1]; e-s > 1 {
				radixSortWith(keys[s:e], tmp, ibits, shift)
			}
		}
	})
}

// keyPacker computes rows' packed keys and their most significant digit
// (the bits from shift) for packSortMSD. Its methods are plain loops over
// locals, like packKeys.
type keyPacker struct {
	rank         []uint32
	minP         int32
	pbits, ibits uint
	shift        uint
}

func (p *keyPacker) key(row int, code uint32, period int32) uint64 {
	return (uint64(p.rank[code])<<p.pbits|uint64(int64(period)-int64(p.minP)))<<p.ibits | uint64(row)
}

// count adds the digits of rows first… to c and reports whether their
// keys are out of order.
func (p *keyPacker) count(c *[1 << radixDigit]int, first int, codes []uint32, periods []int32) bool {
	rank, minP, pbits, ibits, shift := p.rank, int64(p.minP), p.pbits, p.ibits, p.shift
	periods = periods[:len(codes)]
	var prev uint64
	out := false
	for i, code := range codes {
		k := (uint64(rank[code])<<pbits|uint64(int64(periods[i])-minP))<<ibits | uint64(first+i)
		c[(k>>shift)&(1<<radixDigit-1)]++
		if k < prev {
			out = true
		}
		prev = k
	}
	return out
}

// scatter packs the keys of rows first… into keys at the positions c gives
// per digit.
func (p *keyPacker) scatter(keys []uint64, c *[1 << radixDigit]int, first int, codes []uint32, periods []int32) {
	rank, minP, pbits, ibits, shift := p.rank, int64(p.minP), p.pbits, p.ibits, p.shift
	periods = periods[:len(codes)]
	for i, code := range codes {
		k := (uint64(rank[code])<<pbits|uint64(int64(periods[i])-minP))<<ibits | uint64(first+i)
		d := (k >> shift) & (1<<radixDigit - 1)
		keys[c[d]] = k
		c[d]++
	}
}

// radixDigit is the digit width: 11 bits keep the 2048-entry histograms in
// L1 and need only 3 passes for a 33-bit key.
const radixDigit = 11

// radixSortWith sorts keys stably by bits [lo, hi), least significant digit
// first, ping-ponging with tmp (len(keys) long, or nil: allocated) as scratch.
func radixSortWith(keys, tmp []uint64, lo, hi uint) {
	if hi <= lo || len(keys) < 2 {
		return
	}
	if len(tmp) < len(keys) {
		tmp = make([]uint64, len(keys))
	}
	tmp = tmp[:len(keys)]
	src, dst := keys, tmp
	var count [1 << radixDigit]int
	for shift := lo; shift < hi; shift += radixDigit {
		width := min(radixDigit, hi-shift)
		mask := uint64(1)<<width - 1
		clear(count[:])
		for _, k := range src {
			count[(k>>shift)&mask]++
		}
		sum := 0
		for d := range count[:1<<width] {
			c := count[d]
			count[d] = sum
			sum += c
		}
		for _, k := range src {
			d := (k >> shift) & mask
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

// parallel runs f(0) … f(workers-1) at once and waits for them.
func parallel(workers int, f func(w int)) {
	if workers <= 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { f(w) })
	}
	wg.Wait()
}

// sortCompare is the fallback for keys too wide to pack.
func sortCompare(rank []uint32, codes []uint32, periods []int32) *order {
	perm := make([]uint32, len(codes))
	for i := range perm {
		perm[i] = uint32(i)
	}
	slices.SortStableFunc(perm, func(a, b uint32) int {
		ra, rb := rank[codes[a]], rank[codes[b]]
		switch {
		case ra != rb:
			if ra < rb {
				return -1
			}
			return 1
		case periods[a] != periods[b]:
			if periods[a] < periods[b] {
				return -1
			}
			return 1
		}
		return 0
	})
	return &order{perm: perm, rankOf: rank, codes: codes, periods: periods}
}
