package vortexio

import "encoding/binary"

// A minimal, bounds-checked flatbuffer reader. The flatbuffers Go runtime does
// no bounds checking (it panics on bad offsets), and every flatbuffer here
// comes from an untrusted file, so reading goes through these helpers, which
// return errors instead. Writing uses the upstream flatbuffers.Builder.

type fbTable struct {
	buf   []byte
	pos   int // table start
	vt    int // vtable start
	vtLen int // vtable length in bytes
}

func fbU32(buf []byte, p int) (uint32, error) {
	if p < 0 || p+4 > len(buf) {
		return 0, corruptf("flatbuffer offset %d out of range (%d bytes)", p, len(buf))
	}
	return binary.LittleEndian.Uint32(buf[p:]), nil
}

// fbRoot returns the root table of a flatbuffer written without file
// identifier or size prefix.
func fbRoot(buf []byte) (fbTable, error) {
	off, err := fbU32(buf, 0)
	if err != nil {
		return fbTable{}, err
	}
	return fbTableAt(buf, int(off))
}

func fbTableAt(buf []byte, pos int) (fbTable, error) {
	if pos < 0 || pos+4 > len(buf) {
		return fbTable{}, corruptf("flatbuffer table at %d out of range", pos)
	}
	soff := int32(binary.LittleEndian.Uint32(buf[pos:]))
	vt := pos - int(soff)
	if vt < 0 || vt+4 > len(buf) {
		return fbTable{}, corruptf("flatbuffer vtable at %d out of range", vt)
	}
	vtLen := int(binary.LittleEndian.Uint16(buf[vt:]))
	if vtLen < 4 || vtLen%2 != 0 || vt+vtLen > len(buf) {
		return fbTable{}, corruptf("flatbuffer vtable length %d invalid", vtLen)
	}
	objLen := int(binary.LittleEndian.Uint16(buf[vt+2:]))
	if pos+objLen > len(buf) {
		return fbTable{}, corruptf("flatbuffer table length %d overruns buffer", objLen)
	}
	return fbTable{buf: buf, pos: pos, vt: vt, vtLen: vtLen}, nil
}

// field returns the absolute position of field slot i, or 0 if absent.
func (t fbTable) field(i int, size int) (int, error) {
	o := 4 + 2*i
	if o+2 > t.vtLen {
		return 0, nil
	}
	off := int(binary.LittleEndian.Uint16(t.buf[t.vt+o:]))
	if off == 0 {
		return 0, nil
	}
	p := t.pos + off
	if p+size > len(t.buf) {
		return 0, corruptf("flatbuffer field %d out of range", i)
	}
	return p, nil
}

func (t fbTable) has(i int) bool {
	p, err := t.field(i, 1)
	return err == nil && p != 0
}

func (t fbTable) u8(i int, def uint8) (uint8, error) {
	p, err := t.field(i, 1)
	if err != nil || p == 0 {
		return def, err
	}
	return t.buf[p], nil
}

func (t fbTable) u16(i int, def uint16) (uint16, error) {
	p, err := t.field(i, 2)
	if err != nil || p == 0 {
		return def, err
	}
	return binary.LittleEndian.Uint16(t.buf[p:]), nil
}

func (t fbTable) u32(i int, def uint32) (uint32, error) {
	p, err := t.field(i, 4)
	if err != nil || p == 0 {
		return def, err
	}
	return binary.LittleEndian.Uint32(t.buf[p:]), nil
}

func (t fbTable) u64(i int, def uint64) (uint64, error) {
	p, err := t.field(i, 8)
	if err != nil || p == 0 {
		return def, err
	}
	return binary.LittleEndian.Uint64(t.buf[p:]), nil
}

func (t fbTable) boolean(i int) (bool, error) {
	v, err := t.u8(i, 0)
	return v != 0, err
}

// ref follows the uoffset stored in field i; ok is false when the field is absent.
func (t fbTable) ref(i int) (pos int, ok bool, err error) {
	p, err := t.field(i, 4)
	if err != nil || p == 0 {
		return 0, false, err
	}
	off := binary.LittleEndian.Uint32(t.buf[p:])
	target := p + int(off)
	if off == 0 || target >= len(t.buf) {
		return 0, false, corruptf("flatbuffer reference in field %d out of range", i)
	}
	return target, true, nil
}

func (t fbTable) table(i int) (fbTable, bool, error) {
	p, ok, err := t.ref(i)
	if err != nil || !ok {
		return fbTable{}, false, err
	}
	sub, err := fbTableAt(t.buf, p)
	return sub, err == nil, err
}

// vector returns the element count and the position of the first element of
// the vector in field i, checking that count*elemSize bytes are present.
func (t fbTable) vector(i int, elemSize int) (n int, start int, err error) {
	p, ok, err := t.ref(i)
	if err != nil || !ok {
		return 0, 0, err
	}
	cnt, err := fbU32(t.buf, p)
	if err != nil {
		return 0, 0, err
	}
	start = p + 4
	if uint64(cnt)*uint64(elemSize) > uint64(len(t.buf)-start) {
		return 0, 0, corruptf("flatbuffer vector of %d elements overruns buffer", cnt)
	}
	return int(cnt), start, nil
}

func (t fbTable) bytes(i int) ([]byte, error) {
	n, s, err := t.vector(i, 1)
	if err != nil || n == 0 {
		return nil, err
	}
	return t.buf[s : s+n], nil
}

func (t fbTable) str(i int) (string, error) {
	b, err := t.bytes(i)
	return string(b), err
}

// tables returns the tables of a vector-of-tables field.
func (t fbTable) tables(i int) ([]fbTable, error) {
	n, s, err := t.vector(i, 4)
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]fbTable, n)
	for k := 0; k < n; k++ {
		e := s + 4*k
		off := binary.LittleEndian.Uint32(t.buf[e:])
		if off == 0 {
			return nil, corruptf("flatbuffer null table reference")
		}
		out[k], err = fbTableAt(t.buf, e+int(off))
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (t fbTable) strings(i int) ([]string, error) {
	n, s, err := t.vector(i, 4)
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]string, n)
	for k := 0; k < n; k++ {
		e := s + 4*k
		p := e + int(binary.LittleEndian.Uint32(t.buf[e:]))
		ln, err := fbU32(t.buf, p)
		if err != nil {
			return nil, err
		}
		if uint64(ln) > uint64(len(t.buf)-p-4) {
			return nil, corruptf("flatbuffer string overruns buffer")
		}
		out[k] = string(t.buf[p+4 : p+4+int(ln)])
	}
	return out, nil
}
