package vortexio

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// The primitive chooser. Most of a time-series table is numbers, so this is
// where both the file size and the write time are decided. It works on raw
// bit patterns widened to uint64 (one code path for every width), computes
// cheap statistics in one or two passes, estimates the size of the
// frame-of-reference + bit-packing candidate from a histogram instead of
// building it, and builds only the candidates whose size cannot be
// estimated (run-end, dictionary, delta), each of which recursively chooses
// its children. The smallest tree wins.

// pcol is one chunk of a primitive column as the chooser sees it.
type pcol struct {
	dt    *DType   // primitive dtype as stored (nullability included)
	p     PType    // dt's ptype
	xs    []uint64 // raw bit patterns, zero-extended
	valid []byte   // validity bitmap; nil when no row is null
}

// encFlags switch candidates off for nested children, where they cannot pay
// or would recurse without end.
type encFlags uint8

const (
	noDelta encFlags = 1 << iota
	noDict
	noRunEnd
)

const (
	// maxEncodeDepth bounds the encoding tree (ALP → masked → delta →
	// dict → bit-packed is already 5 deep).
	maxEncodeDepth = 6
	maxDictValues  = 65535
)

func newPCol(dt *DType, xs []uint64, valid []byte) *pcol {
	c := &pcol{dt: dt, p: storage(dt).PType, xs: xs}
	if valid != nil && countValid(valid, len(xs)) < len(xs) {
		c.valid = valid
	}
	return c
}

func (c *pcol) ok(i int) bool { return c.valid == nil || bitGet(c.valid, i) }

func countValid(valid []byte, n int) int {
	c := 0
	for _, b := range valid[:n/8] {
		c += bits.OnesCount8(b)
	}
	for i := n &^ 7; i < n; i++ {
		if bitGet(valid, i) {
			c++
		}
	}
	return c
}

func primNode(c *pcol) *enode {
	w := c.p.Width()
	e := &enode{enc: "vortex.primitive", bufs: []ebuf{{fromRaw64(c.p, c.xs), w}}}
	return withValidityBits(e, c.valid, len(c.xs))
}

func withValidityBits(e *enode, valid []byte, n int) *enode {
	if valid != nil {
		e.kids = append(e.kids, &enode{enc: "vortex.bool", bufs: []ebuf{{valid[:bitmapLen(n)], 1}}})
	}
	return e
}

// encodePrim returns the smallest encoding of c found by the chooser.
func encodePrim(c *pcol, depth int, fl encFlags) *enode {
	n := len(c.xs)
	if n > 0 && c.valid != nil && countValid(c.valid, n) == 0 {
		return constNode(encodeScalarNull())
	}
	if c.p.isInt() {
		return encodeIntCol(c, depth, fl)
	}
	return encodeFloatCol(c, depth, fl)
}

// intStats are the statistics of an integer chunk, over valid rows. lo and
// hi are in "ordered" space (signed values biased by 2^63) so that one
// unsigned comparison serves both signednesses.
type intStats struct {
	nvalid int
	lo, hi uint64
	runs   int
	seq    bool
	hist   [65]int // bit lengths of x - lo, x in ordered space
}

func ordBias(p PType) uint64 {
	if p.isSigned() {
		return 1 << 63
	}
	return 0
}

func computeIntStats(c *pcol) *intStats {
	st := &intStats{lo: math.MaxUint64}
	n := len(c.xs)
	p := c.p
	bias := ordBias(p)
	sh := 64 - uint(p.Width()*8)
	if c.valid == nil {
		// Fast path (most chunks): no validity lookups.
		var prev uint64
		for i, x := range c.xs {
			if i == 0 || x != prev {
				st.runs++
			}
			prev = x
			o := uint64(int64(x<<sh)>>sh) ^ bias
			if bias == 0 {
				o = x
			}
			st.lo = min(st.lo, o)
			st.hi = max(st.hi, o)
		}
		st.nvalid = n
		if n >= 2 {
			st.seq = isSequence(p, c.xs)
		}
		for _, x := range c.xs {
			o := uint64(int64(x<<sh)>>sh) ^ bias
			if bias == 0 {
				o = x
			}
			st.hist[bits.Len64(o-st.lo)]++
		}
		return st
	}
	prevOK := false
	var prev uint64
	for i, x := range c.xs {
		ok := bitGet(c.valid, i)
		if i == 0 || ok != prevOK || (ok && x != prev) {
			st.runs++
		}
		prevOK, prev = ok, x
		if !ok {
			continue
		}
		st.nvalid++
		o := x
		if bias != 0 {
			o = uint64(int64(x<<sh)>>sh) ^ bias
		}
		st.lo = min(st.lo, o)
		st.hi = max(st.hi, o)
	}
	if st.nvalid == 0 {
		return st
	}
	for i, x := range c.xs {
		if bitGet(c.valid, i) {
			o := x
			if bias != 0 {
				o = uint64(int64(x<<sh)>>sh) ^ bias
			}
			st.hist[bits.Len64(o-st.lo)]++
		}
	}
	return st
}

func isSequence(p PType, xs []uint64) bool {
	mask := maskBits(uint(p.Width() * 8))
	step := (xs[1] - xs[0]) & mask
	for i := 2; i < len(xs); i++ {
		if (xs[i]-xs[i-1])&mask != step {
			return false
		}
	}
	// The progression must not wrap, so that base + i·step is exact.
	if p.isSigned() {
		b, s, last := signedValue(p, xs[0]), signedValue(p, step), signedValue(p, xs[len(xs)-1])
		return (s >= 0) == (last >= b)
	}
	return xs[len(xs)-1] >= xs[0]
}

func sequenceNode(c *pcol) *enode {
	p, xs := c.p, c.xs
	mask := maskBits(uint(p.Width() * 8))
	step := (xs[1] - xs[0]) & mask
	var base, mul []byte
	if p.isSigned() {
		base, mul = encodeScalarPrim(I64, uint64(signedValue(p, xs[0]))), encodeScalarPrim(I64, uint64(signedValue(p, step)))
	} else {
		base, mul = encodeScalarPrim(U64, xs[0]), encodeScalarPrim(U64, step)
	}
	var w pbWriter
	w.bytesAlways(1, base)
	w.bytesAlways(2, mul)
	return &enode{enc: "vortex.sequence", meta: w.b}
}

// patchIndexType is the ptype of patch indices for an array of n rows.
func patchIndexType(n int) PType {
	switch {
	case n <= math.MaxUint16+1:
		return U16
	case n <= math.MaxUint32:
		return U32
	}
	return U64
}

// planBitWidth picks the bit width W minimising packed bytes plus patches
// (values that need more than W bits, stored as index + value), for a frame
// starting at the minimum. It returns W = -1 when packing cannot beat the
// plain values.
func planBitWidth(st *intStats, n int, p PType) (W, size int) {
	return planFromHist(&st.hist, st.nvalid, n, p)
}

func planFromHist(hist *[65]int, nvalid, n int, p PType) (W, size int) {
	B := p.Width() * 8
	blocks := (n + 1023) / 1024
	per := patchIndexType(n).Width() + p.Width()
	W, size = -1, n*p.Width()
	exc := nvalid
	for w := 0; w < B; w++ {
		exc -= hist[w]
		s := blocks * 128 * w
		if exc > 0 {
			s += exc*per + 24 // + patch metadata and two child nodes
		}
		if s < size {
			W, size = w, s
		}
	}
	return W, size
}

// planFrame chooses the frame of reference: the start (in ordered space)
// and bit width of the window that the bit-packed values must fall in.
// Starting at the minimum is optimal unless there are low outliers, which
// deltas have on both sides (a series boundary jumps up or down); then a
// window found on a sorted sample, with everything outside it patched
// (FoR decoding adds the reference with wrapping, so a patch may hold a
// value below it), can be much narrower.
func planFrame(c *pcol, st *intStats) (ref uint64, W, size int) {
	n := len(c.xs)
	ref = st.lo
	W, size = planBitWidth(st, n, c.p)
	if W < 6 || st.nvalid < 64 {
		return ref, W, size
	}
	signed := c.p.isSigned()
	sh := 64 - uint(c.p.Width()*8)
	ordOf := func(x uint64) uint64 {
		if signed {
			return uint64(int64(x<<sh)>>sh) ^ 1<<63
		}
		return x
	}
	sample := make([]uint64, 0, 512)
	step := max(1, n/512)
	for i := 0; i < n; i += step {
		if c.ok(i) {
			sample = append(sample, ordOf(c.xs[i]))
		}
	}
	slices.Sort(sample)
	m := len(sample)
	// Without low outliers (dropping the lowest 3% of the sample does not
	// narrow the range) the minimum is already the best start.
	if bits.Len64(st.hi-sample[m/32]) >= W {
		return ref, W, size
	}
	bestW, bestStart, bestCost := -1, uint64(0), float64(size)
	blocks := float64((n + 1023) / 1024)
	per := float64(patchIndexType(n).Width() + c.p.Width())
	for w := 0; w < W; w++ {
		cover, start := 0, uint64(0)
		j := 0
		for i := 0; i < m; i++ {
			for j < m && (sample[j]-sample[i])>>uint(w) == 0 {
				j++
			}
			if j-i > cover {
				cover, start = j-i, sample[i]
			}
		}
		cost := blocks*128*float64(w) + float64(m-cover)/float64(m)*float64(st.nvalid)*per
		if cost < bestCost {
			bestW, bestStart, bestCost = w, start, cost
		}
	}
	if bestW < 0 || bestStart == st.lo {
		return ref, W, size
	}
	var hist [65]int
	for i, x := range c.xs {
		if c.ok(i) {
			o := ordOf(x)
			if o < bestStart {
				hist[64]++
			} else {
				hist[bits.Len64(o-bestStart)]++
			}
		}
	}
	if w2, s2 := planFromHist(&hist, st.nvalid, n, c.p); w2 >= 0 && s2 < size {
		return bestStart, w2, s2
	}
	return ref, W, size
}

// forNode builds FoR (subtract the minimum) + bit-packing with width W;
// values wider than W become patches. Nulls are packed as 0 and validity
// is carried by the bit-packed node.
func forNode(c *pcol, lo uint64, W int) *enode {
	n := len(c.xs)
	B := c.p.Width() * 8
	mask := maskBits(uint(B))
	signed := c.p.isSigned()
	sh := 64 - uint(B)
	enc := make([]uint64, n)
	var pidx, pval []uint64
	for i, x := range c.xs {
		if !c.ok(i) {
			continue
		}
		o := x
		if signed {
			o = uint64(int64(x<<sh)>>sh) ^ 1<<63
		}
		u := o - lo // wraps for values below the frame: they become patches
		if u>>uint(W) != 0 {
			pidx = append(pidx, uint64(i))
			pval = append(pval, u&mask)
			continue
		}
		enc[i] = u
	}
	bp := &enode{enc: "fastlanes.bitpacked", bufs: []ebuf{{bitPack(enc, B, W), B / 8}}}
	var m pbWriter
	m.uint(1, uint64(W))
	if len(pidx) > 0 {
		ip := patchIndexType(n)
		m.bytesAlways(3, patchesMeta(len(pidx), ip))
		bp.kids = append(bp.kids,
			&enode{enc: "vortex.primitive", bufs: []ebuf{{fromRaw64(ip, pidx), ip.Width()}}},
			&enode{enc: "vortex.primitive", bufs: []ebuf{{fromRaw64(c.p, pval), c.p.Width()}}})
	}
	bp.meta = m.b
	withValidityBits(bp, c.valid, n)
	ref := (lo ^ ordBias(c.p)) & mask
	if ref == 0 {
		return bp
	}
	return &enode{enc: "fastlanes.for", meta: encodeScalarPrim(c.p, ref), kids: []*enode{bp}}
}

func patchesMeta(n int, ip PType) []byte {
	var pm pbWriter
	pm.uint(1, uint64(n))
	pm.uintAlways(3, uint64(ip))
	return pm.b
}

func encodeIntCol(c *pcol, depth int, fl encFlags) *enode {
	n := len(c.xs)
	st := computeIntStats(c)
	if n > 0 && st.nvalid == n && st.lo == st.hi {
		return constNode(encodeScalarPrim(c.p, c.xs[0]))
	}
	if st.seq {
		return sequenceNode(c)
	}
	ref, W, best := planFrame(c, st)
	var bestNode *enode
	consider := func(e *enode) {
		if e != nil {
			if s := e.size(); s < best {
				best, bestNode = s, e
			}
		}
	}
	if depth < maxEncodeDepth && n >= 8 {
		if fl&noRunEnd == 0 && st.runs*4 <= n {
			consider(runEndNode(c, st.runs, depth, fl))
		}
		// A dictionary pays when few distinct values cost many bits (wide
		// values, or narrow ones with many patches).
		if fl&noDict == 0 && best*8 >= 2*n {
			consider(dictNode(c, depth, fl))
		}
		// Delta pays on runs of sorted or slowly moving values.
		if fl&noDelta == 0 && n >= 512 && best*8 >= 4*n && st.runs*8 > n {
			consider(deltaNode(c, depth))
		}
	}
	if bestNode != nil {
		return bestNode
	}
	if W >= 0 {
		return forNode(c, ref, W)
	}
	return primNode(c)
}

// deltaNode builds fastlanes.delta (wrapped in vortex.masked when the chunk
// has nulls, because the reference expects a delta's own validity in
// transposed bit order).
func deltaNode(c *pcol, depth int) *enode {
	B := c.p.Width() * 8
	bases, deltas := deltaEncode(c.xs, c.valid, B)
	inner := c.dt.withNullable(false)
	var m pbWriter
	m.uint(1, uint64(len(deltas)))
	e := &enode{enc: "fastlanes.delta", meta: m.b, kids: []*enode{
		encodePrim(&pcol{dt: inner, p: c.p, xs: bases}, depth+1, noDelta|noDict|noRunEnd),
		encodePrim(&pcol{dt: inner, p: c.p, xs: deltas}, depth+1, noDelta|noRunEnd),
	}}
	if c.valid == nil {
		return e
	}
	return withValidityBits(&enode{enc: "vortex.masked", kids: []*enode{e}}, c.valid, len(c.xs))
}

func sameRow(c *pcol, i, j int) bool {
	oi, oj := c.ok(i), c.ok(j)
	return oi == oj && (!oi || c.xs[i] == c.xs[j])
}

func runEndNode(c *pcol, runs, depth int, fl encFlags) *enode {
	n := len(c.xs)
	ends := make([]uint64, 0, runs)
	starts := make([]int, 0, runs)
	starts = append(starts, 0)
	for i := 1; i < n; i++ {
		if !sameRow(c, i, i-1) {
			ends = append(ends, uint64(i))
			starts = append(starts, i)
		}
	}
	ends = append(ends, uint64(n))
	vals := make([]uint64, len(starts))
	var valid []byte
	if c.valid != nil {
		valid = make([]byte, bitmapLen(len(starts)))
	}
	for k, s := range starts {
		vals[k] = c.xs[s]
		if valid != nil && c.ok(s) {
			bitSet(valid, k)
		}
	}
	ep := U32
	if n > math.MaxUint32 {
		ep = U64
	}
	var m pbWriter
	m.uint(1, uint64(ep))
	m.uint(2, uint64(len(ends)))
	return &enode{enc: "vortex.runend", meta: m.b, kids: []*enode{
		encodePrim(&pcol{dt: primDType(ep, false), p: ep, xs: ends}, depth+1, noDelta|noDict|noRunEnd),
		encodePrim(newPCol(c.dt, vals, valid), depth+1, fl|noRunEnd|noDelta),
	}}
}

// dictNode builds a dictionary with codes ordered by descending frequency,
// so that bit-packing the codes with patches can leave rare values (such as
// the jump at a series boundary in a delta column) out of the bit width.
func dictNode(c *pcol, depth int, fl encFlags) *enode {
	n := len(c.xs)
	limit := min(maxDictValues, n/2)
	index := make(map[uint64]int32, 64)
	var vals []uint64
	var counts []int
	codes := make([]uint64, n)
	for i, x := range c.xs {
		if !c.ok(i) {
			continue
		}
		k, ok := index[x]
		if !ok {
			if len(vals) >= limit {
				return nil
			}
			k = int32(len(vals))
			index[x] = k
			vals = append(vals, x)
			counts = append(counts, 0)
		}
		counts[k]++
		codes[i] = uint64(k)
		if i == 1023 && len(vals) > 768 {
			return nil // nearly all distinct: not worth the rest of the pass
		}
	}
	if len(vals) == 0 {
		return nil
	}
	order := make([]int, len(vals))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(counts[b], counts[a]) })
	rank := make([]uint64, len(vals))
	sorted := make([]uint64, len(vals))
	for r, k := range order {
		rank[k] = uint64(r)
		sorted[r] = vals[k]
	}
	for i := range codes {
		if c.ok(i) {
			codes[i] = rank[codes[i]]
		}
	}
	cp := U8
	if len(vals) > 256 {
		cp = U16
	}
	nullable := c.dt.nullable()
	var m pbWriter
	m.uint(1, uint64(len(vals)))
	m.uint(2, uint64(cp))
	m.uintAlways(3, b2u(nullable))
	return &enode{enc: "vortex.dict", meta: m.b, kids: []*enode{
		encodePrim(&pcol{dt: primDType(cp, nullable), p: cp, xs: codes, valid: c.valid}, depth+1, noDelta|noDict|noRunEnd),
		encodePrim(&pcol{dt: c.dt, p: c.p, xs: sorted}, depth+1, fl|noDelta|noDict|noRunEnd),
	}}
}

func encodeFloatCol(c *pcol, depth int, fl encFlags) *enode {
	n := len(c.xs)
	runs := 0
	for i := 0; i < n; i++ {
		if i == 0 || !sameRow(c, i, i-1) {
			runs++
		}
	}
	if n > 0 && runs == 1 && c.valid == nil {
		return constNode(encodeScalarPrim(c.p, c.xs[0]))
	}
	best := primNode(c)
	consider := func(e *enode) {
		if e != nil && e.size() < best.size() {
			best = e
		}
	}
	if depth < maxEncodeDepth && n >= 8 {
		if c.p == F64 || c.p == F32 {
			consider(alpNode(c, depth, fl))
		}
		if fl&noRunEnd == 0 && runs*4 <= n {
			consider(runEndNode(c, runs, depth, fl))
		}
		if fl&noDict == 0 && runs*4 > n && lowCardinality(c) {
			consider(dictNode(c, depth, fl))
		}
	}
	return best
}

// lowCardinality guesses from a 256-row sample whether a dictionary could
// pay, to spare the full hash pass on high-cardinality floats.
func lowCardinality(c *pcol) bool {
	n := len(c.xs)
	step := max(1, n/256)
	seen := make(map[uint64]struct{}, 64)
	total := 0
	for i := 0; i < n; i += step {
		if c.ok(i) {
			seen[c.xs[i]] = struct{}{}
			total++
		}
	}
	return len(seen)*4 <= total
}
