package lakegen

import (
	"fmt"
	"strconv"
	"time"
)

// Frequency is a series' observation frequency.
type Frequency uint8

// The frequencies, in the order of their letters D, W, M, Q, A.
const (
	Daily Frequency = iota
	Weekly
	Monthly
	Quarterly
	Annual
	numFreq
)

var (
	freqNames   = [numFreq]string{"daily", "weekly", "monthly", "quarterly", "annual"}
	freqWords   = [numFreq]string{"Daily", "Weekly", "Monthly", "Quarterly", "Annual"}
	freqLetters = [numFreq]string{"D", "W", "M", "Q", "A"}
)

// String returns the frequency column value: daily, weekly, monthly,
// quarterly or annual.
func (f Frequency) String() string {
	if f < numFreq {
		return freqNames[f]
	}
	return "Frequency(" + strconv.Itoa(int(f)) + ")"
}

// Letter returns the series-id suffix letter: D, W, M, Q or A.
func (f Frequency) Letter() string {
	if f < numFreq {
		return freqLetters[f]
	}
	return "?"
}

// periodList is the calendar of one frequency in one year: the period strings
// in EIA API style and the matching DATE values (days since 1970-01-01 of the
// period's first day), in chronological order.
type periodList struct {
	text []string
	days []int32
}

// yearCalendar holds the periods of every frequency in one year.
type yearCalendar [numFreq]periodList

func epochDays(t time.Time) int32 { return int32(t.Unix() / 86400) }

// newYearCalendar lists the periods of year y: weekdays, Mondays, months,
// quarters and the year itself.
func newYearCalendar(y int) *yearCalendar {
	var c yearCalendar
	for d := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() == y; d = d.AddDate(0, 0, 1) {
		wd := d.Weekday()
		if wd == time.Saturday || wd == time.Sunday {
			continue
		}
		s := d.Format(time.DateOnly)
		c[Daily].text = append(c[Daily].text, s)
		c[Daily].days = append(c[Daily].days, epochDays(d))
		if wd == time.Monday {
			c[Weekly].text = append(c[Weekly].text, s)
			c[Weekly].days = append(c[Weekly].days, epochDays(d))
		}
	}
	for m := 1; m <= 12; m++ {
		d := time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
		c[Monthly].text = append(c[Monthly].text, fmt.Sprintf("%04d-%02d", y, m))
		c[Monthly].days = append(c[Monthly].days, epochDays(d))
		if (m-1)%3 == 0 {
			c[Quarterly].text = append(c[Quarterly].text, fmt.Sprintf("%04d-Q%d", y, (m-1)/3+1))
			c[Quarterly].days = append(c[Quarterly].days, epochDays(d))
		}
	}
	c[Annual].text = []string{fmt.Sprintf("%04d", y)}
	c[Annual].days = []int32{epochDays(time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC))}
	return &c
}
