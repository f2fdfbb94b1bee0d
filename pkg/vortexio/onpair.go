package vortexio

import "math"

// decodeOnPair decodes vortex.onpair, the string encoding vortex-data 0.90's
// default writer picks for high-cardinality strings (edition core2026.08.1):
// a dictionary of byte strings and, per row, a run of dictionary codes whose
// entries are concatenated.
func (d *decoder) decodeOnPair(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindUtf8 && sd.Kind != KindBinary {
		return nil, corruptf("vortex.onpair for %s", dt)
	}
	if err := d.expectBufs(nd, 1); err != nil {
		return nil, err
	}
	if err := d.expectKids(nd, 4, 5); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	lp, dop, cp, cop := PType(m.uint(1)), PType(m.uint(5)), PType(m.uint(6)), PType(m.uint(7))
	for _, p := range []PType{lp, dop, cp, cop} {
		if !p.valid() || !p.isInt() {
			return nil, corruptf("vortex.onpair ptype %d", p)
		}
	}
	dsize, err := d.checkLen(m.uint(3), "vortex.onpair dictionary")
	if err != nil {
		return nil, err
	}
	ntok, err := d.checkLen(m.uint(4), "vortex.onpair tokens")
	if err != nil {
		return nil, err
	}
	dict := nd.bufs[0]
	dov, err := d.decode(nd.kids[0], primDType(dop, false), dsize+1)
	if err != nil {
		return nil, err
	}
	doffs, err := dov.indices(int64(len(dict))+1, false)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= dsize; i++ {
		if doffs[i] < doffs[i-1] {
			return nil, corruptf("vortex.onpair decreasing dictionary offsets")
		}
	}
	cv, err := d.decode(nd.kids[1], primDType(cp, false), ntok)
	if err != nil {
		return nil, err
	}
	codes, err := cv.indices(int64(dsize), false)
	if err != nil {
		return nil, err
	}
	cov, err := d.decode(nd.kids[2], primDType(cop, false), n+1)
	if err != nil {
		return nil, err
	}
	coffs, err := cov.indices(int64(ntok)+1, false)
	if err != nil {
		return nil, err
	}
	lv, err := d.decode(nd.kids[3], primDType(lp, false), n)
	if err != nil {
		return nil, err
	}
	lens, err := lv.ints()
	if err != nil {
		return nil, err
	}
	total, err := sumLengths(lens, "vortex.onpair")
	if err != nil {
		return nil, err
	}
	if total > math.MaxInt32 {
		return nil, unsupportedf("string chunk larger than 2 GiB")
	}
	v := &vec{dt: dt, n: n, offs: make([]int32, n+1)}
	if v.valid, _, err = d.validity(nd, dt, n, 4); err != nil {
		return nil, err
	}
	out := make([]byte, 0, total)
	for i := 0; i < n; i++ {
		if coffs[i+1] < coffs[i] {
			return nil, corruptf("vortex.onpair decreasing code offsets")
		}
		start := len(out)
		for _, c := range codes[coffs[i]:coffs[i+1]] {
			piece := dict[doffs[c]:doffs[c+1]]
			if uint64(len(out)+len(piece)) > total {
				return nil, corruptf("vortex.onpair output exceeds declared lengths")
			}
			out = append(out, piece...)
		}
		if int64(len(out)-start) != lens[i] && v.isValid(i) {
			return nil, corruptf("vortex.onpair row %d decodes to %d bytes, want %d", i, len(out)-start, lens[i])
		}
		v.offs[i+1] = int32(len(out))
	}
	v.data = out
	return v, nil
}

// sumLengths adds up the string lengths of a compressed string array,
// refusing negative ones (untrusted input).
func sumLengths(lens []int64, encoding string) (uint64, error) {
	total := uint64(0)
	for _, l := range lens {
		if l < 0 {
			return 0, corruptf("%s negative length", encoding)
		}
		total += uint64(l)
	}
	return total, nil
}
