package vortexio

import (
	"encoding/binary"
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

// The chooser. For every chunk and column we build the applicable candidate
// encodings and keep the smallest, which is simple, predictable and good
// enough for the shapes a time-series lake has:
//
//	primitive          always (the fallback)
//	constant           one distinct value (or all null)
//	sequence           non-null integer arithmetic progressions (row ids)
//	FoR + bit-packing  integers, dates (via the extension's storage); values
//	                   that need more bits than the chosen width are patches
//	delta              integers sorted in runs (dates within a series) and
//	                   slowly moving values (ALP integers of a random walk)
//	dict               few distinct values: codes ordered by frequency
//	run-end            sorted / repetitive columns with few runs (n/runs ≥ 4)
//	ALP                decimal-like doubles, with exceptions as patches
//
// Primitive columns go through encodePrim (primenc.go), which estimates
// instead of building where it can. Validity is a vortex.bool child where
// the encoding carries one.
func encodeVec(v *vec, fl encFlags) *enode {
	return encodeDepth(v, 0, fl)
}

func encodeDepth(v *vec, depth int, fl encFlags) *enode {
	v = v.materialize()
	dt := v.dt
	sd := storage(dt)
	if dt.Kind == KindExtension {
		st := &vec{dt: dt.Storage, n: v.n, valid: v.valid, data: v.data, offs: v.offs, kids: v.kids}
		return &enode{enc: "vortex.ext", kids: []*enode{encodeDepth(st, depth, fl)}}
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
		return encodePrim(newPCol(dt, raw64(v), v.valid), depth, fl)
	case KindUtf8, KindBinary:
		consider(encodeVarBinView(v))
		if depth < maxEncodeDepth {
			consider(encodeConstant(v))
			consider(encodeStringDict(v, depth, fl))
		}
	case KindStruct:
		e := &enode{enc: "vortex.struct"}
		if vn := validityNode(v); vn != nil {
			e.kids = append(e.kids, vn)
		}
		for _, k := range v.kids {
			e.kids = append(e.kids, encodeDepth(k, depth, fl))
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

func encodeConstant(v *vec) *enode {
	if v.n == 0 || v.valid != nil {
		return nil // constant-with-nulls would need vortex.masked
	}
	first := v.data[v.offs[0]:v.offs[1]]
	for i := 1; i < v.n; i++ {
		if string(v.data[v.offs[i]:v.offs[i+1]]) != string(first) {
			return nil
		}
	}
	return constNode(encodeScalarBytes(storage(v.dt).Kind == KindUtf8, first))
}

// signedValue sign-extends a raw bit pattern of ptype p.
func signedValue(p PType, x uint64) int64 {
	sh := 64 - uint(p.Width()*8)
	return int64(x<<sh) >> sh
}

// encodeStringDict dictionary-encodes strings (first-appearance order, so
// sorted strings give ascending codes that run-end encode well).
func encodeStringDict(v *vec, depth int, fl encFlags) *enode {
	if v.n < 16 {
		return nil
	}
	index := map[string]uint64{}
	var firsts []int64
	codes := make([]uint64, v.n)
	for i := 0; i < v.n; i++ {
		if !v.isValid(i) {
			continue
		}
		k := string(v.data[v.offs[i]:v.offs[i+1]])
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
	values, err := take(v, firsts, v.dt)
	if err != nil {
		return nil
	}
	values.valid = nil
	cp := U8
	if len(firsts) > 256 {
		cp = U16
	}
	var m pbWriter
	m.uint(1, uint64(len(firsts)))
	m.uint(2, uint64(cp))
	m.uintAlways(3, b2u(v.dt.nullable()))
	return &enode{enc: "vortex.dict", meta: m.b, kids: []*enode{
		encodePrim(newPCol(primDType(cp, v.dt.nullable()), codes, v.valid), depth+1, fl|noDict|noDelta),
		encodeDepth(values, depth+1, fl),
	}}
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
