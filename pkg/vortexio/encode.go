package vortexio

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// enode is an array tree ready to serialize into a flat segment.
type enode struct {
	enc  string
	meta []byte
	bufs []ebuf
	kids []*enode
}

type ebuf struct {
	data  []byte
	align int
}

// size is the number of data bytes of the tree (what the chooser minimises;
// metadata is a few bytes and ignored).
func (e *enode) size() int {
	s := len(e.meta)
	for _, b := range e.bufs {
		s += len(b.data)
	}
	for _, k := range e.kids {
		s += k.size()
	}
	return s
}

// The chooser. For every chunk and column we build each applicable
// candidate encoding and keep the smallest, which is simple, predictable and
// good enough for the shapes a time-series lake has:
//
//	primitive          always (the fallback)
//	constant           one distinct value (or all null)
//	sequence           non-null integer arithmetic progressions (row ids)
//	FoR + bit-packing  integers, dates (via the extension's storage)
//	dict               ≤ 65535 distinct values: codes bit-packed, values plain
//	run-end            sorted / repetitive columns with few runs (n/runs ≥ 4)
//	ALP                decimal-like doubles, with exceptions as patches
//
// Nested children (FoR output, dict codes, run ends, ALP integers) go through
// the same chooser restricted to the integer candidates. Validity is a
// vortex.bool child where the encoding carries one.
func encodeVec(v *vec) *enode {
	return encodeDepth(v, 0)
}

const maxEncodeDepth = 3

func encodeDepth(v *vec, depth int) *enode {
	v = v.materialize()
	dt := v.dt
	sd := storage(dt)
	if dt.Kind == KindExtension {
		st := &vec{dt: dt.Storage, n: v.n, valid: v.valid, data: v.data, offs: v.offs, kids: v.kids}
		return &enode{enc: "vortex.ext", kids: []*enode{encodeDepth(st, depth)}}
	}
	if sd.Kind == KindNull {
		return &enode{enc: "vortex.null"}
	}
	if v.n > 0 && v.nullCount() == v.n {
		return constNode(encodeScalarNull())
	}
	var best *enode
	consider := func(e *enode) {
		if e != nil && (best == nil || e.size() < best.size()) {
			best = e
		}
	}
	switch sd.Kind {
	case KindBool:
		consider(encodeBool(v))
		if v.valid == nil && v.n > 0 {
			first := bitGet(v.data, 0)
			same := true
			for i := 1; i < v.n && same; i++ {
				same = bitGet(v.data, i) == first
			}
			if same {
				consider(constNode(encodeScalarBool(first)))
			}
		}
	case KindPrimitive:
		consider(encodePrimitive(v))
		if depth < maxEncodeDepth {
			consider(encodeConstant(v))
			if sd.PType.isInt() {
				consider(encodeSequence(v))
				consider(encodeFoR(v, depth))
			}
			if sd.PType == F64 || sd.PType == F32 {
				consider(encodeALP(v, depth))
			}
			consider(encodeRunEnd(v, depth))
			consider(encodeDict(v, depth))
		}
	case KindUtf8, KindBinary:
		consider(encodeVarBinView(v))
		if depth < maxEncodeDepth {
			consider(encodeConstant(v))
			consider(encodeDict(v, depth))
		}
	case KindStruct:
		e := &enode{enc: "vortex.struct"}
		if vn := validityNode(v); vn != nil {
			e.kids = append(e.kids, vn)
		}
		for _, k := range v.kids {
			e.kids = append(e.kids, encodeDepth(k, depth))
		}
		return e
	}
	return best
}

func constNode(scalar []byte) *enode {
	return &enode{enc: "vortex.constant", bufs: []ebuf{{scalar, 1}}}
}

// validityNode returns the vortex.bool validity child, or nil if all valid.
func validityNode(v *vec) *enode {
	if v.valid == nil || !v.dt.nullable() {
		return nil
	}
	if v.nullCount() == 0 {
		return nil
	}
	return &enode{enc: "vortex.bool", bufs: []ebuf{{v.valid[:bitmapLen(v.n)], 1}}}
}

func withValidity(e *enode, v *vec) *enode {
	if vn := validityNode(v); vn != nil {
		e.kids = append(e.kids, vn)
	}
	return e
}

func encodeBool(v *vec) *enode {
	return withValidity(&enode{enc: "vortex.bool", bufs: []ebuf{{v.data[:bitmapLen(v.n)], 1}}}, v)
}

func encodePrimitive(v *vec) *enode {
	w := storage(v.dt).PType.Width()
	return withValidity(&enode{enc: "vortex.primitive", bufs: []ebuf{{v.data[:v.n*w], w}}}, v)
}

func encodeConstant(v *vec) *enode {
	if v.n == 0 || v.valid != nil {
		return nil // constant-with-nulls would need vortex.masked (a newer edition)
	}
	sd := storage(v.dt)
	switch sd.Kind {
	case KindPrimitive:
		w := sd.PType.Width()
		first := v.data[:w]
		for i := 1; i < v.n; i++ {
			if string(v.data[i*w:(i+1)*w]) != string(first) {
				return nil
			}
		}
		return constNode(encodeScalarPrim(sd.PType, raw64(&vec{dt: v.dt, n: 1, data: first})[0]))
	case KindUtf8, KindBinary:
		first := v.data[v.offs[0]:v.offs[1]]
		for i := 1; i < v.n; i++ {
			if string(v.data[v.offs[i]:v.offs[i+1]]) != string(first) {
				return nil
			}
		}
		return constNode(encodeScalarBytes(sd.Kind == KindUtf8, first))
	}
	return nil
}

// signedValue sign-extends a raw bit pattern of ptype p.
func signedValue(p PType, x uint64) int64 {
	sh := 64 - uint(p.Width()*8)
	return int64(x<<sh) >> sh
}

func encodeSequence(v *vec) *enode {
	if v.valid != nil || v.n < 2 {
		return nil
	}
	p := storage(v.dt).PType
	xs := raw64(v)
	mask := maskBits(uint(p.Width() * 8))
	step := (xs[1] - xs[0]) & mask
	for i := 2; i < len(xs); i++ {
		if (xs[i]-xs[i-1])&mask != step {
			return nil
		}
	}
	// Require the progression not to wrap, so that base + i·step is exact.
	var base, mul []byte
	if p.isSigned() {
		b, s := signedValue(p, xs[0]), signedValue(p, step)
		last := signedValue(p, xs[len(xs)-1])
		if (s >= 0) != (last >= b) {
			return nil
		}
		base, mul = encodeScalarPrim(I64, uint64(b)), encodeScalarPrim(I64, uint64(s))
	} else {
		if xs[len(xs)-1] < xs[0] {
			return nil
		}
		base, mul = encodeScalarPrim(U64, xs[0]), encodeScalarPrim(U64, step)
	}
	var w pbWriter
	w.bytesAlways(1, base)
	w.bytesAlways(2, mul)
	return &enode{enc: "vortex.sequence", meta: w.b}
}

// encodeFoR subtracts the minimum and bit-packs the offsets. Nulls are
// encoded as offset 0; validity is carried by the bit-packed child.
func encodeFoR(v *vec, depth int) *enode {
	p := storage(v.dt).PType
	xs := raw64(v)
	B := p.Width() * 8
	first := true
	var lo, hi uint64 // in "ordered" space: signed values biased to unsigned order
	bias := uint64(0)
	if p.isSigned() {
		bias = 1 << 63
	}
	for i, x := range xs {
		if !v.isValid(i) {
			continue
		}
		o := uint64(signedValue(p, x)) ^ bias
		if !p.isSigned() {
			o = x
		}
		if first || o < lo {
			lo = o
		}
		if first || o > hi {
			hi = o
		}
		first = false
	}
	width := bits.Len64(hi - lo)
	if first || width >= B {
		return nil
	}
	ref := lo ^ bias // back to the raw (sign-extended) value
	mask := maskBits(uint(B))
	enc := make([]uint64, len(xs))
	for i, x := range xs {
		if v.isValid(i) {
			enc[i] = (x - ref) & mask
		}
	}
	packed := &enode{enc: "fastlanes.bitpacked", bufs: []ebuf{{bitPack(enc, B, width), B / 8}}}
	var m pbWriter
	m.uint(1, uint64(width))
	packed.meta = m.b
	withValidity(packed, v)
	if ref&mask == 0 {
		return packed
	}
	return &enode{enc: "fastlanes.for", meta: encodeScalarPrim(p, ref&mask), kids: []*enode{packed}}
}

// encodeIndices compresses a non-null unsigned index array (codes, run ends).
func encodeIndices(p PType, xs []uint64, depth int) *enode {
	return encodeDepth(&vec{dt: primDType(p, false), n: len(xs), data: fromRaw64(p, xs)}, depth+1)
}

func encodeRunEnd(v *vec, depth int) *enode {
	if v.n < 8 {
		return nil
	}
	w := storage(v.dt).PType.Width()
	same := func(i, j int) bool {
		vi, vj := v.isValid(i), v.isValid(j)
		if vi != vj {
			return false
		}
		return !vi || string(v.data[i*w:(i+1)*w]) == string(v.data[j*w:(j+1)*w])
	}
	var ends []uint64
	var starts []int64
	for i := 0; i < v.n; i++ {
		if i == 0 || !same(i, i-1) {
			if i > 0 {
				ends = append(ends, uint64(i))
			}
			starts = append(starts, int64(i))
			if len(starts)*4 > v.n {
				return nil
			}
		}
	}
	ends = append(ends, uint64(v.n))
	values, _ := take(v, starts, v.dt)
	ep := U32
	if v.n > math.MaxUint32 {
		ep = U64
	}
	var m pbWriter
	m.uint(1, uint64(ep))
	m.uint(2, uint64(len(ends)))
	return &enode{enc: "vortex.runend", meta: m.b, kids: []*enode{encodeIndices(ep, ends, depth), encodeDepth(values, depth+1)}}
}

const maxDictValues = 65535

func encodeDict(v *vec, depth int) *enode {
	if v.n < 16 {
		return nil
	}
	sd := storage(v.dt)
	key := func(i int) string {
		if sd.Kind == KindPrimitive {
			w := sd.PType.Width()
			return string(v.data[i*w : (i+1)*w])
		}
		return string(v.data[v.offs[i]:v.offs[i+1]])
	}
	index := map[string]uint64{}
	var firsts []int64
	codes := make([]uint64, v.n)
	for i := 0; i < v.n; i++ {
		if !v.isValid(i) {
			continue
		}
		k := key(i)
		c, ok := index[k]
		if !ok {
			if len(firsts) >= maxDictValues || len(firsts)*2 > v.n {
				return nil
			}
			c = uint64(len(firsts))
			index[k] = c
			firsts = append(firsts, int64(i))
		}
		codes[i] = c
	}
	if len(firsts) == 0 {
		return nil
	}
	values, err := take(v, firsts, v.dt.withNullable(v.dt.nullable()))
	if err != nil {
		return nil
	}
	values.valid = nil
	cp := U8
	if len(firsts) > 256 {
		cp = U16
	}
	cv := &vec{dt: primDType(cp, v.dt.nullable()), n: v.n, valid: v.valid, data: fromRaw64(cp, codes)}
	var m pbWriter
	m.uint(1, uint64(len(firsts)))
	m.uint(2, uint64(cp))
	m.uintAlways(3, b2u(v.dt.nullable()))
	return &enode{enc: "vortex.dict", meta: m.b, kids: []*enode{encodeDepth(cv, depth+1), encodeDepth(values, depth+1)}}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func encodeVarBinView(v *vec) *enode {
	views := alignedBytes(16 * v.n)
	var data []byte
	for i := 0; i < v.n; i++ {
		s := v.data[v.offs[i]:v.offs[i+1]]
		if !v.isValid(i) {
			s = nil
		}
		vw := views[16*i : 16*i+16]
		binary.LittleEndian.PutUint32(vw, uint32(len(s)))
		if len(s) <= 12 {
			copy(vw[4:], s)
			continue
		}
		copy(vw[4:8], s[:4])
		binary.LittleEndian.PutUint32(vw[8:], 0)
		binary.LittleEndian.PutUint32(vw[12:], uint32(len(data)))
		data = append(data, s...)
	}
	e := &enode{enc: "vortex.varbinview"}
	if len(data) > 0 {
		e.bufs = append(e.bufs, ebuf{data, 1})
	}
	e.bufs = append(e.bufs, ebuf{views, 16})
	return withValidity(e, v)
}
