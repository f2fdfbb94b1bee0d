package sortwrite

import (
	"bytes"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
)

// nullCode marks a null in a string column's per-row codes.
const nullCode = math.MaxUint32

// store holds one input column for every row, in input order, preallocated
// from the row counts in the Parquet footers so workers can fill disjoint
// ranges without locks.
type store struct {
	col   Column
	kind  kind
	width int // bytes per row for kindFixed and kindBool

	dict  *dictionary // kindString
	codes []uint32    // kindString: per-row codes, nullCode for null
	// att, for a string column other than the series id in an in-memory
	// build, checks it for an attribute while it is read (attrread.go).
	// Once att.decided, codes is never written: the column's values are
	// att's, per series.
	att *attrRead

	data  []byte // kindFixed, kindBool: width bytes per row
	valid []byte // kindFixed, kindBool: 1 = valid, 0 = null

	// noNull says valid holds no 0: set by noteNulls once the store is
	// complete, it lets gather skip the per-row validity look-up, a random
	// read per row per column (false is always safe).
	noNull bool
	// nullsZero says every null row's data bytes are zero, as the readers
	// (fill, putFixed, scatterDict, setNull) leave them: set by noteNulls
	// on a complete store, it lets gather test validity only for a value
	// that is zero (see gatherValid). False is always safe.
	nullsZero bool
}

// noteNulls records whether the store holds no null (see noNull). Call it
// only once the store is filled and before gathering; a store that changes
// afterwards must reset noNull.
func (s *store) noteNulls() {
	s.noNull = (s.kind == kindFixed || s.kind == kindBool) && bytes.IndexByte(s.valid, 0) < 0
	s.nullsZero = s.kind == kindFixed
}

// newStore makes the store of column c for rows rows, its arrays from mem
// (nil: the Go heap).
func newStore(c Column, rows int, mem *bigArena) *store {
	s := &store{col: c, kind: kindOf(c.Type)}
	switch s.kind {
	case kindString:
		s.dict = newDictionary()
		s.codes = bigSlice[uint32](mem, rows)
	case kindFixed, kindBool:
		s.width = 1
		if fw, ok := c.Type.(arrow.FixedWidthDataType); ok && s.kind == kindFixed {
			s.width = fw.BitWidth() / 8
		}
		s.data = bigSlice[byte](mem, rows*s.width)
		s.valid = bigSlice[byte](mem, rows)
	}
	return s
}

// setNull marks rows [lo, hi) null (a file without this column).
func (s *store) setNull(lo, hi int) {
	switch s.kind {
	case kindString:
		s.att.notePerRow()
		for i := lo; i < hi; i++ {
			s.codes[i] = nullCode
		}
	case kindFixed, kindBool:
		clear(s.valid[lo:hi])
		clear(s.data[lo*s.width : hi*s.width])
	}
}

// isNull reports whether row i is null.
func (s *store) isNull(i int) bool {
	switch s.kind {
	case kindString:
		return s.codes[i] == nullCode
	case kindFixed, kindBool:
		return s.valid[i] == 0
	}
	return true
}

// equalRows reports whether rows i and j hold the same value (two nulls
// are equal). Used to find columns that are constant within each series.
func (s *store) equalRows(i, j int) bool {
	switch s.kind {
	case kindString:
		return s.codes[i] == s.codes[j]
	case kindFixed, kindBool:
		if s.valid[i] != s.valid[j] {
			return false
		}
		if s.valid[i] == 0 {
			return true
		}
		w := s.width
		a, b := s.data[i*w:i*w+w], s.data[j*w:j*w+w]
		for k := range a {
			if a[k] != b[k] {
				return false
			}
		}
		return true
	}
	return true
}

// asSlice reinterprets a byte slice as a slice of T (for width-specialised
// gathers). b must hold a whole number of T.
func asSlice[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// unsafeString views b as a string without copying; b must not change
// while the string is in use.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
