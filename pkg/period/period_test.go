package period

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// refDays is the time-package answer, used as an independent oracle.
func refDays(y int, m time.Month, d int) int32 {
	return int32(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want string // YYYY-MM-DD
	}{
		// YYYY
		{"2019", "2019-01-01"},
		{"0001", "0001-01-01"},
		{"9999", "9999-01-01"},
		{"1970", "1970-01-01"},
		// YYYYMM, YYYY-MM
		{"201903", "2019-03-01"},
		{"2019-03", "2019-03-01"},
		{"2019-12", "2019-12-01"},
		{"000101", "0001-01-01"},
		{"9999-12", "9999-12-01"},
		// YYYYMMDD, YYYY-MM-DD
		{"20190315", "2019-03-15"},
		{"2019-03-15", "2019-03-15"},
		{"9999-12-31", "9999-12-31"},
		{"0001-01-01", "0001-01-01"},
		// quarters
		{"2019Q1", "2019-01-01"},
		{"2019q2", "2019-04-01"},
		{"2019-Q3", "2019-07-01"},
		{"2019-q4", "2019-10-01"},
		// ISO weeks
		{"2019-W01", "2018-12-31"},
		{"2019-w10", "2019-03-04"},
		{"2015-W01", "2014-12-29"},
		{"2010-W01", "2010-01-04"},
		{"2009-W01", "2008-12-29"},
		{"2009-W53", "2009-12-28"},
		{"2020-W53", "2020-12-28"},
		{"2004-W53", "2004-12-27"}, // leap year starting on Thursday
		{"1992-W53", "1992-12-28"}, // leap year starting on Wednesday
		{"2026-W53", "2026-12-28"},
		{"0001-W01", "0001-01-01"}, // 0001-01-01 was a Monday
		{"9999-W52", "9999-12-27"}, // 9999-12-31 is a Friday
		// leap years
		{"2020-02-29", "2020-02-29"},
		{"2000-02-29", "2000-02-29"},
		{"20240229", "2024-02-29"},
		{"1600-02-29", "1600-02-29"},
		// pre-1970
		{"1969-12-31", "1969-12-31"},
		{"1900-01-01", "1900-01-01"},
		{"1066-10-14", "1066-10-14"},
		{"1582-10-10", "1582-10-10"}, // proleptic Gregorian: no Julian gap
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if f := Format(got); f != tc.want {
				t.Errorf("Parse(%q) = %d (%s), want %s", tc.in, got, f, tc.want)
			}
			want, _ := time.Parse(time.DateOnly, tc.want)
			if ref := refDays(want.Year(), want.Month(), want.Day()); got != ref {
				t.Errorf("Parse(%q) = %d, time package says %d", tc.in, got, ref)
			}
			gotB, errB := ParseBytes([]byte(tc.in))
			if errB != nil || gotB != got {
				t.Errorf("ParseBytes(%q) = %d, %v; Parse gave %d", tc.in, gotB, errB, got)
			}
		})
	}
}

func TestParseKnownValues(t *testing.T) {
	for in, want := range map[string]int32{
		"1970-01-01": 0,
		"1970-01-02": 1,
		"1969-12-31": -1,
		"2000-03-01": 11017,
		"0001-01-01": -719162,
		"9999-12-31": 2932896,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const unrecognised = "unrecognised period format; want YYYY, YYYY-MM, YYYYMM, YYYY-MM-DD, YYYYMMDD, YYYY-Qn or YYYY-Www"
	tests := []struct {
		in, want string // want is the full cause
	}{
		// format
		{"", "empty period"},
		{" 2019", "surrounding whitespace not allowed"},
		{"2019 ", "surrounding whitespace not allowed"},
		{"2019\n", "surrounding whitespace not allowed"},
		{"\t2019-03", "surrounding whitespace not allowed"},
		{"19", unrecognised},
		{"201", unrecognised},
		{"20190", unrecognised},
		{"2019-3", unrecognised},
		{"2019/03", unrecognised},
		{"2019-03-1", unrecognised},
		{"2019-0a", unrecognised},
		{"2019-03-15T00:00", unrecognised},
		{"2019-0315", unrecognised},
		{"201903-15", unrecognised},
		{"+2019", unrecognised},
		{"-2019", unrecognised},
		{"201a", unrecognised},
		{"２０１９", unrecognised}, // non-ASCII digits
		{"2019-M03", unrecognised},
		{"2019QA", unrecognised},
		{"2019-Q", unrecognised},
		{"2019Q ", "surrounding whitespace not allowed"},
		{"2019W01", unrecognised},
		{"2019-X01", unrecognised},
		{"2019-W1", unrecognised},
		{"2019-W1a", unrecognised},
		{"2019 03", unrecognised},
		// year
		{"0000", "year 0000 out of range 0001-9999"},
		{"0000-01-01", "year 0000 out of range 0001-9999"},
		// month
		{"2019-13", "month 13 out of range 1-12"},
		{"2019-00", "month 0 out of range 1-12"},
		{"201900", "month 0 out of range 1-12"},
		{"2019-13-01", "month 13 out of range 1-12"},
		{"20199901", "month 99 out of range 1-12"},
		// day
		{"2019-02-29", "day 29 out of range for 2019-02"},
		{"1900-02-29", "day 29 out of range for 1900-02"},
		{"2020-02-30", "day 30 out of range for 2020-02"},
		{"2019-04-31", "day 31 out of range for 2019-04"},
		{"2019-01-32", "day 32 out of range for 2019-01"},
		{"2019-01-00", "day 0 out of range for 2019-01"},
		{"20190230", "day 30 out of range for 2019-02"},
		// quarter
		{"2019Q0", "quarter 0 out of range 1-4"},
		{"2019Q5", "quarter 5 out of range 1-4"},
		{"2019-q9", "quarter 9 out of range 1-4"},
		// week
		{"2019-W00", "week 00 out of range 01-53"},
		{"2019-W54", "week 54 out of range 01-53"},
		{"2021-W53", "week 53 out of range for 2021: that ISO year has 52 weeks"},
		{"2019-W53", "week 53 out of range for 2019: that ISO year has 52 weeks"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error %q", tc.in, tc.want)
			}
			want := fmt.Sprintf("period %q: %s", tc.in, tc.want)
			if err.Error() != want {
				t.Errorf("Parse(%q) error\n got %s\nwant %s", tc.in, err, want)
			}
			_, errB := ParseBytes([]byte(tc.in))
			if errB == nil || errB.Error() != want {
				t.Errorf("ParseBytes(%q) error %v, want %s", tc.in, errB, want)
			}
		})
	}
}

func TestParseErrorUnwraps(t *testing.T) {
	_, err := Parse("2019 ")
	if !errors.Is(err, errWhitespace) {
		t.Errorf("Parse error %v does not wrap its cause", err)
	}
}

// TestISOWeeksAgainstTime checks every week of every year against the time
// package's ISOWeek.
func TestISOWeeksAgainstTime(t *testing.T) {
	for y := 1; y <= 9999; y++ {
		_, lastWeek := time.Date(y, 12, 28, 0, 0, 0, 0, time.UTC).ISOWeek()
		for w := 1; w <= 53; w++ {
			s := fmt.Sprintf("%04d-W%02d", y, w)
			got, err := Parse(s)
			if w > lastWeek {
				if err == nil {
					t.Fatalf("Parse(%q) = %s, want error (year has %d weeks)", s, Format(got), lastWeek)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", s, err)
			}
			tm := time.Unix(int64(got)*86400, 0).UTC()
			gy, gw := tm.ISOWeek()
			if tm.Weekday() != time.Monday || gy != y || gw != w {
				t.Fatalf("Parse(%q) = %s, a %s in ISO week %d-W%02d", s, Format(got), tm.Weekday(), gy, gw)
			}
		}
	}
}

// TestCivilRoundTrip walks every day of years 0001-9999 (and beyond, for
// Format) checking that the two calendar conversions invert each other and
// advance one day at a time.
func TestCivilRoundTrip(t *testing.T) {
	start := daysFromCivil(1, 1, 1)
	end := daysFromCivil(9999, 12, 31)
	py, pm, pd := civil(start - 1)
	if py != 0 || pm != 12 || pd != 31 {
		t.Fatalf("day before 0001-01-01 is %d-%d-%d", py, pm, pd)
	}
	for d := start; d <= end; d++ {
		y, m, dd := civil(d)
		if back := daysFromCivil(int(y), m, dd); back != d {
			t.Fatalf("civil(%d) = %d-%d-%d, back to %d", d, y, m, dd, back)
		}
		next := dd == pd+1 && m == pm && y == py ||
			dd == 1 && pd == daysIn(int(py), pm) && (m == pm+1 && y == py || m == 1 && pm == 12 && y == py+1)
		if !next {
			t.Fatalf("day %d is %d-%02d-%02d after %d-%02d-%02d", d, y, m, dd, py, pm, pd)
		}
		if d%97 == 0 {
			if ref := refDays(int(y), time.Month(m), dd); int64(ref) != d {
				t.Fatalf("%d-%02d-%02d: %d, time package says %d", y, m, dd, d, ref)
			}
		}
		py, pm, pd = y, m, dd
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		days int32
		want string
	}{
		{0, "1970-01-01"},
		{-1, "1969-12-31"},
		{11017, "2000-03-01"},
		{-719162, "0001-01-01"},
		{-719163, "0000-12-31"},
		{-719529, "-0001-12-31"},
		{2932896, "9999-12-31"},
		{2932897, "10000-01-01"},
		{math.MaxInt32, "5881580-07-11"},
		{math.MinInt32, "-5877641-06-23"},
	}
	for _, tc := range tests {
		if got := Format(tc.days); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.days, got, tc.want)
		}
	}
}

func TestParseBytesDoesNotAllocate(t *testing.T) {
	inputs := [][]byte{
		[]byte("2019"), []byte("201903"), []byte("2019-03"), []byte("20190315"),
		[]byte("2019-03-15"), []byte("2019Q2"), []byte("2019-Q2"), []byte("2020-W53"),
	}
	var sink int32
	allocs := testing.AllocsPerRun(100, func() {
		for _, in := range inputs {
			d, err := ParseBytes(in)
			if err != nil {
				panic(err)
			}
			sink += d
		}
	})
	if allocs != 0 {
		t.Errorf("ParseBytes allocates %.1f times per run, want 0", allocs)
	}
	_ = sink
}

func BenchmarkParseBytes(b *testing.B) {
	inputs := [][]byte{
		[]byte("2019-03-15"), []byte("201903"), []byte("2019-Q2"), []byte("2020-W53"), []byte("2019"),
	}
	b.ReportAllocs()
	var sink int32
	for b.Loop() {
		for _, in := range inputs {
			d, _ := ParseBytes(in)
			sink += d
		}
	}
	_ = sink
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(inputs)), "ns/parse")
}

func ExampleParse() {
	for _, s := range []string{"2019", "2019-03", "20190315", "2019-Q2", "2015-W01", "2019-02-29"} {
		days, err := Parse(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-10s → %d = %s\n", s, days, Format(days))
	}
	// Output:
	// 2019       → 17897 = 2019-01-01
	// 2019-03    → 17956 = 2019-03-01
	// 20190315   → 17970 = 2019-03-15
	// 2019-Q2    → 17987 = 2019-04-01
	// 2015-W01   → 16433 = 2014-12-29
	// period "2019-02-29": day 29 out of range for 2019-02
}
