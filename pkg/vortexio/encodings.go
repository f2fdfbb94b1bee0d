package vortexio

import (
	"encoding/binary"
	"fmt"
	"math"
)

// patches are exceptions shared by bitpacked, ALP, ALP-RD and sparse arrays.
type patches struct {
	indices []int64 // logical positions in [0, n)
	values  *vec
}

// decodePatches reads PatchesMetadata m and the (indices, values) children at k.
func (d *decoder) decodePatches(nd *anode, pm []byte, k int, valDT *DType, n int) (*patches, int, error) {
	m, err := pbDecode(pm)
	if err != nil {
		return nil, 0, err
	}
	plen, err := d.checkLen(m.uint(1), "patches")
	if err != nil {
		return nil, 0, err
	}
	off := m.uint(2)
	ip := PType(m.uint(3))
	if !ip.valid() || !ip.isInt() {
		return nil, 0, corruptf("patch indices ptype %d", ip)
	}
	used := 2
	if m.has(4) {
		used = 3 // chunk offsets child: an acceleration index we do not need
	}
	if len(nd.kids) < k+2 {
		return nil, 0, corruptf("%s: missing patch children", nd.enc)
	}
	iv, err := d.decode(nd.kids[k], primDType(ip, false), plen)
	if err != nil {
		return nil, 0, fmt.Errorf("patch indices: %w", err)
	}
	vv, err := d.decode(nd.kids[k+1], valDT, plen)
	if err != nil {
		return nil, 0, fmt.Errorf("patch values: %w", err)
	}
	raw, err := iv.ints()
	if err != nil {
		return nil, 0, err
	}
	p := &patches{values: vv}
	keep := make([]int64, 0, plen)
	for i, x := range raw {
		pos := uint64(x) - off
		if uint64(x) < off || pos >= uint64(n) {
			continue
		}
		keep = append(keep, int64(pos))
		_ = i
	}
	if len(keep) != plen {
		// Sliced patches: keep only those that land in range, with their values.
		var sel []int64
		for i, x := range raw {
			if uint64(x) >= off && uint64(x)-off < uint64(n) {
				sel = append(sel, int64(i))
			}
		}
		if p.values, err = take(vv, sel, valDT); err != nil {
			return nil, 0, err
		}
	}
	p.indices = keep
	return p, used, nil
}

// applyPrim overwrites primitive positions with patch values.
func (p *patches) applyPrim(out []uint64) {
	pv := raw64(p.values)
	for k, i := range p.indices {
		out[i] = pv[k]
	}
}

func (d *decoder) decodeZigZag(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive || !sd.PType.isSigned() {
		return nil, corruptf("vortex.zigzag for %s", dt)
	}
	if err := d.expectKids(nd, 1, 1); err != nil {
		return nil, err
	}
	v, err := d.decode(nd.kids[0], primDType(sd.PType.unsigned(), dt.nullable()), n)
	if err != nil {
		return nil, err
	}
	v = v.materialize()
	xs := raw64(v)
	for i, u := range xs {
		xs[i] = (u >> 1) ^ -(u & 1)
	}
	return &vec{dt: dt, n: n, valid: v.valid, data: fromRaw64(sd.PType, xs)}, nil
}

func (d *decoder) decodeSparse(nd *anode, dt *DType, n int) (*vec, error) {
	if err := d.expectBufs(nd, 1); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	pm, ok := m.msg(1)
	if !ok {
		return nil, corruptf("vortex.sparse without patches")
	}
	fs, err := parseScalar(nd.bufs[0])
	if err != nil {
		return nil, err
	}
	fill, err := scalarRepeat(fs, dt, 1)
	if err != nil {
		return nil, fmt.Errorf("sparse fill: %w", err)
	}
	p, _, err := d.decodePatches(nd, pm, 0, dt, n)
	if err != nil {
		return nil, err
	}
	// Gather from [fill, patch values...]: index 0 everywhere, 1+k at patch k.
	src, err := concat(dt, []*vec{fill.materialize(), p.values.materialize()})
	if err != nil {
		return nil, err
	}
	idx := make([]int64, n)
	for k, i := range p.indices {
		idx[i] = int64(k + 1)
	}
	return take(src, idx, dt)
}

func (d *decoder) decodeRLE(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive {
		return nil, corruptf("fastlanes.rle for %s", dt)
	}
	if err := d.expectKids(nd, 3, 3); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	vlen, err := d.checkLen(m.uint(1), "fastlanes.rle values")
	if err != nil {
		return nil, err
	}
	ilen, err := d.checkLen(m.uint(2), "fastlanes.rle indices")
	if err != nil {
		return nil, err
	}
	ip, op := PType(m.uint(3)), PType(m.uint(5))
	if !ip.valid() || !ip.isInt() || !op.valid() || !op.isInt() {
		return nil, corruptf("fastlanes.rle ptypes %d/%d", ip, op)
	}
	olen, err := d.checkLen(m.uint(4), "fastlanes.rle offsets")
	if err != nil {
		return nil, err
	}
	off := m.uint(6)
	if off > uint64(ilen) || uint64(n) > uint64(ilen)-off {
		return nil, corruptf("fastlanes.rle slice [%d,+%d) beyond %d indices", off, n, ilen)
	}
	values, err := d.decode(nd.kids[0], dt.withNullable(false), vlen)
	if err != nil {
		return nil, err
	}
	iv, err := d.decode(nd.kids[1], primDType(ip, dt.nullable()), ilen)
	if err != nil {
		return nil, err
	}
	ov, err := d.decode(nd.kids[2], primDType(op, false), olen)
	if err != nil {
		return nil, err
	}
	ind, err := iv.ints()
	if err != nil {
		return nil, err
	}
	vo, err := ov.ints()
	if err != nil {
		return nil, err
	}
	chunks := (ilen + 1023) / 1024
	if olen < chunks {
		return nil, corruptf("fastlanes.rle has %d chunk offsets for %d chunks", olen, chunks)
	}
	idx := make([]int64, ilen)
	for c := 0; c < chunks; c++ {
		base := vo[c] - vo[0]
		end := int64(vlen)
		if c+1 < olen {
			end = vo[c+1] - vo[0]
		}
		if base < 0 || base > end || end > int64(vlen) {
			return nil, corruptf("fastlanes.rle chunk %d value range [%d,%d)", c, base, end)
		}
		for j := c * 1024; j < min(ilen, (c+1)*1024); j++ {
			if !iv.isValid(j) {
				idx[j] = -1
				continue
			}
			x := base + ind[j]
			if end-base == 1 {
				x = base
			}
			if ind[j] < 0 || x >= end {
				return nil, corruptf("fastlanes.rle index %d out of chunk range", ind[j])
			}
			idx[j] = x
		}
	}
	return take(values, idx[off:off+uint64(n)], dt)
}

// ALP: value = float(encoded) · 10^f · 10^-e, in the float's own precision.
var (
	f10f64  [24]float64
	if10f64 [24]float64
	f10f32  = [11]float32{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}
	if10f32 = [11]float32{1, 0.1, 0.01, 0.001, 0.0001, 0.00001, 0.000001, 0.0000001, 0.00000001, 0.000000001, 0.0000000001}
)

func init() {
	pf := []float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23}
	nf := []float64{1, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18, 1e-19, 1e-20, 1e-21, 1e-22, 1e-23}
	copy(f10f64[:], pf)
	copy(if10f64[:], nf)
}

func (d *decoder) decodeALPRD(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive || (sd.PType != F32 && sd.PType != F64) {
		return nil, corruptf("vortex.alprd for %s", dt)
	}
	if len(nd.kids) < 2 {
		return nil, corruptf("vortex.alprd with %d children", len(nd.kids))
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	rbw := m.uint(1)
	dict, err := m.repeatedUint(3)
	if err != nil {
		return nil, err
	}
	if dl := m.uint(2); dl != uint64(len(dict)) || dl > 256 {
		return nil, corruptf("vortex.alprd dictionary of %d/%d entries", dl, len(dict))
	}
	lp := PType(m.uint(4))
	if !lp.valid() || !lp.isUnsigned() {
		return nil, corruptf("vortex.alprd left parts ptype %d", lp)
	}
	rp := U64
	if sd.PType == F32 {
		rp = U32
	}
	if rbw > uint64(rp.Width()*8) {
		return nil, corruptf("vortex.alprd right bit width %d", rbw)
	}
	lv, err := d.decode(nd.kids[0], primDType(lp, dt.nullable()), n)
	if err != nil {
		return nil, fmt.Errorf("left parts: %w", err)
	}
	rv, err := d.decode(nd.kids[1], primDType(rp, false), n)
	if err != nil {
		return nil, fmt.Errorf("right parts: %w", err)
	}
	lv = lv.materialize()
	codes := raw64(lv)
	left := make([]uint64, n)
	for i, c := range codes {
		if c >= uint64(len(dict)) {
			if lv.isValid(i) {
				return nil, corruptf("vortex.alprd code %d out of range", c)
			}
			continue
		}
		left[i] = dict[c]
	}
	if pm, ok := m.msg(5); ok {
		p, _, err := d.decodePatches(nd, pm, 2, primDType(lp, false), n)
		if err != nil {
			return nil, err
		}
		p.applyPrim(left)
	}
	right := raw64(rv)
	out := make([]uint64, n)
	for i := range out {
		out[i] = left[i]<<rbw | right[i]
	}
	return &vec{dt: dt, n: n, valid: lv.valid, data: fromRaw64(sd.PType, out)}, nil
}

func (d *decoder) decodeFSST(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindUtf8 && sd.Kind != KindBinary {
		return nil, corruptf("vortex.fsst for %s", dt)
	}
	if len(nd.bufs) != 3 {
		return nil, unsupportedf("vortex.fsst with %d buffers (legacy form)", len(nd.bufs))
	}
	if err := d.expectKids(nd, 2, 3); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	lp, op := PType(m.uint(1)), PType(m.uint(2))
	if !lp.valid() || !lp.isInt() || !op.valid() || !op.isInt() {
		return nil, corruptf("vortex.fsst ptypes %d/%d", lp, op)
	}
	symbols, symLens, codes := nd.bufs[0], nd.bufs[1], nd.bufs[2]
	ns := len(symLens)
	if ns > 255 || len(symbols) != 8*ns {
		return nil, corruptf("vortex.fsst symbol table of %d/%d bytes", len(symbols), ns)
	}
	for _, l := range symLens {
		if l < 1 || l > 8 {
			return nil, corruptf("vortex.fsst symbol length %d", l)
		}
	}
	lv, err := d.decode(nd.kids[0], primDType(lp, false), n)
	if err != nil {
		return nil, err
	}
	ov, err := d.decode(nd.kids[1], primDType(op, false), n+1)
	if err != nil {
		return nil, err
	}
	offs, err := ov.indices(int64(len(codes))+1, false)
	if err != nil {
		return nil, err
	}
	lens, err := lv.ints()
	if err != nil {
		return nil, err
	}
	total, err := sumLengths(lens, "vortex.fsst")
	if err != nil {
		return nil, err
	}
	// Each code byte expands to at most 8 bytes; bound the output by that too.
	if total > math.MaxInt32 || total > 8*uint64(len(codes)) {
		return nil, corruptf("vortex.fsst uncompressed size %d implausible", total)
	}
	v := &vec{dt: dt, n: n, offs: make([]int32, n+1)}
	if v.valid, _, err = d.validity(nd, dt, n, 2); err != nil {
		return nil, err
	}
	out := make([]byte, 0, total)
	for i := 0; i < n; i++ {
		if offs[i+1] < offs[i] {
			return nil, corruptf("vortex.fsst decreasing code offsets")
		}
		c := codes[offs[i]:offs[i+1]]
		start := len(out)
		for k := 0; k < len(c); k++ {
			b := c[k]
			if b == 255 {
				k++
				if k >= len(c) {
					return nil, corruptf("vortex.fsst escape at end of string")
				}
				out = append(out, c[k])
				continue
			}
			if int(b) >= ns {
				return nil, corruptf("vortex.fsst code %d of %d symbols", b, ns)
			}
			var sb [8]byte
			binary.LittleEndian.PutUint64(sb[:], binary.LittleEndian.Uint64(symbols[8*int(b):]))
			out = append(out, sb[:symLens[b]]...)
			if uint64(len(out)) > total {
				return nil, corruptf("vortex.fsst output exceeds declared lengths")
			}
		}
		if int64(len(out)-start) != lens[i] && v.isValid(i) {
			return nil, corruptf("vortex.fsst row %d decodes to %d bytes, want %d", i, len(out)-start, lens[i])
		}
		v.offs[i+1] = int32(len(out))
	}
	v.data = out
	return v, nil
}
