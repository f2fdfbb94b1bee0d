package vortexio

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// fromArrow copies an Arrow array into a vec of dtype dt (the writer's input path).
func fromArrow(a arrow.Array, dt *DType) (*vec, error) {
	n := a.Len()
	v := &vec{dt: dt, n: n}
	if a.NullN() > 0 && a.DataType().ID() != arrow.NULL {
		if bm := a.NullBitmapBytes(); len(bm)*8 >= a.Data().Offset()+n {
			v.valid = copyBits(bm, a.Data().Offset(), n)
		} else {
			v.valid = make([]byte, bitmapLen(n))
			for i := 0; i < n; i++ {
				if a.IsValid(i) {
					bitSet(v.valid, i)
				}
			}
		}
	}
	sd := storage(dt)
	switch sd.Kind {
	case KindNull:
		return allNull(dt, n), nil
	case KindBool:
		b := a.(*array.Boolean)
		v.data = make([]byte, bitmapLen(n))
		for i := 0; i < n; i++ {
			if b.Value(i) {
				bitSet(v.data, i)
			}
		}
	case KindPrimitive:
		w := sd.PType.Width()
		bufs := a.Data().Buffers()
		if len(bufs) < 2 || bufs[1] == nil {
			v.data = alignedBytes(n * w)
			break
		}
		off := a.Data().Offset()
		src := bufs[1].Bytes()
		if len(src) < (off+n)*w {
			return nil, fmt.Errorf("vortexio: arrow buffer too short")
		}
		v.data = alignedBytes(n * w)
		copy(v.data, src[off*w:(off+n)*w])
	case KindUtf8, KindBinary:
		var get func(i int) []byte
		switch s := a.(type) {
		case *array.String:
			get = func(i int) []byte { return []byte(s.Value(i)) }
		case *array.LargeString:
			get = func(i int) []byte { return []byte(s.Value(i)) }
		case *array.StringView:
			get = func(i int) []byte { return []byte(s.Value(i)) }
		case *array.Binary:
			get = s.Value
		case *array.LargeBinary:
			get = s.Value
		case *array.BinaryView:
			get = s.Value
		default:
			return nil, unsupportedf("arrow type %s as string", a.DataType())
		}
		v.offs = make([]int32, n+1)
		for i := 0; i < n; i++ {
			if a.IsValid(i) {
				b := get(i)
				if len(v.data)+len(b) > math.MaxInt32 {
					return nil, unsupportedf("string chunk larger than 2 GiB")
				}
				v.data = append(v.data, b...)
			}
			v.offs[i+1] = int32(len(v.data))
		}
		if v.data == nil {
			v.data = []byte{}
		}
	case KindStruct:
		s, ok := a.(*array.Struct)
		if !ok {
			return nil, unsupportedf("arrow type %s as struct", a.DataType())
		}
		for i, f := range sd.Fields {
			k, err := fromArrow(s.Field(i), f)
			if err != nil {
				return nil, err
			}
			v.kids = append(v.kids, k)
		}
	default:
		return nil, unsupportedf("writing %s", dt)
	}
	return v, nil
}
