package delta

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A selection names rows of two arrays of one type, a and b: a value below
// fromB is row v of a, fromB|v is row v of b. Merging two runs is one
// selection per column, and gathering by hand costs a copy per value
// where concatenating both and taking from the result (compute.Take) cost
// two copies, bounds checks and a kernel dispatch per column.
const fromB = 1 << 31

// gather2 returns the selected rows of a and b, in selection order.
func gather2(mem memory.Allocator, a, b arrow.Array, sel []uint32) (arrow.Array, error) {
	if !arrow.TypeEqual(a.DataType(), b.DataType()) {
		return nil, fmt.Errorf("delta: gather of %s and %s", a.DataType(), b.DataType())
	}
	src := [2]arrow.Array{a, b}
	n := len(sel)
	var validity *memory.Buffer
	nulls := 0
	if a.NullN() > 0 || b.NullN() > 0 {
		validity = memory.NewResizableBuffer(mem)
		validity.Resize(int(bitutil.BytesForBits(int64(n))))
		bits := validity.Bytes()
		clear(bits)
		for i, s := range sel {
			if src[s>>31].IsValid(int(s &^ fromB)) {
				bitutil.SetBit(bits, i)
			} else {
				nulls++
			}
		}
	}
	release := func(bufs ...*memory.Buffer) {
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
	}
	var bufs []*memory.Buffer
	switch dt := a.DataType().(type) {
	case *arrow.BooleanType:
		out := memory.NewResizableBuffer(mem)
		out.Resize(int(bitutil.BytesForBits(int64(n))))
		bits := out.Bytes()
		clear(bits)
		av, bv := a.(*array.Boolean), b.(*array.Boolean)
		for i, s := range sel {
			var v bool
			if s&fromB == 0 {
				v = av.Value(int(s))
			} else {
				v = bv.Value(int(s &^ fromB))
			}
			if v {
				bitutil.SetBit(bits, i)
			}
		}
		bufs = []*memory.Buffer{validity, out}
	case *arrow.StringType, *arrow.BinaryType:
		off, data := gatherVar32(mem, a, b, sel)
		bufs = []*memory.Buffer{validity, off, data}
	case arrow.FixedWidthDataType:
		bw := dt.BitWidth()
		if bw%8 != 0 || a.Data().Buffers()[1] == nil || b.Data().Buffers()[1] == nil {
			release(validity)
			return gatherSlow(mem, a, b, sel)
		}
		bufs = []*memory.Buffer{validity, gatherFixed(mem, a, b, sel, bw/8)}
	default:
		release(validity)
		return gatherSlow(mem, a, b, sel)
	}
	data := array.NewData(a.DataType(), n, bufs, nil, nulls, 0)
	release(bufs...)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// fixedBytes is the value bytes of a fixed-width array from its offset on.
func fixedBytes(a arrow.Array, width int) []byte {
	return a.Data().Buffers()[1].Bytes()[a.Data().Offset()*width:]
}

func gatherFixed(mem memory.Allocator, a, b arrow.Array, sel []uint32, width int) *memory.Buffer {
	out := memory.NewResizableBuffer(mem)
	out.Resize(len(sel) * width)
	ab, bb := fixedBytes(a, width), fixedBytes(b, width)
	switch width {
	case 4:
		gatherWords(asWords[uint32](out.Bytes()), asWords[uint32](ab), asWords[uint32](bb), sel)
	case 8:
		gatherWords(asWords[uint64](out.Bytes()), asWords[uint64](ab), asWords[uint64](bb), sel)
	default:
		o := out.Bytes()
		for i, s := range sel {
			from, r := ab, int(s)
			if s&fromB != 0 {
				from, r = bb, int(s&^fromB)
			}
			copy(o[i*width:(i+1)*width], from[r*width:(r+1)*width])
		}
	}
	return out
}

func gatherWords[T uint32 | uint64](out, a, b []T, sel []uint32) {
	for i, s := range sel {
		if s&fromB == 0 {
			out[i] = a[s]
		} else {
			out[i] = b[s&^fromB]
		}
	}
}

// asWords views b as a slice of T (Arrow buffers are 64-byte aligned, and
// offsets of 4- and 8-byte values keep the alignment).
func asWords[T uint32 | uint64](b []byte) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	if len(b) < size {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/size)
}

// gatherVar32 gathers a string or binary column (int32 offsets).
func gatherVar32(mem memory.Allocator, a, b arrow.Array, sel []uint32) (offsets, data *memory.Buffer) {
	type varArray interface {
		ValueOffsets() []int32
		ValueBytes() []byte
	}
	av, bv := a.(varArray), b.(varArray)
	ao, bo := av.ValueOffsets(), bv.ValueOffsets()
	ad, bd := av.ValueBytes(), bv.ValueBytes()
	// ValueBytes starts at the first offset of the array's slice.
	abase, bbase := int32(0), int32(0)
	if len(ao) > 0 {
		abase = ao[0]
	}
	if len(bo) > 0 {
		bbase = bo[0]
	}
	offsets = memory.NewResizableBuffer(mem)
	offsets.Resize((len(sel) + 1) * 4)
	off := asWords[uint32](offsets.Bytes())
	total := 0
	for i, s := range sel {
		off[i] = uint32(total)
		if s&fromB == 0 {
			total += int(ao[s+1] - ao[s])
		} else {
			r := s &^ fromB
			total += int(bo[r+1] - bo[r])
		}
	}
	off[len(sel)] = uint32(total)
	data = memory.NewResizableBuffer(mem)
	data.Resize(total)
	d := data.Bytes()
	for i, s := range sel {
		if s&fromB == 0 {
			copy(d[off[i]:off[i+1]], ad[ao[s]-abase:ao[s+1]-abase])
		} else {
			r := s &^ fromB
			copy(d[off[i]:off[i+1]], bd[bo[r]-bbase:bo[r+1]-bbase])
		}
	}
	return offsets, data
}

// gatherSlow handles every other type: concatenate, then take.
func gatherSlow(mem memory.Allocator, a, b arrow.Array, sel []uint32) (arrow.Array, error) {
	both, err := array.Concatenate([]arrow.Array{a, b}, mem)
	if err != nil {
		return nil, err
	}
	defer both.Release()
	idx := make([]int32, len(sel))
	na := uint32(a.Len())
	for i, s := range sel {
		if s&fromB == 0 {
			idx[i] = int32(s)
		} else {
			idx[i] = int32(na + s&^fromB)
		}
	}
	return takeInt32(mem, both, idx)
}

func takeInt32(mem memory.Allocator, a arrow.Array, idx []int32) (arrow.Array, error) {
	ia := int32s(mem, idx)
	defer ia.Release()
	return compute.TakeArray(compute.WithAllocator(context.Background(), mem), a, ia)
}
