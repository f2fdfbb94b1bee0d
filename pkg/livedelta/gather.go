package livedelta

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

// A selection names rows of up to maxSources arrays of one type: value
// k<<srcShift | v is row v of source k (so for two sources a and b, v is
// row v of a and fromB|v row v of b). Merging runs is one selection per
// column, and gathering by hand costs a copy per value where
// concatenating the sources and taking from the result (compute.Take)
// cost two copies, bounds checks and a kernel dispatch per column.
const (
	srcShift   = 28
	rowMask    = 1<<srcShift - 1
	maxSources = 1 << (32 - srcShift)
	// maxSourceRows bounds a source's rows: a run longer is not merged.
	maxSourceRows = rowMask + 1
	fromB         = 1 << srcShift
)

// gather2 returns the selected rows of a and b, in selection order.
func gather2(mem memory.Allocator, a, b arrow.Array, sel []uint32) (arrow.Array, error) {
	return gatherK(mem, []arrow.Array{a, b}, sel, nil)
}

// gatherK returns the selected rows of srcs, in selection order, stepping
// p (nil: none) as it goes.
func gatherK(mem memory.Allocator, srcs []arrow.Array, sel []uint32, p *pacer) (arrow.Array, error) {
	if len(srcs) == 0 || len(srcs) > maxSources {
		return nil, fmt.Errorf("delta: gather of %d arrays", len(srcs))
	}
	a := srcs[0]
	anyNulls := false
	for _, x := range srcs {
		if !arrow.TypeEqual(a.DataType(), x.DataType()) {
			return nil, fmt.Errorf("delta: gather of %s and %s", a.DataType(), x.DataType())
		}
		anyNulls = anyNulls || x.NullN() > 0
	}
	n := len(sel)
	var validity *memory.Buffer
	nulls := 0
	if anyNulls {
		validity = memory.NewResizableBuffer(mem)
		validity.Resize(int(bitutil.BytesForBits(int64(n))))
		bits := validity.Bytes()
		clear(bits)
		p.chunks(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				s := sel[i]
				if srcs[s>>srcShift].IsValid(int(s & rowMask)) {
					bitutil.SetBit(bits, i)
				} else {
					nulls++
				}
			}
		})
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
		bs := make([]*array.Boolean, len(srcs))
		for k, x := range srcs {
			bs[k] = x.(*array.Boolean)
		}
		p.chunks(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				s := sel[i]
				if bs[s>>srcShift].Value(int(s & rowMask)) {
					bitutil.SetBit(bits, i)
				}
			}
		})
		bufs = []*memory.Buffer{validity, out}
	case *arrow.StringType, *arrow.BinaryType:
		off, data := gatherVar32(mem, srcs, sel, p)
		bufs = []*memory.Buffer{validity, off, data}
	case arrow.FixedWidthDataType:
		bw := dt.BitWidth()
		ok := bw%8 == 0
		for _, x := range srcs {
			ok = ok && x.Data().Buffers()[1] != nil
		}
		if !ok {
			release(validity)
			return gatherSlow(mem, srcs, sel)
		}
		bufs = []*memory.Buffer{validity, gatherFixed(mem, srcs, sel, bw/8, p)}
	default:
		release(validity)
		return gatherSlow(mem, srcs, sel)
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

func gatherFixed(mem memory.Allocator, srcs []arrow.Array, sel []uint32, width int, p *pacer) *memory.Buffer {
	out := memory.NewResizableBuffer(mem)
	out.Resize(len(sel) * width)
	bs := make([][]byte, len(srcs))
	for k, x := range srcs {
		bs[k] = fixedBytes(x, width)
	}
	switch width {
	case 4:
		o, ws := asWords[uint32](out.Bytes()), wordsOf[uint32](bs)
		p.chunks(len(sel), func(lo, hi int) { gatherWords(o[lo:hi], ws, sel[lo:hi]) })
	case 8:
		o, ws := asWords[uint64](out.Bytes()), wordsOf[uint64](bs)
		p.chunks(len(sel), func(lo, hi int) { gatherWords(o[lo:hi], ws, sel[lo:hi]) })
	default:
		o := out.Bytes()
		p.chunks(len(sel), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				s := sel[i]
				from, r := bs[s>>srcShift], int(s&rowMask)
				copy(o[i*width:(i+1)*width], from[r*width:(r+1)*width])
			}
		})
	}
	return out
}

func wordsOf[T uint32 | uint64](bs [][]byte) [][]T {
	ws := make([][]T, len(bs))
	for k, b := range bs {
		ws[k] = asWords[T](b)
	}
	return ws
}

func gatherWords[T uint32 | uint64](out []T, srcs [][]T, sel []uint32) {
	if len(srcs) == 2 { // the common pair: no slice header per value
		a, b := srcs[0], srcs[1]
		for i, s := range sel {
			if s&fromB == 0 {
				out[i] = a[s]
			} else {
				out[i] = b[s&rowMask]
			}
		}
		return
	}
	for i, s := range sel {
		out[i] = srcs[s>>srcShift][s&rowMask]
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

// rowSelection is rows of one array (source 0) as a selection, in place:
// rows are non-negative and below maxSourceRows.
func rowSelection(rows []int32) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(rows))), len(rows))
}

// gatherVar32 gathers a string or binary column (int32 offsets).
func gatherVar32(mem memory.Allocator, srcs []arrow.Array, sel []uint32, p *pacer) (offsets, data *memory.Buffer) {
	type varArray interface {
		ValueOffsets() []int32
		ValueBytes() []byte
	}
	type src struct {
		off  []int32
		data []byte
		base int32 // ValueBytes starts at the first offset of the array's slice
	}
	ss := make([]src, len(srcs))
	for k, x := range srcs {
		v := x.(varArray)
		ss[k] = src{off: v.ValueOffsets(), data: v.ValueBytes()}
		if len(ss[k].off) > 0 {
			ss[k].base = ss[k].off[0]
		}
	}
	offsets = memory.NewResizableBuffer(mem)
	offsets.Resize((len(sel) + 1) * 4)
	off := asWords[uint32](offsets.Bytes())
	total := 0
	p.chunks(len(sel), func(lo, hi int) {
		t := total // (a local in the loop, not the captured variable)
		for i := lo; i < hi; i++ {
			s := sel[i]
			off[i] = uint32(t)
			o, r := ss[s>>srcShift].off, s&rowMask
			t += int(o[r+1] - o[r])
		}
		total = t
	})
	off[len(sel)] = uint32(total)
	data = memory.NewResizableBuffer(mem)
	data.Resize(total)
	d := data.Bytes()
	p.chunks(len(sel), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s := sel[i]
			x, r := &ss[s>>srcShift], s&rowMask
			copy(d[off[i]:off[i+1]], x.data[x.off[r]-x.base:x.off[r+1]-x.base])
		}
	})
	return offsets, data
}

// gatherSlow handles every other type: concatenate, then take.
func gatherSlow(mem memory.Allocator, srcs []arrow.Array, sel []uint32) (arrow.Array, error) {
	all, err := array.Concatenate(srcs, mem)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	first := make([]int32, len(srcs))
	for k := 1; k < len(srcs); k++ {
		first[k] = first[k-1] + int32(srcs[k-1].Len())
	}
	idx := make([]int32, len(sel))
	for i, s := range sel {
		idx[i] = first[s>>srcShift] + int32(s&rowMask)
	}
	return takeInt32(mem, all, idx)
}

func takeInt32(mem memory.Allocator, a arrow.Array, idx []int32) (arrow.Array, error) {
	ia := int32s(mem, idx)
	defer ia.Release()
	return compute.TakeArray(compute.WithAllocator(context.Background(), mem), a, ia)
}
