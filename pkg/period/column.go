package period

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ErrNull is the Err of a RowError for a null row: a row without a period
// cannot be placed in time, so it is rejected rather than silently dropped.
var ErrNull = errors.New("null period")

// RowError reports the first row of a column that could not be converted, so
// that a bad input file can be fixed without bisecting it.
type RowError struct {
	Row   int    // index within the array passed to Column
	Value string // the offending text ("null" for nulls); integers and timestamps as decimal digits
	Err   error  // what is wrong with Value; ErrNull for nulls
}

func (e *RowError) Error() string {
	return fmt.Sprintf("row %d: period %q: %v", e.Row, e.Value, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// UnsupportedTypeError is returned by Column for Arrow types that cannot hold
// a period. It is a configuration problem with the input, not a row problem.
type UnsupportedTypeError struct {
	Type arrow.DataType
}

func (e *UnsupportedTypeError) Error() string {
	return fmt.Sprintf("period: unsupported Arrow type %s; want date32, date64, timestamp, string, large_string, string_view, int16/32/64, uint16/32/64 or a dictionary of those", e.Type)
}

// badFunc is told about each null or unconvertible row. Column stops at the
// first one (it returns an error); dictionary values are converted leniently
// (it records and returns nil) because entries no row refers to must not fail
// the column.
type badFunc func(row int, value string, err error) error

// Column converts an Arrow array to date32 days into dst (len(dst) >= arr.Len()).
//
// Accepted types: date32; date64 and timestamp of any unit, floored to the
// day (timestamps without a time zone give the wall-clock date, with one the
// date in that zone); string, large_string and string_view in the forms Parse
// accepts; int16/32/64 and uint16/32/64 read as their decimal digits; and
// dictionaries of any of these, whose entries are converted once each so that
// a 15M-row dictionary column costs one table lookup per row.
//
// Every period lies in years 0001-9999 (InRange); a day outside them, which
// the binary forms can carry, is an unconvertible row (ErrRange).
//
// On the first null or unconvertible row Column returns a *RowError; for other
// types it returns an *UnsupportedTypeError. dst is partly written on error.
func Column(arr arrow.Array, dst []int32) error {
	n := arr.Len()
	if len(dst) < n {
		return fmt.Errorf("period: destination has length %d, array has %d rows", len(dst), n)
	}
	if err := convert(arr, dst[:n], func(row int, value string, err error) error {
		// Clone: string values alias Arrow buffers, which may be released
		// (or reused by a non-Go allocator) before the error is read.
		return &RowError{Row: row, Value: strings.Clone(value), Err: err}
	}); err != nil {
		return err
	}
	return checkRange(dst[:n])
}

// checkRange returns a *RowError for the first day outside years
// 0001-9999. Null rows were refused before it, so every slot is a value.
func checkRange(days []int32) error {
	for i, d := range days {
		if !InRange(d) {
			return &RowError{Row: i, Value: Format(d), Err: ErrRange}
		}
	}
	return nil
}

// convert requires len(dst) == arr.Len().
func convert(arr arrow.Array, dst []int32, bad badFunc) error {
	switch a := arr.(type) {
	case *array.Date32:
		return convertDate32(a, dst, bad)
	case *array.Date64:
		return convertDate64(a, dst, bad)
	case *array.Timestamp:
		return convertTimestamp(a, dst, bad)
	case *array.String:
		return convertText(a, a.Value, dst, bad)
	case *array.LargeString:
		return convertText(a, a.Value, dst, bad)
	case *array.StringView:
		return convertText(a, a.Value, dst, bad)
	case *array.Int16:
		return convertSigned(a, a.Values(), dst, bad)
	case *array.Int32:
		return convertSigned(a, a.Values(), dst, bad)
	case *array.Int64:
		return convertSigned(a, a.Values(), dst, bad)
	case *array.Uint16:
		return convertUnsigned(a, a.Values(), dst, bad)
	case *array.Uint32:
		return convertUnsigned(a, a.Values(), dst, bad)
	case *array.Uint64:
		return convertUnsigned(a, a.Values(), dst, bad)
	case *array.Dictionary:
		return convertDict(a, dst, bad)
	case *array.Null:
		// An all-null column is what readers infer for an empty CSV column;
		// report it as a null row rather than as a type mismatch.
		for i := range dst {
			if err := bad(i, "null", ErrNull); err != nil {
				return err
			}
			dst[i] = 0
		}
		return nil
	}
	return &UnsupportedTypeError{Type: arr.DataType()}
}

// nullAt reports whether row i of arr is null. hasNulls is arr.NullN() > 0,
// hoisted out of the row loop.
func nullAt(arr arrow.Array, hasNulls bool, i int) bool {
	return hasNulls && arr.IsNull(i)
}

func convertDate32(a *array.Date32, dst []int32, bad badFunc) error {
	vals := a.Values()[:len(dst)]
	for i, v := range vals {
		dst[i] = int32(v)
	}
	if a.NullN() > 0 {
		for i := range dst {
			if a.IsNull(i) {
				if err := bad(i, "null", ErrNull); err != nil {
					return err
				}
				dst[i] = 0
			}
		}
	}
	return nil
}

const msPerDay = 86_400_000

func convertDate64(a *array.Date64, dst []int32, bad badFunc) error {
	hasNulls := a.NullN() > 0
	for i, v := range a.Values()[:len(dst)] {
		if nullAt(a, hasNulls, i) {
			if err := bad(i, "null", ErrNull); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		d := floorDiv(int64(v), msPerDay)
		if d < math.MinInt32 || d > math.MaxInt32 {
			if err := bad(i, strconv.FormatInt(int64(v), 10), errors.New("date64 value outside the date32 range")); err != nil {
				return err
			}
			d = 0
		}
		dst[i] = int32(d)
	}
	return nil
}

func convertTimestamp(a *array.Timestamp, dst []int32, bad badFunc) error {
	typ := a.DataType().(*arrow.TimestampType)
	perSec := int64(1)
	switch typ.Unit {
	case arrow.Millisecond:
		perSec = 1e3
	case arrow.Microsecond:
		perSec = 1e6
	case arrow.Nanosecond:
		perSec = 1e9
	}
	perDay := perSec * 86400

	var zc *zoneCache
	if typ.TimeZone != "" {
		// GetZone is time.LoadLocation plus Arrow's fixed "+HH:MM" offsets.
		loc, err := typ.GetZone()
		if err != nil {
			return fmt.Errorf("period: %s: unknown time zone %q: %w", typ, typ.TimeZone, err)
		}
		if loc != time.UTC {
			zc = &zoneCache{loc: loc}
		}
	}

	hasNulls := a.NullN() > 0
	for i, v := range a.Values()[:len(dst)] {
		if nullAt(a, hasNulls, i) {
			if err := bad(i, "null", ErrNull); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		var d int64
		if zc == nil {
			d = floorDiv(int64(v), perDay)
		} else {
			d = zc.localDays(floorDiv(int64(v), perSec))
		}
		if d < math.MinInt32 || d > math.MaxInt32 {
			if err := bad(i, strconv.FormatInt(int64(v), 10), fmt.Errorf("%s value outside the date32 range", typ)); err != nil {
				return err
			}
			d = 0
		}
		dst[i] = int32(d)
	}
	return nil
}

// zoneCache remembers the UTC offset of the zone period (between two
// transitions) that the previous instant fell in. Timestamp columns are
// usually clustered in time, so nearly every row is a range check instead of
// a time.Time conversion.
type zoneCache struct {
	loc    *time.Location
	valid  bool
	lo, hi int64 // offset applies to Unix seconds in [lo, hi)
	off    int64 // seconds east of UTC
}

// localDays returns the day number of the local date of Unix second sec.
func (z *zoneCache) localDays(sec int64) int64 {
	d := floorDiv(sec, 86400)
	if d < math.MinInt32-1 || d > math.MaxInt32+1 {
		return d // out of range whatever the offset; keep time.Unix away from overflow
	}
	if !z.valid || sec < z.lo || sec >= z.hi {
		t := time.Unix(sec, 0).In(z.loc)
		_, off := t.Zone()
		start, end := t.ZoneBounds()
		z.lo, z.hi = math.MinInt64, math.MaxInt64
		if !start.IsZero() {
			z.lo = start.Unix()
		}
		if !end.IsZero() {
			z.hi = end.Unix()
		}
		z.off = int64(off)
		z.valid = true
	}
	// Split before adding the offset so extreme values cannot overflow.
	return d + floorDiv(sec-d*86400+z.off, 86400)
}

// convertText handles the three string layouts; value is the array's Value
// method, which returns a view of the Arrow buffer without copying. Inputs
// sorted by period repeat each value many times in a row, so a repeat of the
// previous value reuses its result.
func convertText(a arrow.Array, value func(int) string, dst []int32, bad badFunc) error {
	var prev string
	var prevDays int32
	havePrev := false
	hasNulls := a.NullN() > 0
	for i := range dst {
		if nullAt(a, hasNulls, i) {
			if err := bad(i, "null", ErrNull); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		s := value(i)
		if havePrev && s == prev {
			dst[i] = prevDays
			continue
		}
		d, err := parse(s)
		if err != nil {
			if err := bad(i, s, err); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		dst[i] = d
		prev, prevDays, havePrev = s, d, true
	}
	return nil
}

// convertSigned renders each integer into a stack buffer and parses that, so
// integer columns follow exactly the string rules and messages. Runs of equal
// values (sorted or repeated periods) skip the parse.
func convertSigned[T int16 | int32 | int64](a arrow.Array, vals []T, dst []int32, bad badFunc) error {
	var buf [20]byte
	var prev T
	var prevDays int32
	havePrev := false
	hasNulls := a.NullN() > 0
	for i, v := range vals[:len(dst)] {
		if nullAt(a, hasNulls, i) {
			if err := bad(i, "null", ErrNull); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		if havePrev && v == prev {
			dst[i] = prevDays
			continue
		}
		b := strconv.AppendInt(buf[:0], int64(v), 10)
		d, err := parse(b)
		if err != nil {
			if err := bad(i, string(b), err); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		dst[i] = d
		prev, prevDays, havePrev = v, d, true
	}
	return nil
}

// convertUnsigned is convertSigned for unsigned types.
func convertUnsigned[T uint16 | uint32 | uint64](a arrow.Array, vals []T, dst []int32, bad badFunc) error {
	var buf [20]byte
	var prev T
	var prevDays int32
	havePrev := false
	hasNulls := a.NullN() > 0
	for i, v := range vals[:len(dst)] {
		if nullAt(a, hasNulls, i) {
			if err := bad(i, "null", ErrNull); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		if havePrev && v == prev {
			dst[i] = prevDays
			continue
		}
		b := strconv.AppendUint(buf[:0], uint64(v), 10)
		d, err := parse(b)
		if err != nil {
			if err := bad(i, string(b), err); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		dst[i] = d
		prev, prevDays, havePrev = v, d, true
	}
	return nil
}

// convertDict converts each dictionary entry once, then maps indices. Bad
// entries are recorded rather than reported, since only entries that some
// row refers to may fail the column.
func convertDict(a *array.Dictionary, dst []int32, bad badFunc) error {
	dict := a.Dictionary()
	vals := make([]int32, dict.Len())
	var entryErrs []*RowError // nil unless some entry is bad
	err := convert(dict, vals, func(row int, value string, err error) error {
		if entryErrs == nil {
			entryErrs = make([]*RowError, len(vals))
		}
		entryErrs[row] = &RowError{Row: row, Value: strings.Clone(value), Err: err}
		return nil
	})
	if err != nil {
		var ute *UnsupportedTypeError
		if errors.As(err, &ute) {
			return &UnsupportedTypeError{Type: a.DataType()}
		}
		return err
	}
	switch idx := a.Indices().(type) {
	case *array.Int8:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	case *array.Uint8:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	case *array.Int16:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	case *array.Uint16:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	case *array.Int32:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	case *array.Uint32:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	case *array.Int64:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	case *array.Uint64:
		return mapIndices(a, idx.Values(), vals, entryErrs, dst, bad)
	}
	return &UnsupportedTypeError{Type: a.DataType()}
}

type indexType interface {
	int8 | uint8 | int16 | uint16 | int32 | uint32 | int64 | uint64
}

func mapIndices[T indexType](a *array.Dictionary, idx []T, vals []int32, entryErrs []*RowError, dst []int32, bad badFunc) error {
	idx = idx[:len(dst)]
	n := uint64(len(vals))
	if a.NullN() == 0 && entryErrs == nil {
		// Hot path: one bounds check and one load per row.
		for i, k := range idx {
			if uint64(k) >= n { // negative signed indices wrap to huge values
				return badIndex(i, k, n, bad)
			}
			dst[i] = vals[k]
		}
		return nil
	}
	hasNulls := a.NullN() > 0
	for i, k := range idx {
		if nullAt(a, hasNulls, i) {
			if err := bad(i, "null", ErrNull); err != nil {
				return err
			}
			dst[i] = 0
			continue
		}
		if uint64(k) >= n {
			return badIndex(i, k, n, bad)
		}
		if entryErrs != nil {
			if e := entryErrs[k]; e != nil {
				if err := bad(i, e.Value, e.Err); err != nil {
					return err
				}
				dst[i] = 0
				continue
			}
		}
		dst[i] = vals[k]
	}
	return nil
}

// badIndex reports a corrupt dictionary index. It always stops: nothing after
// a corrupt index can be trusted.
func badIndex[T indexType](i int, k T, n uint64, bad badFunc) error {
	err := fmt.Errorf("dictionary index %d out of range for %d entries", k, n)
	if rerr := bad(i, fmt.Sprint(k), err); rerr != nil {
		return rerr
	}
	return &RowError{Row: i, Value: fmt.Sprint(k), Err: err}
}
