package lakegen

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// EIASeriesTable returns the CSV-to-series mapping GenerateEIAWith uses.
func EIASeriesTable() []EIASeries { return slices.Clone(eiaSeries) }

// GenerateEIA is GenerateEIAWith writing csvDir's series to out.
func GenerateEIA(ctx context.Context, csvDir, out string) (Summary, error) {
	return GenerateEIAWith(ctx, EIAOptions{CSVDir: csvDir, Out: out})
}

// ExpectedRowsPerSeries returns the mean rows per generated series for the
// year range, from the frequency mix and the start-year distribution. For
// 2000–2024 it is about 150.
func ExpectedRowsPerSeries(fromYear, toYear int) float64 {
	if toYear < fromYear {
		return 0
	}
	years := toYear - fromYear + 1
	total := 0.0
	for f := Frequency(0); f < numFreq; f++ {
		// rowsFrom[k]: rows of a series starting in fromYear+k.
		rowsFrom := make([]float64, years+1)
		for k := years - 1; k >= 0; k-- {
			rowsFrom[k] = rowsFrom[k+1] + float64(PeriodsInYear(f, fromYear+k))
		}
		e := rowsFrom[0]
		if years > 1 {
			later := 0.0
			for k := 1; k < years; k++ {
				later += rowsFrom[k]
			}
			e = startAtFirstYear*rowsFrom[0] + (1-startAtFirstYear)*later/float64(years-1)
		}
		total += frequencyMix[f] * e
	}
	return total
}

// PeriodsInYear returns how many periods of frequency f fall in year y: its
// weekdays, its Mondays, 12, 4 or 1.
func PeriodsInYear(f Frequency, y int) int {
	switch f {
	case Daily, Weekly:
		n := 0
		for d := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() == y; d = d.AddDate(0, 0, 1) {
			wd := d.Weekday()
			if (f == Daily && wd != time.Saturday && wd != time.Sunday) || (f == Weekly && wd == time.Monday) {
				n++
			}
		}
		return n
	case Monthly:
		return 12
	case Quarterly:
		return 4
	case Annual:
		return 1
	}
	return 0
}

// ParseFrequency maps a frequency column value back to its Frequency.
func ParseFrequency(s string) (Frequency, error) {
	for f, name := range freqNames {
		if name == s {
			return Frequency(f), nil
		}
	}
	return 0, fmt.Errorf("lakegen: unknown frequency %q", s)
}
