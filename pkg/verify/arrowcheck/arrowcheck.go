// Package arrowcheck proves that an Arrow record batch read from a file
// is safe to read: every buffer is long enough for its column's length,
// every string or binary offset lies inside its value buffer and never
// decreases, every string is UTF-8, and every dictionary index points
// into its dictionary.
//
// Why: arrow-go trusts the buffers of an IPC file. A checksum proves a
// file is the one written, not that the writer (or whoever recomputed the
// checksums) wrote a valid one; with one bad string offset, reading the
// value panics (inside goroutines arrow-go starts, where no recover
// reaches). The tools that must never panic on a file (snapverify,
// snapinspect) run this O(size of the batch) check before they read any
// value of a batch they did not write. The index sidecar is small (one row
// per series), so checking it whole costs little next to reading it.
package arrowcheck

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Record checks every column of rec (see the package comment). The error
// names the column, and the row when one is at fault.
func Record(rec arrow.RecordBatch) error {
	n := rec.NumRows()
	for i, col := range rec.Columns() {
		name := rec.Schema().Field(i).Name
		if int64(col.Len()) != n {
			return fmt.Errorf("column %q: %d values in a batch of %d rows", name, col.Len(), n)
		}
		if err := Data(col.Data()); err != nil {
			return fmt.Errorf("column %q: %w", name, err)
		}
	}
	return nil
}

// Data checks one array's buffers (and its dictionary's, if any).
func Data(d arrow.ArrayData) error {
	off, n := d.Offset(), d.Len()
	if off < 0 || n < 0 {
		return fmt.Errorf("negative offset %d or length %d", off, n)
	}
	bufs := d.Buffers()
	end := off + n
	if d.DataType().ID() == arrow.NULL {
		return nil
	}
	if len(bufs) == 0 {
		return fmt.Errorf("no buffers")
	}
	if v := bufs[0]; v != nil && v.Len() > 0 && v.Len()*8 < end {
		return fmt.Errorf("validity bitmap of %d bytes for %d values", v.Len(), end)
	}
	if d.NullN() > 0 && (bufs[0] == nil || bufs[0].Len() == 0) && d.NullN() != n {
		return fmt.Errorf("%d nulls but no validity bitmap", d.NullN())
	}
	if end == 0 {
		return nil // nothing to read (an offset past the buffers is checked below, even with no values)
	}
	valid := func(i int) bool {
		v := bufs[0]
		if v == nil || v.Len() == 0 {
			return d.NullN() == 0
		}
		return v.Bytes()[i>>3]&(1<<(i&7)) != 0
	}
	switch dt := d.DataType().(type) {
	case *arrow.StringType, *arrow.BinaryType:
		return offsets(bufs, off, n, 4)
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		return offsets(bufs, off, n, 8)
	case *arrow.BooleanType:
		if len(bufs) < 2 || bufs[1] == nil || bufs[1].Len()*8 < end {
			return fmt.Errorf("value bitmap too short for %d values", end)
		}
		return nil
	case *arrow.DictionaryType:
		dict := d.Dictionary()
		if NoData(dict) {
			return fmt.Errorf("dictionary-encoded column without a dictionary")
		}
		if err := Data(dict); err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
		w := dt.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
		if len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() < end*w {
			return fmt.Errorf("index buffer too short for %d values", end)
		}
		b := bufs[1].Bytes()
		size := int64(dict.Len())
		if idx, ok := int32s(b, off, n); ok && dt.IndexType.ID() == arrow.INT32 && d.NullN() == 0 {
			for i, x := range idx {
				if x < 0 || int64(x) >= size {
					return fmt.Errorf("row %d: dictionary index %d outside the dictionary of %d values", i, x, size)
				}
			}
			return nil
		}
		for i := off; i < end; i++ {
			if !valid(i) {
				continue
			}
			var x int64
			le := binary.LittleEndian
			switch dt.IndexType.ID() {
			case arrow.INT8:
				x = int64(int8(b[i]))
			case arrow.UINT8:
				x = int64(b[i])
			case arrow.INT16:
				x = int64(int16(le.Uint16(b[i*2:])))
			case arrow.UINT16:
				x = int64(le.Uint16(b[i*2:]))
			case arrow.INT32:
				x = int64(int32(le.Uint32(b[i*4:])))
			case arrow.UINT32:
				x = int64(le.Uint32(b[i*4:]))
			case arrow.INT64:
				x = int64(le.Uint64(b[i*8:]))
			default:
				return fmt.Errorf("dictionary index type %s", dt.IndexType)
			}
			if x < 0 || x >= size {
				return fmt.Errorf("row %d: dictionary index %d outside the dictionary of %d values", i-off, x, size)
			}
		}
		return nil
	case arrow.FixedWidthDataType:
		w := dt.BitWidth() / 8
		if dt.BitWidth()%8 != 0 || w == 0 {
			return fmt.Errorf("type %s is not byte-aligned", dt)
		}
		if len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() < end*w {
			have := 0
			if len(bufs) >= 2 && bufs[1] != nil {
				have = bufs[1].Len()
			}
			return fmt.Errorf("value buffer of %d bytes for %d values of %d bytes", have, end, w)
		}
		return nil
	}
	return fmt.Errorf("type %s is not checked", d.DataType())
}

// offsets checks the offsets buffer (bufs[1], width 4 or 8 bytes each,
// little-endian as Arrow IPC writes them) and the value buffer (bufs[2])
// of values [off, off+n).
func offsets(bufs []*memory.Buffer, off, n int, width int) error {
	if len(bufs) < 3 || bufs[1] == nil {
		return fmt.Errorf("no offsets buffer")
	}
	ob := bufs[1].Bytes()
	if len(ob) < (off+n+1)*width {
		return fmt.Errorf("offsets buffer of %d bytes for %d values", len(ob), n)
	}
	var vals []byte
	if bufs[2] != nil {
		vals = bufs[2].Bytes()
	}
	size := int64(len(vals))
	if width == 4 {
		if o32, ok := int32s(ob, off, n+1); ok {
			return offsets32(o32, size)
		}
	}
	at := func(i int) int64 {
		p := ob[(off+i)*width:]
		if width == 4 {
			return int64(int32(binary.LittleEndian.Uint32(p)))
		}
		return int64(binary.LittleEndian.Uint64(p))
	}
	prev := at(0)
	if prev < 0 || prev > size {
		return fmt.Errorf("row 0: offset %d outside the value buffer of %d bytes", prev, size)
	}
	for i := 1; i <= n; i++ {
		cur := at(i)
		if cur < prev {
			return fmt.Errorf("row %d: offsets decrease (%d after %d)", i-1, cur, prev)
		}
		if cur > size {
			return fmt.Errorf("row %d: offset %d outside the value buffer of %d bytes", i-1, cur, size)
		}
		prev = cur
	}
	return nil
}

// NoData reports whether d is absent: nil, or a nil *array.Data in the
// interface (what arrow-go returns for an array without a dictionary).
func NoData(d arrow.ArrayData) bool {
	if d == nil {
		return true
	}
	x, ok := d.(*array.Data)
	return ok && x == nil
}

// int32s views b[off*4:(off+n)*4] as int32s when the platform is
// little-endian and the bytes are aligned (Arrow buffers are), so the hot
// loop of offsets32 reads plain integers.
func int32s(b []byte, off, n int) ([]int32, bool) {
	if !littleEndian || len(b) < (off+n)*4 {
		return nil, false
	}
	p := unsafe.Pointer(unsafe.SliceData(b[off*4:]))
	if uintptr(p)%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*int32)(p), n), true
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// offsets32 is the loop of offsets over decoded int32 offsets.
func offsets32(os []int32, size int64) error {
	prev := os[0]
	if prev < 0 || int64(prev) > size {
		return fmt.Errorf("row 0: offset %d outside the value buffer of %d bytes", prev, size)
	}
	lim := int32(min(size, 1<<31-1))
	for i, cur := range os[1:] {
		if cur < prev || cur > lim {
			if cur < prev {
				return fmt.Errorf("row %d: offsets decrease (%d after %d)", i, cur, prev)
			}
			return fmt.Errorf("row %d: offset %d outside the value buffer of %d bytes", i, cur, size)
		}
		prev = cur
	}
	return nil
}
