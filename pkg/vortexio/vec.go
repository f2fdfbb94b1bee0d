package vortexio

import (
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// vec is the decoded ("canonical") form of an array, close to Arrow's layout
// so that conversion is zero-copy: primitive values as little-endian bytes,
// booleans and validity as LSB-first bitmaps, strings as 32-bit offsets plus
// bytes. Extension arrays are their storage with the extension dtype.
//
// This package assumes a little-endian host (as arrow-go does).
type vec struct {
	dt    *DType
	n     int
	valid []byte  // validity bitmap; nil means all valid
	data  []byte  // primitive values (n*width) or boolean bits
	offs  []int32 // strings: n+1 offsets into data
	kids  []*vec  // struct fields
	nulls bool    // KindNull or all-null shortcut
}

func bitGet(b []byte, i int) bool { return b[i>>3]>>(uint(i)&7)&1 != 0 }
func bitSet(b []byte, i int)      { b[i>>3] |= 1 << (uint(i) & 7) }

func bitmapLen(n int) int { return (n + 7) / 8 }

// alignedBytes returns n zeroed bytes whose start is 8-byte aligned, so that
// they can be viewed as any primitive slice.
func alignedBytes(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)[:n:n]
}

// view reinterprets aligned bytes as a slice of T.
func view[T any](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz)
}

// ensureAligned copies b when it is not aligned to w bytes.
func ensureAligned(b []byte, w int) []byte {
	if len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%uintptr(w) == 0 {
		return b
	}
	c := alignedBytes(len(b))
	copy(c, b)
	return c
}

func (v *vec) isValid(i int) bool {
	if v.nulls {
		return false
	}
	return v.valid == nil || bitGet(v.valid, i)
}

// nullCount counts null rows.
func (v *vec) nullCount() int {
	if v.nulls {
		return v.n
	}
	if v.valid == nil {
		return 0
	}
	c := 0
	for i := 0; i < v.n; i++ {
		if !bitGet(v.valid, i) {
			c++
		}
	}
	return c
}

// storageKind returns the physical family (extensions are their storage).
func storage(d *DType) *DType {
	for d.Kind == KindExtension {
		d = d.Storage
	}
	return d
}

func allNull(dt *DType, n int) *vec {
	return &vec{dt: dt, n: n, nulls: true}
}

// materialize turns the all-null shortcut into real buffers.
func (v *vec) materialize() *vec {
	if !v.nulls || storage(v.dt).Kind == KindNull {
		return v
	}
	out := &vec{dt: v.dt, n: v.n, valid: make([]byte, bitmapLen(v.n))}
	sd := storage(v.dt)
	switch sd.Kind {
	case KindBool:
		out.data = make([]byte, bitmapLen(v.n))
	case KindPrimitive:
		out.data = alignedBytes(v.n * sd.PType.Width())
	case KindUtf8, KindBinary:
		out.offs = make([]int32, v.n+1)
		out.data = []byte{}
	case KindStruct:
		for _, f := range sd.Fields {
			out.kids = append(out.kids, allNull(f, v.n).materialize())
		}
	}
	return out
}

// slice returns rows [a, b) (primitive values are shared, bitmaps and
// offsets copied).
func (v *vec) slice(a, b int) *vec {
	if a == 0 && b == v.n {
		return v
	}
	if v.nulls {
		return allNull(v.dt, b-a)
	}
	out := &vec{dt: v.dt, n: b - a}
	if v.valid != nil {
		out.valid = copyBits(v.valid, a, b-a)
	}
	sd := storage(v.dt)
	switch sd.Kind {
	case KindBool:
		out.data = copyBits(v.data, a, b-a)
	case KindPrimitive:
		// A view, not a copy: element alignment is kept (the base is 8-byte
		// aligned and a*w is a multiple of w), and no caller writes into a
		// vec's data in place.
		w := sd.PType.Width()
		out.data = v.data[a*w : b*w : b*w]
	case KindUtf8, KindBinary:
		base := v.offs[a]
		out.offs = make([]int32, b-a+1)
		for i := range out.offs {
			out.offs[i] = v.offs[a+i] - base
		}
		out.data = v.data[base:v.offs[b]]
	case KindStruct:
		for _, k := range v.kids {
			out.kids = append(out.kids, k.slice(a, b))
		}
	}
	return out
}

func copyBits(src []byte, off, n int) []byte {
	out := make([]byte, bitmapLen(n))
	if off%8 == 0 {
		copy(out, src[off/8:])
		if n%8 != 0 {
			out[len(out)-1] &= byte(1<<(uint(n)%8)) - 1
		}
		return out
	}
	for i := 0; i < n; i++ {
		if bitGet(src, off+i) {
			bitSet(out, i)
		}
	}
	return out
}

// concat joins vectors of one dtype.
func concat(dt *DType, parts []*vec) (*vec, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	n := 0
	anyNull := false
	allNulls := true
	for _, p := range parts {
		n += p.n
		if p.nulls || p.valid != nil {
			anyNull = true
		}
		if !p.nulls {
			allNulls = false
		}
	}
	if allNulls || storage(dt).Kind == KindNull {
		return allNull(dt, n), nil
	}
	out := &vec{dt: dt, n: n}
	if anyNull {
		out.valid = make([]byte, bitmapLen(n))
		pos := 0
		for _, p := range parts {
			for i := 0; i < p.n; i++ {
				if p.isValid(i) {
					bitSet(out.valid, pos+i)
				}
			}
			pos += p.n
		}
	}
	sd := storage(dt)
	switch sd.Kind {
	case KindBool:
		out.data = make([]byte, bitmapLen(n))
		pos := 0
		for _, p := range parts {
			if !p.nulls {
				for i := 0; i < p.n; i++ {
					if bitGet(p.data, i) {
						bitSet(out.data, pos+i)
					}
				}
			}
			pos += p.n
		}
	case KindPrimitive:
		w := sd.PType.Width()
		out.data = alignedBytes(n * w)
		pos := 0
		for _, p := range parts {
			if !p.nulls {
				copy(out.data[pos*w:], p.data[:p.n*w])
			}
			pos += p.n
		}
	case KindUtf8, KindBinary:
		total := 0
		for _, p := range parts {
			if !p.nulls {
				total += len(p.data)
			}
		}
		if total > math.MaxInt32 {
			return nil, unsupportedf("string range larger than 2 GiB")
		}
		out.data = make([]byte, 0, total)
		out.offs = make([]int32, 1, n+1)
		for _, p := range parts {
			if p.nulls {
				for i := 0; i < p.n; i++ {
					out.offs = append(out.offs, int32(len(out.data)))
				}
				continue
			}
			base := int32(len(out.data)) - p.offs[0]
			out.data = append(out.data, p.data[p.offs[0]:p.offs[p.n]]...)
			for _, o := range p.offs[1:] {
				out.offs = append(out.offs, o+base)
			}
		}
	case KindStruct:
		for fi, f := range sd.Fields {
			kp := make([]*vec, len(parts))
			for i, p := range parts {
				if p.nulls {
					kp[i] = allNull(f, p.n)
				} else {
					kp[i] = p.kids[fi]
				}
			}
			k, err := concat(f, kp)
			if err != nil {
				return nil, err
			}
			out.kids = append(out.kids, k)
		}
	}
	return out, nil
}

// take gathers rows idx from v; idx < 0 yields null. Callers check idx < v.n.
func take(v *vec, idx []int64, dt *DType) (*vec, error) {
	n := len(idx)
	if v.nulls || storage(dt).Kind == KindNull {
		return allNull(dt, n), nil
	}
	out := &vec{dt: dt, n: n}
	hasNull := v.valid != nil
	for _, i := range idx {
		if i < 0 {
			hasNull = true
			break
		}
	}
	if hasNull {
		out.valid = make([]byte, bitmapLen(n))
		for k, i := range idx {
			if i >= 0 && v.isValid(int(i)) {
				bitSet(out.valid, k)
			}
		}
	}
	sd := storage(dt)
	switch sd.Kind {
	case KindBool:
		out.data = make([]byte, bitmapLen(n))
		for k, i := range idx {
			if i >= 0 && bitGet(v.data, int(i)) {
				bitSet(out.data, k)
			}
		}
	case KindPrimitive:
		w := sd.PType.Width()
		out.data = alignedBytes(n * w)
		switch w {
		case 1:
			for k, i := range idx {
				if i >= 0 {
					out.data[k] = v.data[i]
				}
			}
		case 2:
			takeT(view[uint16](out.data), view[uint16](v.data), idx)
		case 4:
			takeT(view[uint32](out.data), view[uint32](v.data), idx)
		case 8:
			takeT(view[uint64](out.data), view[uint64](v.data), idx)
		}
	case KindUtf8, KindBinary:
		total := int64(0)
		for _, i := range idx {
			if i >= 0 {
				total += int64(v.offs[i+1] - v.offs[i])
			}
		}
		if total > math.MaxInt32 {
			return nil, unsupportedf("string range larger than 2 GiB")
		}
		out.data = make([]byte, 0, total)
		out.offs = make([]int32, 1, n+1)
		for _, i := range idx {
			if i >= 0 {
				out.data = append(out.data, v.data[v.offs[i]:v.offs[i+1]]...)
			}
			out.offs = append(out.offs, int32(len(out.data)))
		}
	case KindStruct:
		for fi, f := range sd.Fields {
			k, err := take(v.kids[fi], idx, f)
			if err != nil {
				return nil, err
			}
			out.kids = append(out.kids, k)
		}
	}
	return out, nil
}

func takeT[T any](dst, src []T, idx []int64) {
	for k, i := range idx {
		if i >= 0 {
			dst[k] = src[i]
		}
	}
}

// ints returns the values of an integer vector as int64 (unsigned values are
// reinterpreted; callers validate ranges). Nulls read as whatever is stored.
func (v *vec) ints() ([]int64, error) {
	sd := storage(v.dt)
	if sd.Kind != KindPrimitive || !sd.PType.isInt() {
		return nil, corruptf("expected an integer array, got %s", v.dt)
	}
	out := make([]int64, v.n)
	if v.nulls {
		return out, nil
	}
	switch sd.PType {
	case U8:
		for i := range out {
			out[i] = int64(v.data[i])
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(v.data[i]))
		}
	case U16:
		for i, x := range view[uint16](v.data)[:v.n] {
			out[i] = int64(x)
		}
	case I16:
		for i, x := range view[int16](v.data)[:v.n] {
			out[i] = int64(x)
		}
	case U32:
		for i, x := range view[uint32](v.data)[:v.n] {
			out[i] = int64(x)
		}
	case I32:
		for i, x := range view[int32](v.data)[:v.n] {
			out[i] = int64(x)
		}
	case U64, I64:
		copy(out, view[int64](v.data)[:v.n])
	}
	return out, nil
}

// indices returns non-negative integer values < limit, as used for offsets,
// codes and run ends; anything else is corruption. Null rows yield -1 when
// nullOK, else corruption.
func (v *vec) indices(limit int64, nullOK bool) ([]int64, error) {
	xs, err := v.ints()
	if err != nil {
		return nil, err
	}
	unsigned := storage(v.dt).PType.isUnsigned()
	for i, x := range xs {
		if !v.isValid(i) {
			if !nullOK {
				return nil, corruptf("unexpected null index")
			}
			xs[i] = -1
			continue
		}
		if (x < 0 && !unsigned) || x < 0 || x >= limit {
			return nil, corruptf("index %d out of range [0, %d)", uint64(x), limit)
		}
	}
	return xs, nil
}

// toArrow converts to an Arrow array (zero-copy where the layouts agree).
func (v *vec) toArrow() (arrow.Array, error) {
	at, err := v.dt.ArrowType()
	if err != nil {
		return nil, err
	}
	if at.ID() == arrow.NULL {
		return array.NewNull(v.n), nil
	}
	m := v.materialize()
	var validBuf *memory.Buffer
	nulls := 0
	if m.valid != nil {
		validBuf = memory.NewBufferBytes(m.valid)
		nulls = array.UnknownNullCount
	}
	sd := storage(v.dt)
	var data arrow.ArrayData
	switch sd.Kind {
	case KindBool, KindPrimitive:
		data = array.NewData(at, m.n, []*memory.Buffer{validBuf, memory.NewBufferBytes(m.data)}, nil, nulls, 0)
	case KindUtf8, KindBinary:
		offb := unsafe.Slice((*byte)(unsafe.Pointer(&m.offs[0])), len(m.offs)*4)
		data = array.NewData(at, m.n, []*memory.Buffer{validBuf, memory.NewBufferBytes(offb), memory.NewBufferBytes(m.data)}, nil, nulls, 0)
	case KindStruct:
		kids := make([]arrow.ArrayData, len(m.kids))
		for i, k := range m.kids {
			a, err := k.toArrow()
			if err != nil {
				return nil, err
			}
			kids[i] = a.Data()
			defer a.Release()
		}
		data = array.NewData(at, m.n, []*memory.Buffer{validBuf}, kids, nulls, 0)
	default:
		return nil, unsupportedf("dtype %s", v.dt)
	}
	defer data.Release()
	return array.MakeFromData(data), nil
}
