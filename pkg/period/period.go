// Package period converts the period column of lake inputs into Arrow date32
// values (days since 1970-01-01).
//
// Every period is stored as the date of its first day, so daily, monthly,
// quarterly, weekly and yearly series share one sortable, range-filterable
// column type, and the snapshot builder, the Flight ticket parser and the CLI
// --from/--to flags all agree on what "2019-03" means. End gives the last
// day of the period a string names, for inclusive upper bounds ("--to
// 2019-03" includes 2019-03-31).
//
// # Accepted text forms
//
//	YYYY                  2019        → 2019-01-01
//	YYYYMM, YYYY-MM       201903      → 2019-03-01
//	YYYYMMDD, YYYY-MM-DD  20190315    → 2019-03-15
//	YYYYQn, YYYY-Qn       2019Q2      → 2019-04-01 (n 1-4; q also accepted)
//	YYYY-Www              2020-W53    → 2020-12-28 (ISO 8601 week; w also accepted)
//
// An ISO week maps to its Monday, which for week 1 may lie in the previous
// calendar year (2015-W01 → 2014-12-29). Week 53 is accepted only for ISO
// years that have 53 weeks.
//
// Parsing is strict: exactly four year digits in 0001-9999, ASCII digits only,
// no sign and no surrounding whitespace; months and days are validated against
// the Gregorian calendar including leap years. Lake inputs are machine
// generated, so anything else is far more likely a bug upstream than a format
// worth guessing at.
//
// Integer columns are read as their decimal digits under the same rules
// (2019 → YYYY, 201903 → YYYYMM, 20190315 → YYYYMMDD), which is how CSV
// readers tend to type such columns.
//
// The per-row path uses integer calendar arithmetic rather than time.Time:
// it is several times faster, does not allocate, and has no time zone to get
// wrong.
package period

import (
	"errors"
	"fmt"
)

// The range of periods every servingsnap file and request holds: years
// 0001-9999, the years Parse, tickets and SQL name. date32 can hold about
// 5.8 million years either side of 1970, so a date32, date64, timestamp or
// integer column may carry days outside it; Column refuses those (ErrRange).
const (
	MinDays int32 = -719162 // 0001-01-01
	MaxDays int32 = 2932896 // 9999-12-31
)

// ErrRange is the Err of a RowError for a period outside MinDays..MaxDays.
var ErrRange = errors.New("period outside 0001-01-01..9999-12-31")

// InRange reports whether days is within MinDays..MaxDays.
func InRange(days int32) bool { return days >= MinDays && days <= MaxDays }

// Parse parses one period string into date32 days; the result is the START of
// the period. Errors name the input and say what is wrong with it.
func Parse(s string) (int32, error) {
	d, err := parse(s)
	if err != nil {
		return 0, fmt.Errorf("period %q: %w", s, err)
	}
	return d, nil
}

// End parses one period string into date32 days like Parse, but returns the
// LAST day of the period: "2020" → 2020-12-31, "2020-02" → 2020-02-29,
// "2020Q2" → 2020-06-30, "2020-W53" → 2021-01-03 (the Sunday), a day → that
// day. It accepts exactly what Parse accepts, with the same errors, so an
// inclusive range "from a to b" is [Parse(a), End(b)]. End(s)+1 is the
// first day of the next period of the same kind.
func End(s string) (int32, error) {
	start, err := Parse(s)
	if err != nil {
		return 0, err
	}
	y, m, _ := civil(int64(start))
	switch n := len(s); {
	case n == 4: // YYYY
		return int32(daysFromCivil(int(y)+1, 1, 1) - 1), nil
	case n == 6 && (s[4] == 'Q' || s[4] == 'q'), n == 7 && (s[5] == 'Q' || s[5] == 'q'): // quarter
		return monthsLater(int(y), m, 3) - 1, nil
	case n == 6 || n == 7: // YYYYMM, YYYY-MM
		return monthsLater(int(y), m, 1) - 1, nil
	case n == 8 && s[4] == '-': // YYYY-Www: Monday to Sunday
		return start + 6, nil
	default: // YYYYMMDD, YYYY-MM-DD
		return start, nil
	}
}

// monthsLater is the first day of the month k (1-12) months after y-m.
func monthsLater(y, m, k int) int32 {
	if m += k; m > 12 {
		y, m = y+1, m-12
	}
	return int32(daysFromCivil(y, m, 1))
}

// Format renders date32 days as YYYY-MM-DD, the canonical form that Parse
// maps back to the same day. Days before year 1 or after 9999, which Parse
// never returns but date32 columns may hold, are rendered with a leading '-'
// or more year digits rather than clamped, so that logs show the real value.
func Format(days int32) string {
	y, m, d := civil(int64(days))
	buf := make([]byte, 0, 16)
	if y < 0 {
		buf = append(buf, '-')
		y = -y
	}
	switch {
	case y < 10:
		buf = append(buf, '0', '0', '0')
	case y < 100:
		buf = append(buf, '0', '0')
	case y < 1000:
		buf = append(buf, '0')
	}
	buf = appendInt(buf, y)
	buf = append(buf, '-', byte('0'+m/10), byte('0'+m%10), '-', byte('0'+d/10), byte('0'+d%10))
	return string(buf)
}

func appendInt(b []byte, v int64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// errFormat is shared so that the common failure does not allocate while the
// message still lists every accepted form.
var errFormat = errors.New("unrecognised period format; want YYYY, YYYY-MM, YYYYMM, YYYY-MM-DD, YYYYMMDD, YYYY-Qn or YYYY-Www")

var (
	errEmpty      = errors.New("empty period")
	errWhitespace = errors.New("surrounding whitespace not allowed")
)

// text is what parse accepts, so that string and []byte inputs share one
// implementation without copying.
type text interface{ ~string | ~[]byte }

// parse returns date32 days for s. Errors do not mention s, so s never
// escapes and the caller decides how to present it.
func parse[T text](s T) (int32, error) {
	n := len(s)
	if n < 4 {
		return 0, formatErr(s)
	}
	y, ok := digits4(s)
	if !ok {
		return 0, formatErr(s)
	}
	if y == 0 {
		return 0, errors.New("year 0000 out of range 0001-9999")
	}
	switch n {
	case 4: // YYYY
		return int32(daysFromCivil(y, 1, 1)), nil
	case 6: // YYYYMM, YYYYQn
		if s[4] == 'Q' || s[4] == 'q' {
			if q := s[5] - '0'; q <= 9 {
				return quarter(y, int(q))
			}
			return 0, formatErr(s)
		}
		m, ok := digits2(s, 4)
		if !ok {
			return 0, formatErr(s)
		}
		return date(y, m, 1)
	case 7: // YYYY-MM, YYYY-Qn
		if s[4] != '-' {
			return 0, formatErr(s)
		}
		if s[5] == 'Q' || s[5] == 'q' {
			if q := s[6] - '0'; q <= 9 {
				return quarter(y, int(q))
			}
			return 0, formatErr(s)
		}
		m, ok := digits2(s, 5)
		if !ok {
			return 0, formatErr(s)
		}
		return date(y, m, 1)
	case 8: // YYYYMMDD, YYYY-Www
		if s[4] == '-' {
			if s[5] != 'W' && s[5] != 'w' {
				return 0, formatErr(s)
			}
			w, ok := digits2(s, 6)
			if !ok {
				return 0, formatErr(s)
			}
			return isoWeek(y, w)
		}
		m, ok1 := digits2(s, 4)
		d, ok2 := digits2(s, 6)
		if !ok1 || !ok2 {
			return 0, formatErr(s)
		}
		return date(y, m, d)
	case 10: // YYYY-MM-DD
		if s[4] != '-' || s[7] != '-' {
			return 0, formatErr(s)
		}
		m, ok1 := digits2(s, 5)
		d, ok2 := digits2(s, 8)
		if !ok1 || !ok2 {
			return 0, formatErr(s)
		}
		return date(y, m, d)
	}
	return 0, formatErr(s)
}

// formatErr picks a more specific message for the mistakes people actually
// make (empty cells, padded cells) before falling back to the list of forms.
func formatErr[T text](s T) error {
	if len(s) == 0 {
		return errEmpty
	}
	if isSpace(s[0]) || isSpace(s[len(s)-1]) {
		return errWhitespace
	}
	return errFormat
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func digits4[T text](s T) (int, bool) {
	a, b, c, d := s[0]-'0', s[1]-'0', s[2]-'0', s[3]-'0'
	if a > 9 || b > 9 || c > 9 || d > 9 {
		return 0, false
	}
	return int(a)*1000 + int(b)*100 + int(c)*10 + int(d), true
}

func digits2[T text](s T, i int) (int, bool) {
	a, b := s[i]-'0', s[i+1]-'0'
	if a > 9 || b > 9 {
		return 0, false
	}
	return int(a)*10 + int(b), true
}

func date(y, m, d int) (int32, error) {
	if m < 1 || m > 12 {
		return 0, fmt.Errorf("month %d out of range 1-12", m)
	}
	if d < 1 || d > daysIn(y, m) {
		return 0, fmt.Errorf("day %d out of range for %04d-%02d", d, y, m)
	}
	return int32(daysFromCivil(y, m, d)), nil
}

func quarter(y, q int) (int32, error) {
	if q < 1 || q > 4 {
		return 0, fmt.Errorf("quarter %d out of range 1-4", q)
	}
	return int32(daysFromCivil(y, 3*q-2, 1)), nil
}

// isoWeek returns the Monday of ISO week w of ISO year y. Week 1 is the week
// containing 4 January, so its Monday is found from that day's weekday.
func isoWeek(y, w int) (int32, error) {
	if w < 1 || w > 53 {
		return 0, fmt.Errorf("week %02d out of range 01-53", w)
	}
	start := isoYearStart(y)
	if w == 53 && isoYearStart(y+1)-start != 53*7 {
		return 0, fmt.Errorf("week 53 out of range for %04d: that ISO year has 52 weeks", y)
	}
	return int32(start + int64(w-1)*7), nil
}

// isoYearStart returns the Monday of ISO week 1 of year y.
func isoYearStart(y int) int64 {
	jan4 := daysFromCivil(y, 1, 4)
	return jan4 - weekday(jan4)
}

// weekday returns 0 for Monday … 6 for Sunday; 1970-01-01 was a Thursday.
func weekday(days int64) int64 {
	return floorMod(days+3, 7)
}

var monthDays = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func daysIn(y, m int) int {
	if m == 2 && isLeap(y) {
		return 29
	}
	return monthDays[m]
}

func isLeap(y int) bool {
	return y%4 == 0 && (y%100 != 0 || y%400 == 0)
}

// daysFromCivil is Howard Hinnant's days_from_civil for the proleptic
// Gregorian calendar (http://howardhinnant.github.io/date_algorithms.html),
// restricted to y >= 1 so that it can use unsigned division, which roughly
// halves the cost of a parse. m and d must be valid.
func daysFromCivil(y, m, d int) int64 {
	yy, mm := uint32(y), uint32(m)
	if mm <= 2 { // count from March so the leap day ends the year
		yy--
		mm += 9
	} else {
		mm -= 3
	}
	era := yy / 400
	yoe := yy - era*400                    // [0, 399]
	doy := (153*mm+2)/5 + uint32(d) - 1    // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return int64(era)*146097 + int64(doe) - 719468
}

// civil is the inverse of daysFromCivil.
func civil(days int64) (y int64, m, d int) {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100) // [0, 365]
	mp := (5*doy + 2) / 153                  // [0, 11]
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// floorDiv rounds toward negative infinity, which is what turns a pre-1970
// instant into the day it falls on (Go's / truncates toward zero).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	return a - floorDiv(a, b)*b
}
