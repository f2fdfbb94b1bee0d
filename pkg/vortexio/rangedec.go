package vortexio

import (
	"fmt"
	"math"
	"sort"
)

// Range decoding: a read of rows [a, b) of a flat chunk decodes only what
// those rows need. The one-series read of the cold tier (coldfile) reads a
// few hundred rows of a chunk of ~2000; decoding the chunk whole and
// slicing it made most of the read's cost (BenchmarkTierRead). FastLanes
// arrays (bitpacked, delta) are decoded per 1024-row block, so a range
// unpacks only its blocks; element-wise encodings (for, alp, masked, dict
// codes, ext, bool, sequence, constant) pass the range down; run-end looks
// the range up in its (small) run ends; patches are kept only where they
// land in the range. Every other encoding is decoded whole and sliced.
//
// The checks are those of a whole decode: buffer and child lengths are
// validated against the array's n rows, not only against the range, so a
// corrupt array is rejected whatever range is read.

// decodeRange decodes rows [a, b) of node nd, an array of dtype dt with n
// rows.
func (d *decoder) decodeRange(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	if uint64(n) > d.maxRows {
		return nil, corruptf("array of %d rows exceeds the limit", n)
	}
	if a < 0 || b < a || b > n {
		return nil, corruptf("rows [%d,%d) outside an array of %d", a, b, n)
	}
	v, ok, err := d.ranged(nd, dt, n, a, b)
	if err != nil {
		return nil, err
	}
	if !ok {
		full, err := d.decode(nd, dt, n)
		if err != nil {
			return nil, err
		}
		return full.slice(a, b), nil
	}
	if v.n != b-a {
		return nil, corruptf("%s decoded %d rows, want %d", nd.enc, v.n, b-a)
	}
	v.dt = dt
	return v, nil
}

// ranged decodes rows [a, b) of the encodings that can; ok is false for
// the others.
func (d *decoder) ranged(nd *anode, dt *DType, n, a, b int) (v *vec, ok bool, err error) {
	switch nd.enc {
	case "vortex.ext":
		if dt.Kind != KindExtension || len(nd.kids) != 1 {
			return nil, true, corruptf("vortex.ext for %s with %d children", dt, len(nd.kids))
		}
		v, err = d.decodeRange(nd.kids[0], dt.Storage, n, a, b)
	case "vortex.bool":
		v, err = d.decodeBool(nd, dt, n, a, b)
	case "vortex.constant":
		v, err = d.decodeConstant(nd, dt, b-a)
	case "vortex.masked":
		v, err = d.decodeMasked(nd, dt, n, a, b)
	case "vortex.dict":
		v, err = d.decodeDict(nd, dt, n, a, b)
	case "fastlanes.bitpacked":
		v, err = d.decodeBitPacked(nd, dt, n, a, b)
	case "fastlanes.for":
		v, err = d.decodeFoR(nd, dt, n, a, b)
	case "fastlanes.delta":
		v, err = d.decodeDelta(nd, dt, n, a, b)
	case "vortex.sequence":
		v, err = d.decodeSequence(nd, dt, n, a, b)
	case "vortex.runend":
		v, err = d.decodeRunEnd(nd, dt, n, a, b)
	case "vortex.alp":
		v, err = d.decodeALP(nd, dt, n, a, b)
	default:
		return nil, false, nil
	}
	return v, true, err
}

// validityRange is validity for rows [a, b).
func (d *decoder) validityRange(nd *anode, dt *DType, n, k, a, b int) ([]byte, bool, error) {
	if k >= len(nd.kids) {
		return nil, false, nil
	}
	if !dt.nullable() {
		return nil, false, corruptf("%s: validity child on non-nullable %s", nd.enc, dt)
	}
	v, err := d.decodeRange(nd.kids[k], boolNonNull, n, a, b)
	if err != nil {
		return nil, false, fmt.Errorf("validity: %w", err)
	}
	if v.nulls {
		return nil, false, corruptf("null validity")
	}
	return v.data, true, nil
}

// window keeps the patches that land in [a, b), shifted to the range.
func (p *patches) window(a, b int, valDT *DType) (*patches, error) {
	if a == 0 && b >= len(p.indices) {
		all := true
		for _, i := range p.indices {
			if i >= int64(b) {
				all = false
				break
			}
		}
		if all {
			return p, nil
		}
	}
	var sel, idx []int64
	for k, i := range p.indices {
		if i >= int64(a) && i < int64(b) {
			sel = append(sel, int64(k))
			idx = append(idx, i-int64(a))
		}
	}
	vals, err := take(p.values, sel, valDT)
	if err != nil {
		return nil, err
	}
	return &patches{indices: idx, values: vals}, nil
}

func (d *decoder) decodeBool(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	if dt.Kind != KindBool {
		return nil, corruptf("vortex.bool for %s", dt)
	}
	if err := d.expectBufs(nd, 1); err != nil {
		return nil, err
	}
	if err := d.expectKids(nd, 0, 1); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	off := m.uint(1)
	if off >= 8 && off > uint64(len(nd.bufs[0]))*8 {
		return nil, corruptf("vortex.bool offset %d", off)
	}
	if uint64(len(nd.bufs[0]))*8 < off+uint64(n) {
		return nil, corruptf("vortex.bool buffer of %d bytes for %d rows", len(nd.bufs[0]), n)
	}
	v := &vec{dt: dt, n: b - a, data: copyBits(nd.bufs[0], int(off)+a, b-a)}
	v.valid, _, err = d.validityRange(nd, dt, n, 0, a, b)
	return v, err
}

func (d *decoder) decodeMasked(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	if err := d.expectKids(nd, 1, 2); err != nil {
		return nil, err
	}
	if !dt.nullable() {
		return nil, corruptf("vortex.masked for non-nullable %s", dt)
	}
	v, err := d.decodeRange(nd.kids[0], dt.withNullable(false), n, a, b)
	if err != nil {
		return nil, err
	}
	valid, ok, err := d.validityRange(nd, dt, n, 1, a, b)
	if err != nil {
		return nil, err
	}
	v = v.materialize()
	if ok {
		v.valid = valid
	}
	return v, nil
}

func (d *decoder) decodeDict(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	if err := d.expectKids(nd, 2, 2); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	vlen, err := d.checkLen(m.uint(1), "vortex.dict values")
	if err != nil {
		return nil, err
	}
	cp := PType(m.uint(2))
	if !cp.valid() || !cp.isInt() {
		return nil, corruptf("vortex.dict codes ptype %d", cp)
	}
	cn := dt.nullable()
	if m.has(3) {
		cn = m.uint(3) != 0
	}
	codes, err := d.decodeRange(nd.kids[0], primDType(cp, cn), n, a, b)
	if err != nil {
		return nil, fmt.Errorf("dict codes: %w", err)
	}
	values, err := d.decode(nd.kids[1], dt, vlen)
	if err != nil {
		return nil, fmt.Errorf("dict values: %w", err)
	}
	if v, ok, err := d.gatherPrim(values, codes, dt); ok {
		return v, err
	}
	return takeCodes(values, codes, dt)
}

func (d *decoder) decodeBitPacked(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive || !sd.PType.isInt() {
		return nil, corruptf("fastlanes.bitpacked for %s", dt)
	}
	if err := d.expectBufs(nd, 1); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	B := sd.PType.Width() * 8
	width := m.uint(1)
	off := m.uint(2)
	if width > uint64(B) || off >= 1024 {
		return nil, corruptf("fastlanes.bitpacked width %d offset %d for %s", width, off, sd.PType)
	}
	if blocks := (int(off) + n + 1023) / 1024; len(nd.bufs[0]) < blocks*128*int(width) {
		return nil, corruptf("fastlanes.bitpacked buffer of %d bytes for %d blocks of width %d", len(nd.bufs[0]), blocks, width)
	}
	vals, err := d.bitUnpackBytes(nd.bufs[0], B, int(width), int(off)+a, b-a)
	if err != nil {
		return nil, err
	}
	k := 0
	if pm, ok := m.msg(3); ok {
		p, used, err := d.decodePatches(nd, pm, 0, dt.withNullable(false), n)
		if err != nil {
			return nil, err
		}
		if p, err = p.window(a, b, dt.withNullable(false)); err != nil {
			return nil, err
		}
		p.applyBytes(vals, sd.PType)
		k = used
	}
	if err := d.expectKids(nd, k, k+1); err != nil {
		return nil, err
	}
	v := &vec{dt: dt, n: b - a, data: vals}
	v.valid, _, err = d.validityRange(nd, dt, n, k, a, b)
	return v, err
}

func (d *decoder) decodeFoR(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive || !sd.PType.isInt() {
		return nil, corruptf("fastlanes.for for %s", dt)
	}
	if err := d.expectKids(nd, 1, 1); err != nil {
		return nil, err
	}
	s, err := parseScalar(nd.meta)
	if err != nil {
		return nil, err
	}
	ref, err := s.intBits(sd.PType)
	if err != nil {
		return nil, fmt.Errorf("fastlanes.for reference: %w", err)
	}
	v, err := d.decodeRange(nd.kids[0], dt, n, a, b)
	if err != nil {
		return nil, err
	}
	v = v.materialize()
	if ref == 0 {
		return v, nil
	}
	return &vec{dt: dt, n: v.n, valid: v.valid, data: d.addRef(v.data, sd.PType, v.n, ref)}, nil
}

func (d *decoder) decodeDelta(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive || !sd.PType.isInt() {
		return nil, corruptf("fastlanes.delta for %s", dt)
	}
	if err := d.expectKids(nd, 2, 2); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	dlen, err := d.checkLen(m.uint(1), "fastlanes.delta deltas")
	if err != nil {
		return nil, err
	}
	off := int(m.uint(2))
	if m.uint(2) >= 1024 || off+n > dlen {
		return nil, corruptf("fastlanes.delta offset %d, %d rows, %d deltas", m.uint(2), n, dlen)
	}
	B := sd.PType.Width() * 8
	lanes := 1024 / B
	nbases := dlen / 1024 * lanes
	if dlen%1024 != 0 {
		// Files from before the 1024-padding rule: one base for the tail.
		return nil, unsupportedf("fastlanes.delta with %d deltas (not a multiple of 1024)", dlen)
	}
	// Only the blocks holding rows [a, b) are decoded.
	first, last := (off+a)/1024, (off+b+1023)/1024
	skip := off + a - first*1024 // rows of the first block before the range
	if b == a {
		first, last, skip = 0, 0, 0
	}
	bv, err := d.decodeRange(nd.kids[0], dt, nbases, first*lanes, last*lanes)
	if err != nil {
		return nil, fmt.Errorf("delta bases: %w", err)
	}
	dv, err := d.decodeRange(nd.kids[1], dt, dlen, first*1024, last*1024)
	if err != nil {
		return nil, fmt.Errorf("deltas: %w", err)
	}
	vals, err := d.deltaBlocks(bv.materialize().data, dv.materialize().data, B, last-first)
	if err != nil {
		return nil, err
	}
	w := B / 8
	out := &vec{dt: dt, n: b - a, data: vals[skip*w : (skip+b-a)*w : (skip+b-a)*w]}
	if dv.valid != nil {
		out.valid = copyBits(untransposeBits(dv.valid, (last-first)*1024), skip, b-a)
	}
	return out, nil
}

func (d *decoder) decodeSequence(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive || !sd.PType.isInt() {
		return nil, corruptf("vortex.sequence for %s", dt)
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	bb, _ := m.msg(1)
	mb, _ := m.msg(2)
	bs, err := parseScalar(bb)
	if err != nil {
		return nil, err
	}
	ms, err := parseScalar(mb)
	if err != nil {
		return nil, err
	}
	// Multipliers are often written signed for unsigned arrays: accept both.
	base := bs.u
	mul := ms.u
	if bs.kind != svInt64 && bs.kind != svUint64 || ms.kind != svInt64 && ms.kind != svUint64 {
		return nil, corruptf("vortex.sequence scalars are not integers")
	}
	xs := make([]uint64, b-a)
	for i := range xs {
		xs[i] = base + uint64(a+i)*mul
	}
	return &vec{dt: dt, n: b - a, data: fromRaw64(sd.PType, xs)}, nil
}

func (d *decoder) decodeRunEnd(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	if err := d.expectKids(nd, 2, 2); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	ep := PType(m.uint(1))
	if !ep.valid() || !ep.isInt() {
		return nil, corruptf("vortex.runend ends ptype %d", ep)
	}
	runs, err := d.checkLen(m.uint(2), "vortex.runend runs")
	if err != nil {
		return nil, err
	}
	off := m.uint(3)
	if off > math.MaxInt64-uint64(n) {
		return nil, corruptf("vortex.runend offset %d", off)
	}
	ev, err := d.decode(nd.kids[0], primDType(ep, false), runs)
	if err != nil {
		return nil, fmt.Errorf("run ends: %w", err)
	}
	ends, err := ev.ints()
	if err != nil {
		return nil, err
	}
	values, err := d.decode(nd.kids[1], dt, runs)
	if err != nil {
		return nil, fmt.Errorf("run values: %w", err)
	}
	// The ends must cover every row of the array, as a whole decode checks.
	for r := 1; r < runs; r++ {
		if uint64(ends[r]) < uint64(ends[r-1]) {
			return nil, corruptf("vortex.runend ends decrease at run %d", r)
		}
	}
	if n > 0 && (runs == 0 || uint64(ends[runs-1]) < off+uint64(n)) {
		return nil, corruptf("vortex.runend ends do not cover row %d", off+uint64(n)-1)
	}
	idx := make([]int64, b-a)
	r := sort.Search(runs, func(k int) bool { return uint64(ends[k]) > off+uint64(a) })
	for i := range idx {
		pos := off + uint64(a+i)
		for r < runs && uint64(ends[r]) <= pos {
			r++
		}
		if r >= runs {
			return nil, corruptf("vortex.runend ends do not cover row %d", pos)
		}
		idx[i] = int64(r)
		if !values.isValid(r) {
			idx[i] = -1
		}
	}
	return take(values, idx, dt)
}

func (d *decoder) decodeALP(nd *anode, dt *DType, n, a, b int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive || (sd.PType != F32 && sd.PType != F64) {
		return nil, corruptf("vortex.alp for %s", dt)
	}
	if len(nd.kids) < 1 {
		return nil, corruptf("vortex.alp without encoded child")
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	e, f := m.uint(1), m.uint(2)
	encP := I64
	if sd.PType == F32 {
		encP = I32
		if e > 10 || f > 10 {
			return nil, corruptf("vortex.alp exponents e=%d f=%d", e, f)
		}
	} else if e > 23 || f > 23 {
		return nil, corruptf("vortex.alp exponents e=%d f=%d", e, f)
	}
	ev, err := d.decodeRange(nd.kids[0], primDType(encP, dt.nullable()), n, a, b)
	if err != nil {
		return nil, err
	}
	ev = ev.materialize()
	out := d.alpDecode(ev.data, encP, sd.PType, b-a, e, f)
	if pm, ok := m.msg(3); ok {
		p, _, err := d.decodePatches(nd, pm, 1, dt.withNullable(false), n)
		if err != nil {
			return nil, err
		}
		if p, err = p.window(a, b, dt.withNullable(false)); err != nil {
			return nil, err
		}
		p.applyBytes(out, sd.PType)
	} else if len(nd.kids) != 1 {
		return nil, corruptf("vortex.alp with %d children and no patches", len(nd.kids))
	}
	return &vec{dt: dt, n: b - a, valid: ev.valid, data: out}, nil
}
