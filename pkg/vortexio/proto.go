package vortexio

import (
	"encoding/binary"
	"math"
)

// Minimal protobuf (proto3) wire codec. Vortex stores encoding metadata and
// scalars as small prost messages; a hand-rolled reader keeps the dependency
// list short and lets every length be checked against the input.

const (
	wireVarint = 0
	wireI64    = 1
	wireLen    = 2
	wireI32    = 5
)

type pbField struct {
	num  int
	wire int
	u    uint64 // varint / fixed values
	b    []byte // length-delimited payload
}

func pbUvarint(b []byte) (uint64, int, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, corruptf("bad protobuf varint")
	}
	return v, n, nil
}

// pbParse splits a message into fields; repeated fields appear several times.
func pbParse(b []byte) ([]pbField, error) {
	var out []pbField
	for len(b) > 0 {
		key, n, err := pbUvarint(b)
		if err != nil {
			return nil, err
		}
		b = b[n:]
		f := pbField{num: int(key >> 3), wire: int(key & 7)}
		if f.num == 0 {
			return nil, corruptf("protobuf field number 0")
		}
		switch f.wire {
		case wireVarint:
			f.u, n, err = pbUvarint(b)
			if err != nil {
				return nil, err
			}
			b = b[n:]
		case wireI64:
			if len(b) < 8 {
				return nil, corruptf("truncated protobuf fixed64")
			}
			f.u = binary.LittleEndian.Uint64(b)
			b = b[8:]
		case wireI32:
			if len(b) < 4 {
				return nil, corruptf("truncated protobuf fixed32")
			}
			f.u = uint64(binary.LittleEndian.Uint32(b))
			b = b[4:]
		case wireLen:
			l, n, err := pbUvarint(b)
			if err != nil {
				return nil, err
			}
			b = b[n:]
			if l > uint64(len(b)) {
				return nil, corruptf("truncated protobuf bytes field")
			}
			f.b = b[:l]
			b = b[l:]
		default:
			return nil, corruptf("unsupported protobuf wire type %d", f.wire)
		}
		out = append(out, f)
	}
	return out, nil
}

// pbMsg is a parsed message with accessors returning the last value of a field.
type pbMsg []pbField

func pbDecode(b []byte) (pbMsg, error) {
	f, err := pbParse(b)
	return pbMsg(f), err
}

func (m pbMsg) get(num int) (pbField, bool) {
	var f pbField
	ok := false
	for _, x := range m {
		if x.num == num {
			f, ok = x, true
		}
	}
	return f, ok
}

func (m pbMsg) uint(num int) uint64 {
	f, _ := m.get(num)
	return f.u
}

func (m pbMsg) has(num int) bool {
	_, ok := m.get(num)
	return ok
}

func (m pbMsg) msg(num int) ([]byte, bool) {
	f, ok := m.get(num)
	if !ok || f.wire != wireLen {
		return nil, false
	}
	return f.b, true
}

// repeatedUint returns a repeated varint field, packed or not.
func (m pbMsg) repeatedUint(num int) ([]uint64, error) {
	var out []uint64
	for _, f := range m {
		if f.num != num {
			continue
		}
		if f.wire == wireVarint {
			out = append(out, f.u)
			continue
		}
		b := f.b
		for len(b) > 0 {
			v, n, err := pbUvarint(b)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			b = b[n:]
		}
	}
	return out, nil
}

// pbWriter builds a message; zero values are skipped like proto3 does, except
// where the caller uses the *Always variants (optional fields).
type pbWriter struct{ b []byte }

func (w *pbWriter) key(num, wire int) { w.b = binary.AppendUvarint(w.b, uint64(num)<<3|uint64(wire)) }

func (w *pbWriter) uintAlways(num int, v uint64) {
	w.key(num, wireVarint)
	w.b = binary.AppendUvarint(w.b, v)
}

func (w *pbWriter) uint(num int, v uint64) {
	if v != 0 {
		w.uintAlways(num, v)
	}
}

func (w *pbWriter) bytesAlways(num int, v []byte) {
	w.key(num, wireLen)
	w.b = binary.AppendUvarint(w.b, uint64(len(v)))
	w.b = append(w.b, v...)
}

func (w *pbWriter) f64(num int, v float64) {
	w.key(num, wireI64)
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v))
}

func (w *pbWriter) f32(num int, v float32) {
	w.key(num, wireI32)
	w.b = binary.LittleEndian.AppendUint32(w.b, math.Float32bits(v))
}
