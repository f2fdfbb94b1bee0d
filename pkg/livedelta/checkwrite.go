package livedelta

import (
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/period"
)

// The columns of a normalized write (Schema.Write) read by position: the
// id and the period lead; the attributes and "given" close it.
const (
	WriteColumnSeriesID = 0
	WriteColumnPeriod   = 1
)

// CheckWrite checks a normalized write (rec, of schema s.Write) as
// Normalize checked it when it was accepted, for a write read back from
// outside the process (the log's replay): a record whose checksum holds
// may still have been written by a faulty or hostile writer, and what it
// holds would be served and compacted. It checks what a write holds on
// its own: ids present, non-empty and valid UTF-8; periods present and in
// years 0001-9999; "given" present and the same in every row; and, where
// given, each series' attributes constant within the record. (Whether the
// attributes agree with the dataset's was checked when the write was
// accepted, against the base of that moment; a later lake build may
// rightly have changed them.) The buffers must already be sound (the
// log's decoder checks them).
//
// Errors name the row and the column and wrap ErrInvalid.
func CheckWrite(s *Schema, rec arrow.RecordBatch) error {
	bad := func(row int, col, format string, a ...any) error {
		where := ""
		if row >= 0 {
			where = fmt.Sprintf("row %d, ", row)
		}
		return fmt.Errorf("%w: %scolumn %q: %s", ErrInvalid, where, col, fmt.Sprintf(format, a...))
	}
	if !rec.Schema().Equal(s.Write) {
		return fmt.Errorf("%w: schema %s, the dataset's writes have %s", ErrInvalid, rec.Schema(), s.Write)
	}
	n := int(rec.NumRows())

	ids, ok := rec.Column(WriteColumnSeriesID).(*array.String)
	if !ok {
		return bad(-1, index.ColSeriesID, "not utf8")
	}
	for i := 0; i < n; i++ {
		switch {
		case ids.IsNull(i):
			return bad(i, index.ColSeriesID, "null series id")
		case ids.ValueLen(i) == 0:
			return bad(i, index.ColSeriesID, "empty series id")
		}
	}
	if n > 0 {
		if err := ValidUTF8(ids.ValueOffsets(), ids.ValueBytes()); err != nil {
			return bad(-1, index.ColSeriesID, "%v", err)
		}
	}

	periods, ok := rec.Column(WriteColumnPeriod).(*array.Date32)
	if !ok {
		return bad(-1, datafile.ColPeriod, "not date32")
	}
	days := periods.Date32Values()
	for i := 0; i < n; i++ {
		switch {
		case periods.IsNull(i):
			return bad(i, datafile.ColPeriod, "null period")
		case !period.InRange(int32(days[i])):
			return bad(i, datafile.ColPeriod, "%s: %v", period.Format(int32(days[i])), period.ErrRange)
		}
	}

	last := rec.NumCols() - 1
	given, ok := rec.Column(int(last)).(*array.Boolean)
	if !ok {
		return bad(-1, ColGiven, "not boolean")
	}
	for i := 0; i < n; i++ {
		switch {
		case given.IsNull(i):
			return bad(i, ColGiven, "null")
		case given.Value(i) != given.Value(0):
			return bad(i, ColGiven, "%v here and %v in row 0: a write gives its attributes for every row or for none", given.Value(i), given.Value(0))
		}
	}
	if n == 0 || !given.Value(0) || len(s.Attrs) == 0 {
		return nil
	}
	attrs := rec.Columns()[int(last)-len(s.Attrs) : last]
	first := make(map[string]int, min(n, 1<<16))
	for i := 0; i < n; i++ {
		id := ids.Value(i)
		f, seen := first[id]
		if !seen {
			first[id] = i
			continue
		}
		for k, a := range attrs {
			if x, y := cellText(a, i), cellText(a, f); x != y {
				return bad(i, s.Attrs[k].Name, "series %q has %s here and %s in row %d: an attribute is constant within a series", id, x, y, f)
			}
		}
	}
	return nil
}

// ValidUTF8 reports the first value of a string column that is not valid
// UTF-8 (null slots included, as arrow-go's check does): offsets are the
// column's n+1 offsets (valid, non-decreasing), values its data from the
// first offset to the last.
//
// The values are valid one by one if and only if their concatenation is
// valid UTF-8 and no value starts inside a character of it, that is with
// a continuation byte (10xxxxxx): in valid UTF-8 a continuation byte only
// ever follows its character's lead byte. utf8.Valid runs through ASCII
// (what ids almost always are) a word at a time, 7 times faster than a
// check value by value for short ids.
func ValidUTF8(offsets []int32, values []byte) error {
	if utf8.Valid(values) && !startsInside(offsets, values) {
		return nil
	}
	base := offsets[0]
	for i := 1; i < len(offsets); i++ {
		if v := values[offsets[i-1]-base : offsets[i]-base]; !utf8.Valid(v) {
			return fmt.Errorf("row %d: the string is not valid UTF-8: %q", i-1, v)
		}
	}
	return nil
}

// startsInside reports whether a value after the first starts with a
// continuation byte of values.
func startsInside(offsets []int32, values []byte) bool {
	base := offsets[0]
	for _, o := range offsets[1 : len(offsets)-1] {
		if at := int(o - base); at < len(values) && values[at]&0xC0 == 0x80 {
			return true
		}
	}
	return false
}
