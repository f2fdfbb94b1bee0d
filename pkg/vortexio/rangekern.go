package vortexio

import (
	"math"
	"unsafe"
)

// Typed kernels of the range decoders. The whole-chunk decoders work on
// uint64 bit patterns (raw64/fromRaw64), which costs two conversions and
// two allocations per array; on the one-series read, where each array is a
// block or two, those made most of the time (allocation and clearing). These
// work on the values' own width, in one output buffer.

// bitUnpackBytes decodes rows [offset, offset+n) of a FastLanes bit-packed
// buffer into the values' own width (B/8 bytes each), as aligned bytes,
// unpacking only the blocks that hold them.
func (d *decoder) bitUnpackBytes(packed []byte, B, width, offset, n int) ([]byte, error) {
	packed, first, blocks, _, err := packedBlocks(packed, width, offset, n)
	if err != nil || n == 0 {
		return []byte{}, err
	}
	w := B / 8
	out := d.buf((blocks - first) * 1024 * w)
	if width > 0 {
		switch B {
		case 8:
			unpackBlocks[uint8](packed, width, first, blocks, out)
		case 16:
			unpackBlocks[uint16](packed, width, first, blocks, out)
		case 32:
			unpackBlocks[uint32](packed, width, first, blocks, out)
		default:
			unpackBlocks[uint64](packed, width, first, blocks, out)
		}
	}
	s := offset - first*1024
	return out[s*w : (s+n)*w : (s+n)*w], nil
}

func unpackBlocks[T flWord](packed []byte, width, first, blocks int, out []byte) {
	o := words[T](out)
	bs := 128 * width
	for b := first; b < blocks; b++ {
		unpackBlockTo(words[T](packed[b*bs:b*bs+bs]), width, o[(b-first)*1024:])
	}
}

// unpackBlockTo is unpackBlockT with output in the word type.
func unpackBlockTo[T flWord](packed []T, width int, out []T) {
	B := int(unsafe.Sizeof(T(0))) * 8
	lanes := 1024 / B
	mask := T(maskBits(uint(width)))
	out = out[:1024]
	for l := 0; l < lanes; l++ {
		p := 0
		for r := 0; r < B; r++ {
			wi, bo := p/B, p%B
			v := packed[lanes*wi+l] >> uint(bo)
			if bo+width > B {
				v |= packed[lanes*(wi+1)+l] << uint(B-bo)
			}
			out[flRowIndex[r]+l] = v & mask
			p += width
		}
	}
}

// applyBytes overwrites values (of ptype p, in their own width) with the
// patch values.
func (pt *patches) applyBytes(data []byte, p PType) {
	if len(pt.indices) == 0 {
		return
	}
	pv := pt.values.materialize().data
	switch p.Width() {
	case 1:
		patchT(data, pv, pt.indices)
	case 2:
		patchT(view[uint16](data), view[uint16](pv), pt.indices)
	case 4:
		patchT(view[uint32](data), view[uint32](pv), pt.indices)
	default:
		patchT(view[uint64](data), view[uint64](pv), pt.indices)
	}
}

func patchT[T any](dst, src []T, idx []int64) {
	for k, i := range idx {
		dst[i] = src[k]
	}
}

// addRef returns data + ref (wrapping, in the width of p) in a new buffer.
func (d *decoder) addRef(data []byte, p PType, n int, ref uint64) []byte {
	out := d.buf(n * p.Width())
	switch p.Width() {
	case 1:
		addT(out, data[:n], uint8(ref))
	case 2:
		addT(view[uint16](out), view[uint16](data)[:n], uint16(ref))
	case 4:
		addT(view[uint32](out), view[uint32](data)[:n], uint32(ref))
	default:
		addT(view[uint64](out), view[uint64](data)[:n], ref)
	}
	return out
}

func addT[T flWord](dst, src []T, ref T) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = x + ref
	}
}

// deltaBlocks undoes the delta of whole blocks in the values' own width:
// bases holds blocks × lanes values, deltas blocks × 1024; the result is
// blocks × 1024 values.
func (d *decoder) deltaBlocks(bases, deltas []byte, B, blocks int) ([]byte, error) {
	dl := deltaLayouts[B]
	if dl == nil {
		return nil, corruptf("fastlanes.delta for %d-bit values", B)
	}
	w := B / 8
	if len(deltas) < blocks*1024*w || len(bases) < blocks*dl.lanes*w {
		return nil, corruptf("fastlanes.delta: %d delta bytes and %d base bytes for %d blocks", len(deltas), len(bases), blocks)
	}
	out := d.buf(blocks * 1024 * w)
	switch B {
	case 8:
		deltaT(bases, deltas, out, dl, blocks)
	case 16:
		deltaT(view[uint16](bases), view[uint16](deltas), view[uint16](out), dl, blocks)
	case 32:
		deltaT(view[uint32](bases), view[uint32](deltas), view[uint32](out), dl, blocks)
	default:
		deltaT(view[uint64](bases), view[uint64](deltas), view[uint64](out), dl, blocks)
	}
	return out, nil
}

func deltaT[T flWord](bases, deltas, out []T, dl *deltaLayout, blocks int) {
	B := 1024 / dl.lanes
	for b := 0; b < blocks; b++ {
		in := deltas[b*1024 : b*1024+1024]
		o := out[b*1024 : b*1024+1024]
		for l := 0; l < dl.lanes; l++ {
			acc := bases[b*dl.lanes+l]
			row := l * B
			for r := 0; r < B; r++ {
				acc += in[dl.tidx[row+r]]
				o[dl.orig[row+r]] = acc
			}
		}
	}
}

// alpDecode turns ALP-encoded integers (ptype enc, I32 or I64) into floats
// of ptype p (F32 or F64), as bytes.
func (d *decoder) alpDecode(enc []byte, encP, p PType, n int, e, f uint64) []byte {
	out := d.buf(n * p.Width())
	if p == F64 {
		o := view[float64](out)
		mul, div := f10f64[f], if10f64[e]
		if encP == I64 {
			for i, x := range view[int64](enc)[:n] {
				o[i] = float64(x) * mul * div
			}
		} else {
			for i, x := range view[int32](enc)[:n] {
				o[i] = float64(x) * mul * div
			}
		}
		return out
	}
	o := view[uint32](out)
	mul, div := f10f32[f], if10f32[e]
	for i, x := range view[int32](enc)[:n] {
		o[i] = math.Float32bits(float32(x) * mul * div)
	}
	return out
}

// gatherPrim is the dict fast path: non-null unsigned codes into
// non-null primitive values, without the index slice take needs. ok is
// false when the arrays are not of that kind.
func (d *decoder) gatherPrim(values, codes *vec, dt *DType) (*vec, bool, error) {
	vs, cs := storage(values.dt), storage(codes.dt)
	if values.nulls || codes.nulls || values.valid != nil || codes.valid != nil || vs.Kind != KindPrimitive || cs.Kind != KindPrimitive || !cs.PType.isUnsigned() {
		return nil, false, nil
	}
	n := codes.n
	out := d.buf(n * vs.PType.Width())
	var bad int64 = -1
	switch cs.PType.Width() {
	case 1:
		bad = gatherW(values, codes.data[:n], out)
	case 2:
		bad = gatherW(values, view[uint16](codes.data)[:n], out)
	case 4:
		bad = gatherW(values, view[uint32](codes.data)[:n], out)
	default:
		bad = gatherW(values, view[uint64](codes.data)[:n], out)
	}
	if bad >= 0 {
		return nil, true, corruptf("index %d out of range [0, %d)", bad, values.n)
	}
	return &vec{dt: dt, n: n, data: out}, true, nil
}

func gatherW[C flWord](values *vec, codes []C, out []byte) int64 {
	switch storage(values.dt).PType.Width() {
	case 1:
		return gatherT(out, values.data[:values.n], codes)
	case 2:
		return gatherT(view[uint16](out), view[uint16](values.data)[:values.n], codes)
	case 4:
		return gatherT(view[uint32](out), view[uint32](values.data)[:values.n], codes)
	default:
		return gatherT(view[uint64](out), view[uint64](values.data)[:values.n], codes)
	}
}

// gatherT returns the first code out of range, or -1.
func gatherT[V any, C flWord](dst, src []V, codes []C) int64 {
	for i, c := range codes {
		if uint64(c) >= uint64(len(src)) {
			return int64(c)
		}
		dst[i] = src[c]
	}
	return -1
}
