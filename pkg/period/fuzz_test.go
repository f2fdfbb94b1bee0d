package period

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// shapes is an independent statement of the accepted syntax: Parse must
// succeed only on these, and on these fail only for out-of-range fields.
var shapes = regexp.MustCompile(`^[0-9]{4}(|[0-9]{2}|-[0-9]{2}|[0-9]{4}|-[0-9]{2}-[0-9]{2}|-?[Qq][0-9]|-[Ww][0-9]{2})$`)

// oracle computes what Parse should return using the time package.
func oracle(s string) (days int32, ok bool) {
	if !shapes.MatchString(s) {
		return 0, false
	}
	y, _ := strconv.Atoi(s[:4])
	if y < 1 {
		return 0, false
	}
	rest := strings.TrimPrefix(s[4:], "-")
	switch {
	case rest == "":
		return refDays(y, 1, 1), true
	case rest[0] == 'Q' || rest[0] == 'q':
		q := int(rest[1] - '0')
		if q < 1 || q > 4 {
			return 0, false
		}
		return refDays(y, time.Month(3*q-2), 1), true
	case rest[0] == 'W' || rest[0] == 'w':
		w, _ := strconv.Atoi(rest[1:])
		// Walk from 4 January (always in week 1) to that week's Monday.
		jan4 := time.Date(y, 1, 4, 0, 0, 0, 0, time.UTC)
		mon := jan4.AddDate(0, 0, -((int(jan4.Weekday())+6)%7)+7*(w-1))
		if gy, gw := mon.ISOWeek(); gy != y || gw != w {
			return 0, false
		}
		return refDays(mon.Year(), mon.Month(), mon.Day()), true
	}
	digits := strings.ReplaceAll(rest, "-", "")
	m, _ := strconv.Atoi(digits[:2])
	d := 1
	if len(digits) == 4 {
		d, _ = strconv.Atoi(digits[2:])
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != m || t.Day() != d { // time.Date normalised it
		return 0, false
	}
	return refDays(y, time.Month(m), d), true
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"2019", "0001", "9999", "0000", "201903", "2019-03", "20190315", "2019-03-15",
		"2019Q1", "2019q4", "2019-Q2", "2019-q3", "2019Q5", "2019-W01", "2019-w52",
		"2015-W01", "2020-W53", "2021-W53", "2009-W53", "2019-W00", "9999-W52",
		"2020-02-29", "2019-02-29", "1900-02-29", "2000-02-29", "2019-13", "2019-04-31",
		"1969-12-31", "0001-01-01", "9999-12-31", "", " 2019", "2019\n", "２０１９",
		"2019-3", "2019/03", "-2019", "2019-03-15T00:00:00Z", "2019W01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		days, err := Parse(s)
		bdays, berr := ParseBytes([]byte(s))
		if bdays != days || (berr == nil) != (err == nil) || (err != nil && err.Error() != berr.Error()) {
			t.Fatalf("Parse(%q) = %d, %v but ParseBytes = %d, %v", s, days, err, bdays, berr)
		}

		want, ok := oracle(s)
		if ok != (err == nil) || days != want {
			t.Fatalf("Parse(%q) = %s, %v; oracle says %s, ok=%v", s, Format(days), err, Format(want), ok)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "period "+strconv.Quote(s)+": ") {
				t.Fatalf("Parse(%q) error %q does not name the input", s, err)
			}
			return
		}

		formatted := Format(days)
		if again, err := Parse(formatted); err != nil || again != days {
			t.Fatalf("Parse(%q) = %d = %s, which re-parses to %d, %v", s, days, formatted, again, err)
		}
		if len(s) == len("YYYY-MM-DD") && formatted != s {
			t.Fatalf("Format(Parse(%q)) = %q", s, formatted)
		}

		// The result starts a period in the input's year, or (ISO weeks)
		// up to 3 days before it.
		year, _ := strconv.Atoi(s[:4])
		y, m, d := civil(int64(days))
		isWeek := len(s) == 8 && s[4] == '-'
		isQuarter := strings.ContainsAny(s, "Qq")
		switch {
		case isWeek:
			jan1 := daysFromCivil(year, 1, 1)
			if weekday(int64(days)) != 0 || int64(days) < jan1-3 || int64(days) > daysFromCivil(year, 12, 31) {
				t.Fatalf("Parse(%q) = %s: not a Monday within 3 days of %04d", s, formatted, year)
			}
		case int(y) != year:
			t.Fatalf("Parse(%q) = %s: wrong year", s, formatted)
		case len(s) == 4 && (m != 1 || d != 1),
			isQuarter && (d != 1 || (m-1)%3 != 0),
			(len(s) == 6 || len(s) == 7) && d != 1:
			t.Fatalf("Parse(%q) = %s: not the start of the period", s, formatted)
		}
	})
}
