package query

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Every buffer an answer allocates comes from the request's allocator, so
// a checked allocator in tests proves that nothing leaks and a budgeted one
// in the server can bound what answers hold.

// allocFixed allocates a buffer of n values of T from mem and returns it
// with a typed view of its bytes. The buffer's one reference goes to the
// array built from it.
func allocFixed[T int32 | float64 | arrow.Date32](mem memory.Allocator, n int) (*memory.Buffer, []T) {
	var zero T
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * int(unsafe.Sizeof(zero)))
	if n == 0 {
		return buf, nil
	}
	return buf, unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf.Bytes()))), n)
}

// fixedArray wraps a no-null buffer as an array of dt, taking over buf's
// reference.
func fixedArray(dt arrow.DataType, n int, buf *memory.Buffer) arrow.Array {
	d := array.NewData(dt, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	defer d.Release()
	return array.MakeFromData(d)
}

// int32Array copies vals into an int32 array allocated from mem.
func int32Array(mem memory.Allocator, vals []int32) arrow.Array {
	buf, out := allocFixed[int32](mem, len(vals))
	copy(out, vals)
	return fixedArray(arrow.PrimitiveTypes.Int32, len(vals), buf)
}

// dictColumn is a dictionary array of type dt over dict whose n codes are
// buf's (a no-null int32 buffer, retained by the array): the codes are
// not wrapped in an array of their own first.
func dictColumn(dt arrow.DataType, n int64, buf *memory.Buffer, dict arrow.Array) arrow.Array {
	d := array.NewDataWithDictionary(dt, int(n), []*memory.Buffer{nil, buf}, 0, 0, dict.Data().(*array.Data))
	defer d.Release()
	return array.MakeFromData(d)
}
