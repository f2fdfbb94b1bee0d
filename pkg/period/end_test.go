package period

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEnd(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2020", "2020-12-31"},
		{"0001", "0001-12-31"},
		{"9999", "9999-12-31"},
		{"2019-02", "2019-02-28"},
		{"202002", "2020-02-29"},
		{"2020-02", "2020-02-29"},
		{"1900-02", "1900-02-28"},
		{"2019-12", "2019-12-31"},
		{"999912", "9999-12-31"},
		{"2019Q1", "2019-03-31"},
		{"2020Q1", "2020-03-31"},
		{"2020Q2", "2020-06-30"},
		{"2020-Q2", "2020-06-30"},
		{"2019q4", "2019-12-31"},
		{"2019-Q2", "2019-06-30"},
		{"2019-W01", "2019-01-06"},
		{"2015-w53", "2016-01-03"},
		{"2020-W53", "2021-01-03"},
		{"2015-W01", "2015-01-04"}, // starts 2014-12-29
		{"2019-03-15", "2019-03-15"},
		{"20190315", "2019-03-15"},
		{"2020-02-29", "2020-02-29"},
	} {
		got, err := End(tc.in)
		if err != nil {
			t.Fatalf("End(%q): %v", tc.in, err)
		}
		if Format(got) != tc.want {
			t.Errorf("End(%q) = %s, want %s", tc.in, Format(got), tc.want)
		}
		if start, _ := Parse(tc.in); got < start {
			t.Errorf("End(%q) = %s is before its start %s", tc.in, Format(got), Format(start))
		}
	}
}

// TestEndRefusesWhatParseRefuses: End accepts exactly what Parse accepts,
// with Parse's error.
func TestEndRefusesWhatParseRefuses(t *testing.T) {
	for _, s := range []string{"", "2019-W53", "2019Q5", "2019-13", "2019-02-30", " 2019", "0000", "2019-3", "2019W01", "201"} {
		_, perr := Parse(s)
		_, eerr := End(s)
		if perr == nil || eerr == nil || perr.Error() != eerr.Error() {
			t.Errorf("%q: Parse error %v, End error %v; want the same error", s, perr, eerr)
		}
	}
}

// next names the period after s in the same form, computed from the text
// with the time package (independently of End). ok is false past 9999.
func next(s string) (string, bool) {
	y, _ := strconv.Atoi(s[:4])
	switch n := len(s); {
	case n == 4:
		return fmt.Sprintf("%04d", y+1), y < 9999
	case n == 6 && strings.ContainsAny(s[4:5], "Qq"), n == 7 && strings.ContainsAny(s[5:6], "Qq"):
		q := int(s[n-1] - '0')
		if q == 4 {
			y, q = y+1, 0
		}
		return fmt.Sprintf("%04d%s%d", y, s[4:n-1], q+1), y <= 9999
	case n == 6 || n == 7:
		m, _ := strconv.Atoi(s[n-2:])
		t := time.Date(y, time.Month(m)+1, 1, 0, 0, 0, 0, time.UTC)
		return fmt.Sprintf("%04d%s%02d", t.Year(), s[4:n-2], int(t.Month())), t.Year() <= 9999
	case n == 8 && s[4] == '-':
		w, _ := strconv.Atoi(s[6:])
		if n := fmt.Sprintf("%04d%s%02d", y, s[4:6], w+1); w < 52 || oracleOK(n) {
			return n, true
		}
		return fmt.Sprintf("%04d%s01", y+1, s[4:6]), y < 9999
	default:
		layout := "20060102"
		if n == 10 {
			layout = "2006-01-02"
		}
		t, err := time.Parse(layout, s)
		if err != nil {
			return "", false
		}
		t = t.AddDate(0, 0, 1)
		return t.Format(layout), t.Year() <= 9999
	}
}

func oracleOK(s string) bool { _, ok := oracle(s); return ok }

// checkEnd is the property: for every s Parse accepts, End(s) ≥ Parse(s),
// and End(s) is the day before the next period's start.
func checkEnd(t *testing.T, s string) {
	start, err := Parse(s)
	end, eerr := End(s)
	if (err == nil) != (eerr == nil) {
		t.Fatalf("%q: Parse error %v, End error %v", s, err, eerr)
	}
	if err != nil {
		return
	}
	if end < start {
		t.Fatalf("End(%q) = %s before Parse = %s", s, Format(end), Format(start))
	}
	n, ok := next(s)
	if !ok {
		return
	}
	ns, err := Parse(n)
	if err != nil {
		t.Fatalf("next(%q) = %q does not parse: %v", s, n, err)
	}
	if end+1 != ns {
		t.Fatalf("End(%q) = %s, but the next period %q starts %s", s, Format(end), n, Format(ns))
	}
}

// TestEndProperty walks every period of every form over a few years,
// including the ends of the accepted range.
func TestEndProperty(t *testing.T) {
	for _, y := range []int{1, 2, 1899, 1900, 1999, 2000, 2015, 2019, 2020, 2021, 2100, 9998, 9999} {
		checkEnd(t, fmt.Sprintf("%04d", y))
		for q := 1; q <= 4; q++ {
			checkEnd(t, fmt.Sprintf("%04dQ%d", y, q))
			checkEnd(t, fmt.Sprintf("%04d-q%d", y, q))
		}
		for m := 1; m <= 12; m++ {
			checkEnd(t, fmt.Sprintf("%04d%02d", y, m))
			checkEnd(t, fmt.Sprintf("%04d-%02d", y, m))
		}
		for w := 1; w <= 53; w++ {
			checkEnd(t, fmt.Sprintf("%04d-W%02d", y, w))
		}
		for d := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() == y; d = d.AddDate(0, 0, 1) {
			checkEnd(t, d.Format("2006-01-02"))
			checkEnd(t, d.Format("20060102"))
		}
	}
}

func FuzzEnd(f *testing.F) {
	for _, s := range []string{"2019", "9999", "201902", "2020-02", "2019Q4", "2019-q1", "2020-W53", "2019-W52", "20191231", "9999-12-31", "2019-W53", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkEnd(t, s)
	})
}
