package vortexio

import (
	"math"
	"unicode/utf8"
)

// scalar is a decoded protobuf ScalarValue.
type scalar struct {
	null  bool
	kind  int // ScalarValue oneof field number
	u     uint64
	bytes []byte
}

const (
	svNull   = 1
	svBool   = 2
	svInt64  = 3
	svUint64 = 4
	svF32    = 5
	svF64    = 6
	svString = 7
	svBytes  = 8
	svList   = 9
	svF16    = 10
)

func parseScalar(b []byte) (scalar, error) {
	m, err := pbDecode(b)
	if err != nil {
		return scalar{}, err
	}
	if len(m) == 0 {
		return scalar{}, corruptf("empty scalar value")
	}
	f := m[len(m)-1]
	s := scalar{kind: f.num, u: f.u, bytes: f.b}
	switch f.num {
	case svNull:
		s.null = true
	case svInt64:
		s.u = uint64(int64(f.u>>1) ^ -int64(f.u&1)) // sint64 zig-zag
	case svBool, svUint64, svF32, svF64, svString, svBytes, svF16:
	case svList:
		return scalar{}, unsupportedf("list scalar")
	default:
		return scalar{}, corruptf("scalar field %d", f.num)
	}
	return s, nil
}

// intBits returns the scalar as the raw bit pattern of ptype p, checking range.
func (s scalar) intBits(p PType) (uint64, error) {
	if s.kind != svInt64 && s.kind != svUint64 {
		return 0, corruptf("scalar kind %d is not an integer", s.kind)
	}
	x := s.u
	w := uint(p.Width() * 8)
	if p.isSigned() {
		v := int64(x)
		if s.kind == svUint64 && x > math.MaxInt64 {
			return 0, corruptf("scalar %d out of range for %s", x, p)
		}
		if w < 64 && (v < -(1<<(w-1)) || v >= 1<<(w-1)) {
			return 0, corruptf("scalar %d out of range for %s", v, p)
		}
		return x & maskBits(w), nil
	}
	if s.kind == svInt64 && int64(x) < 0 {
		return 0, corruptf("negative scalar for %s", p)
	}
	if w < 64 && x >= 1<<w {
		return 0, corruptf("scalar %d out of range for %s", x, p)
	}
	return x, nil
}

func maskBits(w uint) uint64 {
	if w >= 64 {
		return ^uint64(0)
	}
	return 1<<w - 1
}

// primBits returns the raw bit pattern of a primitive scalar for ptype p.
func (s scalar) primBits(p PType) (uint64, error) {
	switch p {
	case F64:
		if s.kind != svF64 {
			return 0, corruptf("scalar kind %d for f64", s.kind)
		}
		return s.u, nil
	case F32:
		if s.kind != svF32 {
			return 0, corruptf("scalar kind %d for f32", s.kind)
		}
		return s.u & math.MaxUint32, nil
	case F16:
		if s.kind != svF16 {
			return 0, corruptf("scalar kind %d for f16", s.kind)
		}
		return s.u & math.MaxUint16, nil
	}
	return s.intBits(p)
}

// scalarRepeat builds n copies of s as dtype dt.
func scalarRepeat(s scalar, dt *DType, n int) (*vec, error) {
	if s.null {
		if !dt.nullable() {
			return nil, corruptf("null scalar for non-nullable %s", dt)
		}
		return allNull(dt, n), nil
	}
	sd := storage(dt)
	v := &vec{dt: dt, n: n}
	switch sd.Kind {
	case KindBool:
		if s.kind != svBool {
			return nil, corruptf("scalar kind %d for bool", s.kind)
		}
		v.data = make([]byte, bitmapLen(n))
		if s.u != 0 {
			for i := range v.data {
				v.data[i] = 0xff
			}
			if n%8 != 0 {
				v.data[len(v.data)-1] = byte(1<<(uint(n)%8)) - 1
			}
		}
	case KindPrimitive:
		bits, err := s.primBits(sd.PType)
		if err != nil {
			return nil, err
		}
		v.data = fillRaw(sd.PType, bits, n)
	case KindUtf8, KindBinary:
		if s.kind != svString && s.kind != svBytes {
			return nil, corruptf("scalar kind %d for %s", s.kind, dt)
		}
		if sd.Kind == KindUtf8 && !utf8.Valid(s.bytes) {
			return nil, corruptf("invalid UTF-8 scalar")
		}
		if uint64(len(s.bytes))*uint64(n) > math.MaxInt32 {
			return nil, unsupportedf("constant string chunk larger than 2 GiB")
		}
		v.offs = make([]int32, n+1)
		v.data = make([]byte, 0, len(s.bytes)*n)
		for i := 0; i < n; i++ {
			v.data = append(v.data, s.bytes...)
			v.offs[i+1] = int32(len(v.data))
		}
	default:
		return nil, unsupportedf("constant of %s", dt)
	}
	return v, nil
}

func fillRaw(p PType, bits uint64, n int) []byte {
	w := p.Width()
	out := alignedBytes(n * w)
	switch w {
	case 1:
		for i := range out {
			out[i] = byte(bits)
		}
	case 2:
		s := view[uint16](out)
		for i := range s {
			s[i] = uint16(bits)
		}
	case 4:
		s := view[uint32](out)
		for i := range s {
			s[i] = uint32(bits)
		}
	case 8:
		s := view[uint64](out)
		for i := range s {
			s[i] = bits
		}
	}
	return out
}

// raw64 returns primitive values zero-extended to uint64 bit patterns.
func raw64(v *vec) []uint64 {
	sd := storage(v.dt)
	out := make([]uint64, v.n)
	if v.nulls {
		return out
	}
	switch sd.PType.Width() {
	case 1:
		for i := range out {
			out[i] = uint64(v.data[i])
		}
	case 2:
		for i, x := range view[uint16](v.data)[:v.n] {
			out[i] = uint64(x)
		}
	case 4:
		for i, x := range view[uint32](v.data)[:v.n] {
			out[i] = uint64(x)
		}
	case 8:
		copy(out, view[uint64](v.data)[:v.n])
	}
	return out
}

// fromRaw64 packs uint64 bit patterns into the byte layout of ptype p.
func fromRaw64(p PType, xs []uint64) []byte {
	w := p.Width()
	out := alignedBytes(len(xs) * w)
	switch w {
	case 1:
		for i, x := range xs {
			out[i] = byte(x)
		}
	case 2:
		s := view[uint16](out)
		for i, x := range xs {
			s[i] = uint16(x)
		}
	case 4:
		s := view[uint32](out)
		for i, x := range xs {
			s[i] = uint32(x)
		}
	case 8:
		copy(view[uint64](out), xs)
	}
	return out
}

// encodeScalar writes a ScalarValue for a primitive bit pattern of ptype p.
func encodeScalarPrim(p PType, bits uint64) []byte {
	var w pbWriter
	switch {
	case p == F64:
		w.f64(svF64, math.Float64frombits(bits))
	case p == F32:
		w.f32(svF32, math.Float32frombits(uint32(bits)))
	case p == F16:
		w.uintAlways(svF16, bits)
	case p.isSigned():
		sh := 64 - uint(p.Width()*8)
		v := int64(bits<<sh) >> sh
		w.uintAlways(svInt64, uint64(v<<1)^uint64(v>>63))
	default:
		w.uintAlways(svUint64, bits)
	}
	return w.b
}

func encodeScalarNull() []byte { return []byte{0x08, 0x00} }

func encodeScalarBool(b bool) []byte {
	var w pbWriter
	x := uint64(0)
	if b {
		x = 1
	}
	w.uintAlways(svBool, x)
	return w.b
}

func encodeScalarBytes(utf bool, b []byte) []byte {
	var w pbWriter
	if utf {
		w.bytesAlways(svString, b)
	} else {
		w.bytesAlways(svBytes, b)
	}
	return w.b
}
