package index

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// What arrow-go trusts. An array read from an IPC file is used as it is:
// arrow-go checks neither that a utf8 column's offsets are monotonic nor
// that a dictionary's indices are in range, and a bad one makes Value,
// compute.Take or the IPC writer slice out of bounds, in goroutines arrow-go
// starts where no recover of ours reaches. So everything such code would
// index by is checked here before an Index hands a column out:
//
//   - every buffer is as long as the column's length needs (validity and
//     fixed-width values: O(1));
//   - utf8 and binary offsets start at 0 or more, never decrease, and end
//     inside the values buffer (one pass over 4 bytes a row);
//   - dictionary indices (version-1 files only) lie in [0, dictionary
//     length) on every valid row, and the dictionary itself passes these
//     checks (one pass over 1-4 bytes a row).
//
// Nothing else is read: the values of a string, its UTF-8 validity, sort
// order and agreement with the data file are for snapverify.

// checkBuffers makes the O(1) checks of one column: its type is one the
// format writes and its buffers are long enough for its length. The pass
// over offsets or indices is checkValues.
func checkBuffers(a arrow.Array) error {
	d := a.Data()
	n, off := d.Len(), d.Offset()
	if n < 0 || off < 0 {
		return fmt.Errorf("length %d, offset %d", n, off)
	}
	bufs := d.Buffers()
	need := func(i, bytes int, what string) error {
		if i >= len(bufs) || bufs[i] == nil {
			if bytes == 0 {
				return nil
			}
			return fmt.Errorf("no %s buffer for %d rows", what, n)
		}
		if got := bufs[i].Len(); got < bytes {
			return fmt.Errorf("%s buffer is %d bytes, %d rows need %d", what, got, n, bytes)
		}
		return nil
	}
	if a.DataType().ID() == arrow.NULL {
		return nil
	}
	if len(bufs) > 0 && bufs[0] != nil {
		if err := need(0, int(bitutil.BytesForBits(int64(off+n))), "validity"); err != nil {
			return err
		}
	} else if d.NullN() > 0 {
		return fmt.Errorf("%d nulls but no validity buffer", d.NullN())
	}
	switch dt := a.DataType().(type) {
	case *arrow.BooleanType:
		return need(1, int(bitutil.BytesForBits(int64(off+n))), "values")
	case *arrow.StringType, *arrow.BinaryType:
		if n == 0 {
			return nil
		}
		return need(1, 4*(off+n+1), "offsets")
	case *arrow.DictionaryType:
		if dt.ValueType.ID() != arrow.STRING {
			return fmt.Errorf("a dictionary of %s; the format allows dictionaries of utf8 only", dt.ValueType)
		}
		fw, ok := dt.IndexType.(arrow.FixedWidthDataType)
		if !ok {
			return fmt.Errorf("dictionary index type %s", dt.IndexType)
		}
		if err := need(1, fw.BitWidth()/8*(off+n), "indices"); err != nil {
			return err
		}
		dict := d.Dictionary()
		if dict == nil {
			return fmt.Errorf("dictionary-encoded without a dictionary")
		}
		da := array.MakeFromData(dict)
		defer da.Release()
		if err := checkBuffers(da); err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
		return nil
	case arrow.FixedWidthDataType:
		w := dt.BitWidth()
		if w < 8 || w%8 != 0 {
			return fmt.Errorf("type %s is not one the index format writes", dt)
		}
		return need(1, w/8*(off+n), "values")
	}
	return fmt.Errorf("type %s is not one the index format writes", a.DataType())
}

// checkValues makes the pass over a column that arrow-go would index by:
// the offsets of a utf8 or binary column, the indices of a dictionary. It
// assumes checkBuffers passed. Other columns have nothing to check.
func checkValues(a arrow.Array) error {
	switch c := a.(type) {
	case *array.String, *array.Binary:
		// From the raw buffers: the array's own accessors (ValueBytes,
		// Value) already slice by the offsets this is about to check.
		d := c.Data()
		n, off := d.Len(), d.Offset()
		if n == 0 {
			return nil
		}
		offs := arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[off : off+n+1]
		size := 0
		if b := d.Buffers()[2]; b != nil {
			size = b.Len()
		}
		return checkOffsets(offs, size, off)
	case *array.Dictionary:
		dict := c.Dictionary()
		if err := checkValues(dict); err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
		return checkIndices(c, dict.Len())
	}
	return nil
}

// checkOffsets checks that offs (the n+1 offsets of an n-row column, as
// the array exposes them) never decrease, start at 0 or more and end at
// most at size, the length of the values buffer; base is the array's
// offset, for the row numbers of the message. The loop keeps no branch
// per offset: it ORs together every difference (as int64, so a wild pair
// cannot overflow into a positive one) and looks at the sign once per
// block, so that a million rows cost well under a millisecond.
func checkOffsets(offs []int32, size, base int) error {
	if len(offs) == 0 {
		return nil
	}
	if offs[0] < 0 {
		return fmt.Errorf("offset %d of row %d is negative", offs[0], base)
	}
	const block = 4096
	for lo := 0; lo+1 < len(offs); lo += block {
		hi := min(lo+block, len(offs)-1)
		var acc int64
		prev := int64(offs[lo])
		for _, o := range offs[lo+1 : hi+1] {
			acc |= int64(o) - prev
			prev = int64(o)
		}
		if acc < 0 {
			for i := lo; i < hi; i++ {
				if offs[i+1] < offs[i] {
					return fmt.Errorf("offset of row %d is %d, after %d: offsets must not decrease", base+i+1, offs[i+1], offs[i])
				}
			}
		}
	}
	if last := offs[len(offs)-1]; int(last) > size {
		return fmt.Errorf("offset %d of row %d is past the %d-byte values buffer", last, base+len(offs)-1, size)
	}
	return nil
}

// checkIndices checks that every valid row of a dictionary column has an
// index in [0, size).
func checkIndices(d *array.Dictionary, size int) error {
	ind := d.Indices()
	bad := -1
	switch a := ind.(type) {
	case *array.Int8:
		bad = firstOutside(a.Int8Values(), size)
	case *array.Int16:
		bad = firstOutside(a.Int16Values(), size)
	case *array.Int32:
		bad = firstOutside(a.Int32Values(), size)
	case *array.Int64:
		bad = firstOutside(a.Int64Values(), size)
	default:
		return fmt.Errorf("dictionary index type %s; the format writes int8, int16 or int32", ind.DataType())
	}
	for ; bad >= 0; bad = nextOutside(ind, bad+1, size) {
		if ind.IsValid(bad) { // a null row may hold anything
			return fmt.Errorf("row %d has dictionary index %v, outside [0,%d)", bad, ind.GetOneForMarshal(bad), size)
		}
	}
	return nil
}

type signed interface {
	~int8 | ~int16 | ~int32 | ~int64
}

// firstOutside is the first i with v[i] outside [0, size), or -1.
func firstOutside[T signed](v []T, size int) int {
	for i, x := range v {
		if x < 0 || int64(x) >= int64(size) {
			return i
		}
	}
	return -1
}

// nextOutside continues firstOutside from row from, over any index type.
func nextOutside(ind arrow.Array, from, size int) int {
	var r int
	switch a := ind.(type) {
	case *array.Int8:
		r = firstOutside(a.Int8Values()[from:], size)
	case *array.Int16:
		r = firstOutside(a.Int16Values()[from:], size)
	case *array.Int32:
		r = firstOutside(a.Int32Values()[from:], size)
	case *array.Int64:
		r = firstOutside(a.Int64Values()[from:], size)
	}
	if r < 0 {
		return -1
	}
	return from + r
}
