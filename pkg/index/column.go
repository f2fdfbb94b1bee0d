package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/mapbuf"
)

// Cell is one value of an Arrow array: row Row of Array. A nil Array is a
// null. A dictionary-encoded Array is read through its dictionary, and an
// array of Arrow's null type is null at every row, whatever the column.
type Cell struct {
	Array arrow.Array
	Row   int
}

// layout says how a column's values are held while the index is built.
type layout uint8

const (
	layoutNull  layout = iota // no values at all
	layoutBool                // a bit per row
	layoutFixed               // width bytes per row
	layoutBytes               // utf8 or binary: offsets and bytes
)

func layoutOf(dt arrow.DataType) (layout, int, error) {
	switch dt.ID() {
	case arrow.NULL:
		return layoutNull, 0, nil
	case arrow.BOOL:
		return layoutBool, 0, nil
	case arrow.STRING, arrow.BINARY:
		return layoutBytes, 0, nil
	}
	if fw, ok := dt.(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 && fw.BitWidth()%8 == 0 {
		return layoutFixed, fw.BitWidth() / 8, nil
	}
	return 0, 0, fmt.Errorf("type %s cannot be an index column (want null, bool, utf8, binary or a fixed-width type)", dt)
}

// column accumulates one index column in Arrow's layout, so that Close
// wraps its buffers without a copy. Null slots hold zero bytes, so the
// same values always give the same file. The buffers are the writer's
// arena's: past a small size, mapped temporary files (pkg/mapbuf).
//
// A buffer never shrinks, so its spare room is zero: appending a zero byte
// and then setting bits in it is how the bitmaps grow.
//
// It remembers the last source array and what it derived from it (type
// check, buffers), so that a run of cells from one array costs a pointer
// comparison, not a type comparison, per cell.
type column struct {
	typ     arrow.DataType
	layout  layout
	width   int
	n       int
	nulls   int
	valid   *mapbuf.Buf // validity bitmap, a bit per row
	data    *mapbuf.Buf // fixed: width bytes per row; bool: a bit per row; bytes: the values
	offsets *mapbuf.Buf // bytes: n+1 int32 offsets into data

	src     arrow.Array // the last source array, type-checked
	srcLen  int
	srcNull bool              // src is of the null type
	dict    *array.Dictionary // src, when it is dictionary-encoded
	vals    arrow.Array       // src, or its dictionary
	raw     []byte            // fixed: vals' value bytes from its offset; bytes: vals' data
	rawOffs []int32           // bytes: vals' offsets
	bools   *array.Boolean
}

func newColumn(a *mapbuf.Arena, dt arrow.DataType) (*column, error) {
	l, w, err := layoutOf(dt)
	if err != nil {
		return nil, err
	}
	c := &column{typ: dt, layout: l, width: w, valid: a.New(), data: a.New()}
	if l == layoutBytes {
		c.offsets = a.New()
		appendInt32(c.offsets, 0)
	}
	return c, nil
}

// reserve makes room for n more rows (the values of a bytes column
// excepted: their size is not known).
func (c *column) reserve(n int) {
	c.valid.Reserve((c.n+n+7)/8 - c.valid.Len())
	switch c.layout {
	case layoutFixed:
		c.data.Reserve(n * c.width)
	case layoutBool:
		c.data.Reserve((c.n+n+7)/8 - c.data.Len())
	case layoutBytes:
		c.offsets.Reserve(4 * n)
	}
}

// bind type-checks a new source array and caches its buffers.
func (c *column) bind(a arrow.Array) error {
	vals := a
	dict, _ := a.(*array.Dictionary)
	if dict != nil {
		vals = dict.Dictionary()
	}
	isNull := vals.DataType().ID() == arrow.NULL
	if !isNull && !arrow.TypeEqual(vals.DataType(), c.typ) {
		return fmt.Errorf("a %s array for a %s column", a.DataType(), c.typ)
	}
	c.src, c.srcLen, c.srcNull, c.dict, c.vals = a, a.Len(), isNull, dict, vals
	c.raw, c.rawOffs, c.bools = nil, nil, nil
	if isNull {
		return nil
	}
	d := vals.Data()
	switch c.layout {
	case layoutFixed:
		if b := d.Buffers()[1]; b != nil {
			c.raw = b.Bytes()[d.Offset()*c.width:]
		}
	case layoutBytes:
		switch v := vals.(type) {
		case *array.String:
			c.rawOffs = v.ValueOffsets()
		case *array.Binary:
			c.rawOffs = v.ValueOffsets()
		}
		if b := d.Buffers()[2]; b != nil {
			c.raw = b.Bytes()
		}
	case layoutBool:
		c.bools = vals.(*array.Boolean)
	}
	return nil
}

// add appends one cell and reports whether it was null.
func (c *column) add(v Cell) (null bool, err error) {
	if v.Array == nil {
		c.appendNull()
		return true, nil
	}
	if v.Array != c.src {
		if err := c.bind(v.Array); err != nil {
			return false, err
		}
	}
	r := v.Row
	if r < 0 || r >= c.srcLen {
		return false, fmt.Errorf("row %d of a %d-row array", r, c.srcLen)
	}
	if c.dict != nil {
		if c.dict.IsNull(r) {
			c.appendNull()
			return true, nil
		}
		r = c.dict.GetValueIndex(r)
	}
	if c.srcNull || c.vals.IsNull(r) {
		c.appendNull()
		return true, nil
	}
	switch c.layout {
	case layoutFixed:
		c.data.Append(c.raw[r*c.width : (r+1)*c.width]...)
	case layoutBytes:
		v := c.raw[c.rawOffs[r]:c.rawOffs[r+1]]
		if c.data.Len()+len(v) > math.MaxInt32 {
			return false, fmt.Errorf("more than 2 GiB of values in one utf8 column")
		}
		c.data.Append(v...)
		appendInt32(c.offsets, int32(c.data.Len()))
	case layoutBool:
		if c.n&7 == 0 {
			c.data.Append(0)
		}
		if c.bools.Value(r) {
			c.data.Bytes()[c.n>>3] |= 1 << (c.n & 7)
		}
	}
	c.setValid()
	return false, nil
}

// setValid appends a valid row.
func (c *column) setValid() {
	if c.n&7 == 0 {
		c.valid.Append(0)
	}
	c.valid.Bytes()[c.n>>3] |= 1 << (c.n & 7)
	c.n++
}

// addDate32 appends a non-null value to a date32 column.
func (c *column) addDate32(v arrow.Date32) {
	c.data.Append(byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	c.setValid()
}

func (c *column) appendNull() {
	switch c.layout {
	case layoutFixed:
		c.data.AppendZeros(c.width)
	case layoutBytes:
		appendInt32(c.offsets, int32(c.data.Len()))
	case layoutBool:
		if c.n&7 == 0 {
			c.data.Append(0)
		}
	}
	if c.n&7 == 0 {
		c.valid.Append(0)
	}
	c.n++
	c.nulls++
}

func (c *column) isNull(i int) bool { return c.nulls > 0 && c.valid.Bytes()[i>>3]&(1<<(i&7)) == 0 }

// validity is the validity buffer, nil when nothing is null.
func (c *column) validity() *memory.Buffer {
	if c.nulls == 0 {
		return nil
	}
	return memory.NewBufferBytes(c.valid.Bytes())
}

// array wraps the accumulated values as an Arrow array, without a copy.
func (c *column) array() arrow.Array {
	c.src, c.dict, c.vals, c.bools, c.raw, c.rawOffs = nil, nil, nil, nil, nil, nil
	var bufs []*memory.Buffer
	switch c.layout {
	case layoutNull:
		return array.NewNull(c.n)
	case layoutBytes:
		bufs = []*memory.Buffer{c.validity(), memory.NewBufferBytes(c.offsets.Bytes()), memory.NewBufferBytes(c.data.Bytes())}
	default:
		bufs = []*memory.Buffer{c.validity(), memory.NewBufferBytes(c.data.Bytes())}
	}
	return makeArray(c.typ, c.n, bufs, c.nulls)
}

// date32Array builds a date32 column with arrow-go's builder, as the
// first writer built latest_period: the builder sizes its validity buffer
// to its capacity, and keeping that keeps the bytes of an index stable
// across writer changes (the goldens of testdata/v2 pin them).
func (c *column) date32Array() arrow.Array {
	vals := arrow.Date32Traits.CastFromBytes(c.data.Bytes())
	b := array.NewDate32Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(c.n)
	for i, v := range vals {
		if c.isNull(i) {
			b.UnsafeAppendBoolToBitmap(false)
		} else {
			b.UnsafeAppend(v)
		}
	}
	return b.NewArray()
}

func makeArray(dt arrow.DataType, n int, bufs []*memory.Buffer, nulls int) arrow.Array {
	d := array.NewData(dt, n, bufs, nil, nulls, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

// appendInt32 and the others append one value in Arrow's (the
// machine's) byte order.
func appendInt32(b *mapbuf.Buf, v int32)   { binary.NativeEndian.PutUint32(b.AppendZeros(4), uint32(v)) }
func appendUint32(b *mapbuf.Buf, v uint32) { binary.NativeEndian.PutUint32(b.AppendZeros(4), v) }
func appendInt64(b *mapbuf.Buf, v int64)   { binary.NativeEndian.PutUint64(b.AppendZeros(8), uint64(v)) }

// unsafeString views b as a string without copying; b must not change
// while the string is in use.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
