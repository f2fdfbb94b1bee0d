package vortexio

import (
	"math"
	"math/bits"
	"slices"
)

// ALP encoding: find exponents (e, f) such that round(v·10^e·10^-f) decodes
// back to v bit-exactly for most values; the rest become patches.
//
// Choosing (e, f) is a search over 190 pairs for f64, so it is done on a
// sample and in two rounds, as the ALP paper does: every pair on 32 sampled
// rows, then the 4 best pairs on up to 256 rows. Trying every pair on a large
// sample used to cost more than encoding the chunk itself.

func alpEncode64(x float64, e, f int) (int64, bool) {
	y := x * f10f64[e] * if10f64[f]
	if math.IsNaN(y) || y > 9.2e18 || y < -9.2e18 {
		return 0, false
	}
	n := int64(math.RoundToEven(y))
	if math.Float64bits(float64(n)*f10f64[f]*if10f64[e]) != math.Float64bits(x) {
		return 0, false
	}
	return n, true
}

func alpEncode32(x float32, e, f int) (int64, bool) {
	y := x * f10f32[e] * if10f32[f]
	if y != y || y > 2.1e9 || y < -2.1e9 {
		return 0, false
	}
	n := int64(math.RoundToEven(float64(y)))
	if math.Float32bits(float32(n)*f10f32[f]*if10f32[e]) != math.Float32bits(x) {
		return 0, false
	}
	return n, true
}

type alpPair struct{ e, f, cost int }

// alpCost estimates the encoded size in bits of the sample rows: bit width
// of the integer range per row, plus an index and a raw value per exception.
func alpCost(enc func(int, int, int) (int64, bool), sample []int, e, f int) int {
	exc := 0
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, i := range sample {
		n, ok := enc(i, e, f)
		if !ok {
			exc++
			continue
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	w := 64
	if lo <= hi {
		w = bits.Len64(uint64(hi - lo))
	}
	return len(sample)*w + exc*(64+32)
}

func alpNode(c *pcol, depth int, fl encFlags) *enode {
	n := len(c.xs)
	p := c.p
	xs := c.xs
	enc := func(i int, e, f int) (int64, bool) {
		if p == F64 {
			return alpEncode64(math.Float64frombits(xs[i]), e, f)
		}
		return alpEncode32(math.Float32frombits(uint32(xs[i])), e, f)
	}
	maxE := 18
	if p == F32 {
		maxE = 10
	}
	var sample []int
	step := max(1, n/256)
	for i := 0; i < n; i += step {
		if c.ok(i) {
			sample = append(sample, i)
		}
	}
	if len(sample) == 0 {
		return nil
	}
	first := sample
	if len(first) > 32 {
		first = make([]int, 32)
		for k := range first {
			first[k] = sample[k*len(sample)/32]
		}
	}
	pairs := make([]alpPair, 0, (maxE+1)*(maxE+2)/2)
	for e := 0; e <= maxE; e++ {
		for f := 0; f <= e; f++ {
			pairs = append(pairs, alpPair{e, f, alpCost(enc, first, e, f)})
		}
	}
	// Stable: on ties the smaller exponents (listed first) win.
	slices.SortStableFunc(pairs, func(a, b alpPair) int { return a.cost - b.cost })
	best := pairs[0]
	if len(sample) > len(first) {
		best.cost = math.MaxInt
		for _, pr := range pairs[:min(4, len(pairs))] {
			if cost := alpCost(enc, sample, pr.e, pr.f); cost < best.cost {
				best = alpPair{pr.e, pr.f, cost}
			}
		}
	}
	encP := I64
	if p == F32 {
		encP = I32
	}
	mask := maskBits(uint(encP.Width() * 8))
	ints := make([]uint64, n)
	var pidx, pval []uint64
	// Nulls and exceptions repeat the previous encoded value: that keeps
	// them inside the frame of reference and makes their delta 0.
	last, have := uint64(0), false
	firstOK := -1
	for i := 0; i < n; i++ {
		if c.ok(i) {
			if v, ok := enc(i, best.e, best.f); ok {
				last, have = uint64(v)&mask, true
				if firstOK < 0 {
					firstOK = i
				}
				ints[i] = last
				continue
			}
			pidx = append(pidx, uint64(i))
			pval = append(pval, xs[i])
		}
		if have {
			ints[i] = last
		}
	}
	if len(pidx)*4 > n || firstOK < 0 {
		return nil
	}
	for i := 0; i < firstOK; i++ {
		ints[i] = ints[firstOK]
	}
	e := &enode{enc: "vortex.alp", kids: []*enode{
		encodePrim(&pcol{dt: primDType(encP, c.dt.nullable()), p: encP, xs: ints, valid: c.valid}, depth+1, fl|noDict|noRunEnd),
	}}
	var m pbWriter
	m.uint(1, uint64(best.e))
	m.uint(2, uint64(best.f))
	if len(pidx) > 0 {
		ip := patchIndexType(n)
		m.bytesAlways(3, patchesMeta(len(pidx), ip))
		e.kids = append(e.kids,
			&enode{enc: "vortex.primitive", bufs: []ebuf{{fromRaw64(ip, pidx), ip.Width()}}},
			&enode{enc: "vortex.primitive", bufs: []ebuf{{fromRaw64(p, pval), p.Width()}}})
	}
	e.meta = m.b
	return e
}
