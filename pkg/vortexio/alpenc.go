package vortexio

import (
	"math"
	"math/bits"
)

// ALP encoding: find exponents (e, f) such that round(v·10^e·10^-f) decodes
// back to v bit-exactly for most values; the rest become patches. The
// exponent pair is chosen on a sample by estimated size.

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

func encodeALP(v *vec, depth int) *enode {
	p := storage(v.dt).PType
	xs := raw64(v)
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
	// Sample up to 256 valid rows.
	var sample []int
	step := max(1, v.n/256)
	for i := 0; i < v.n; i += step {
		if v.isValid(i) {
			sample = append(sample, i)
		}
	}
	if len(sample) == 0 {
		return nil
	}
	bestE, bestF, bestCost := -1, -1, math.MaxInt
	for e := 0; e <= maxE; e++ {
		for f := 0; f <= e; f++ {
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
			cost := len(sample)*w + exc*(64+32)
			if cost < bestCost {
				bestE, bestF, bestCost = e, f, cost
			}
		}
	}
	if bestE < 0 {
		return nil
	}
	ints := make([]uint64, v.n)
	var pidx []uint64
	var pval []uint64
	fill, haveFill := int64(0), false
	for i := 0; i < v.n; i++ {
		if !v.isValid(i) {
			continue
		}
		n, ok := enc(i, bestE, bestF)
		if ok {
			ints[i] = uint64(n)
			if !haveFill {
				fill, haveFill = n, true
			}
			continue
		}
		pidx = append(pidx, uint64(i))
		pval = append(pval, xs[i])
	}
	if len(pidx)*4 > v.n {
		return nil
	}
	// Exceptions and nulls take a value already present, so they do not
	// widen the bit-packing range.
	for i := 0; i < v.n; i++ {
		if !v.isValid(i) {
			ints[i] = uint64(fill)
		}
	}
	for _, i := range pidx {
		ints[i] = uint64(fill)
	}
	encP := I64
	if p == F32 {
		encP = I32
	}
	iv := &vec{dt: primDType(encP, v.dt.nullable()), n: v.n, valid: v.valid, data: fromRaw64(encP, ints)}
	e := &enode{enc: "vortex.alp", kids: []*enode{encodeDepth(iv, depth+1)}}
	var m pbWriter
	m.uint(1, uint64(bestE))
	m.uint(2, uint64(bestF))
	if len(pidx) > 0 {
		ip := U32
		if v.n > math.MaxUint32 {
			ip = U64
		}
		var pm pbWriter
		pm.uint(1, uint64(len(pidx)))
		pm.uint(3, uint64(ip))
		m.bytesAlways(3, pm.b)
		pv := &vec{dt: primDType(p, false), n: len(pval), data: fromRaw64(p, pval)}
		e.kids = append(e.kids,
			&enode{enc: "vortex.primitive", bufs: []ebuf{{fromRaw64(ip, pidx), ip.Width()}}},
			&enode{enc: "vortex.primitive", bufs: []ebuf{{pv.data, p.Width()}}})
	}
	e.meta = m.b
	return e
}
