package lakegen

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// EIASeries describes one real EIA series kept as CSV in data/eia-prices
// (see its README.md).
type EIASeries struct {
	File      string // CSV file name, "Date,Price" or "Month,Price"
	ID        string // EIA series id, e.g. PET.RBRTE.D
	Frequency Frequency
	Name      string
	Units     string
	Category  string
}

const (
	brentName = "Europe Brent Spot Price FOB"
	wtiName   = "Cushing, OK WTI Spot Price FOB"
	hhName    = "Henry Hub Natural Gas Spot Price"
	petSpot   = "Petroleum/Prices/Spot"
	ngSpot    = "Natural Gas/Prices/Spot"
)

var eiaSeries = []EIASeries{
	{"brent-daily.csv", "PET.RBRTE.D", Daily, brentName, "$/bbl", petSpot},
	{"brent-weekly.csv", "PET.RBRTE.W", Weekly, brentName, "$/bbl", petSpot},
	{"brent-monthly.csv", "PET.RBRTE.M", Monthly, brentName, "$/bbl", petSpot},
	{"brent-year.csv", "PET.RBRTE.A", Annual, brentName, "$/bbl", petSpot},
	{"wti-daily.csv", "PET.RWTC.D", Daily, wtiName, "$/bbl", petSpot},
	{"wti-weekly.csv", "PET.RWTC.W", Weekly, wtiName, "$/bbl", petSpot},
	{"wti-monthly.csv", "PET.RWTC.M", Monthly, wtiName, "$/bbl", petSpot},
	{"wti-year.csv", "PET.RWTC.A", Annual, wtiName, "$/bbl", petSpot},
	{"henryhub-daily.csv", "NG.RNGWHHD.D", Daily, hhName, "$/MMBtu", ngSpot},
	{"henryhub-monthly.csv", "NG.RNGWHHD.M", Monthly, hhName, "$/MMBtu", ngSpot},
}

// EIAOptions configures GenerateEIAWith.
type EIAOptions struct {
	CSVDir       string // directory holding the CSV files of the EIA series (data/eia-prices)
	Out          string // lake directory; absent or empty unless Overwrite
	Overwrite    bool   // replace the year=YYYY directories it writes
	PeriodAsDate bool   // period as DATE (the period's first day)
}

// GenerateEIAWith turns the real EIA series in opt.CSVDir (data/eia-prices)
// into a small lake with the columns and layout of Generate: one file per
// year, one row group per file, rows ordered by series then period. Periods
// are normalised to EIA API style at the start of the period: the data
// packages date monthly values on the 15th and annual ones on June 30, which
// become "YYYY-MM" and "YYYY"; daily and weekly rows keep their date. Empty
// prices become null values.
func GenerateEIAWith(ctx context.Context, opt EIAOptions) (Summary, error) {
	if opt.Out == "" {
		return Summary{}, errors.New("lakegen: no output directory")
	}
	byYear := map[int][]eiaRow{}
	for k := range eiaSeries {
		if err := ctx.Err(); err != nil {
			return Summary{}, err
		}
		rows, err := readEIACSV(filepath.Join(opt.CSVDir, eiaSeries[k].File), k)
		if err != nil {
			return Summary{}, err
		}
		for _, r := range rows {
			byYear[r.year] = append(byYear[r.year], r)
		}
	}
	years := make([]int, 0, len(byYear))
	for y := range byYear {
		years = append(years, y)
	}
	slices.Sort(years)
	if err := prepareOut(opt.Out, opt.Overwrite, years); err != nil {
		return Summary{}, err
	}
	attrsOf := make([]attrs, len(eiaSeries))
	for k, s := range eiaSeries {
		attrsOf[k] = attrs{id: s.ID, name: s.Name, units: s.Units, frequency: s.Frequency.String(), category: s.Category}
	}

	sum := Summary{Series: len(eiaSeries)}
	var written []string
	fail := func(err error) (Summary, error) {
		for _, p := range written {
			os.Remove(p)
		}
		return Summary{}, err
	}
	type done struct{ tmp, path string }
	var files []done
	for _, y := range years {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		dir := filepath.Join(opt.Out, yearDir(y))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(fmt.Errorf("lakegen: %w", err))
		}
		d := done{tmp: filepath.Join(dir, ".part-0.parquet.tmp"), path: filepath.Join(dir, "part-0.parquet")}
		written = append(written, d.tmp)
		var st fileStat
		var err error
		if opt.PeriodAsDate {
			st, err = writeEIAFile[rowDate](d.tmp, byYear[y], attrsOf)
		} else {
			st, err = writeEIAFile[rowText](d.tmp, byYear[y], attrsOf)
		}
		if err != nil {
			return fail(err)
		}
		files = append(files, d)
		sum.Files++
		sum.RowGroups += st.rowGroups
		sum.Rows += st.rows
		sum.Bytes += st.bytes
	}
	for _, d := range files {
		if err := os.Rename(d.tmp, d.path); err != nil {
			return fail(fmt.Errorf("lakegen: %w", err))
		}
	}
	return sum, nil
}

type eiaRow struct {
	series int // index into eiaSeries
	year   int
	period string
	day    int32
	value  float64
	null   bool
}

func writeEIAFile[T any, P rowPtr[T]](path string, in []eiaRow, attrsOf []attrs) (fileStat, error) {
	pf, err := createParquet[T](path)
	if err != nil {
		return fileStat{}, err
	}
	rows := make([]T, len(in))
	for k := range in {
		var vp *float64
		if !in[k].null {
			vp = &in[k].value
		}
		P(&rows[k]).set(&attrsOf[in[k].series], in[k].period, in[k].day, vp)
	}
	if err := pf.writeGroup(rows); err != nil {
		pf.abort()
		return fileStat{}, err
	}
	return pf.finish()
}

// readEIACSV reads the "Date,Price" or "Month,Price" file of eiaSeries[series].
func readEIACSV(path string, series int) ([]eiaRow, error) {
	s := &eiaSeries[series]
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lakegen: %w", err)
	}
	defer f.Close()
	cr := csv.NewReader(f)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("lakegen: %s:%d: %s", path, line, fmt.Sprintf(format, args...))
	}
	var rows []eiaRow
	seen := map[string]int{}
	for first := true; ; first = false {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, bad(pe.Line, "%v", pe.Err)
			}
			return nil, fmt.Errorf("lakegen: %s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != 2 {
			return nil, bad(line, "want 2 fields (period,price), got %d", len(rec))
		}
		if first {
			if (rec[0] != "Date" && rec[0] != "Month") || rec[1] != "Price" {
				return nil, bad(line, "header %q,%q, want Date,Price or Month,Price", rec[0], rec[1])
			}
			continue
		}
		r := eiaRow{series: series}
		if r.period, r.day, r.year, err = eiaPeriod(rec[0], s.Frequency); err != nil {
			return nil, bad(line, "%v", err)
		}
		if prev, dup := seen[r.period]; dup {
			return nil, bad(line, "period %s repeats line %d", r.period, prev)
		}
		seen[r.period] = line
		if rec[1] == "" {
			r.null = true
		} else if r.value, err = strconv.ParseFloat(rec[1], 64); err != nil || math.IsNaN(r.value) || math.IsInf(r.value, 0) {
			return nil, bad(line, "bad price %q", rec[1])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("lakegen: %s: no rows", path)
	}
	return rows, nil
}

// eiaPeriod normalises a CSV date to the EIA API period of frequency f and
// returns it with the period's first day (days since 1970-01-01) and year.
// Daily and weekly dates must be full dates; monthly ones may be YYYY-MM-DD
// (any day of the month) or YYYY-MM; annual ones YYYY-MM-DD or YYYY.
func eiaPeriod(s string, f Frequency) (string, int32, int, error) {
	var t time.Time
	var err error
	switch len(s) {
	case len("2006-01-02"):
		t, err = time.Parse(time.DateOnly, s)
	case len("2006-01"):
		if f == Monthly {
			t, err = time.Parse("2006-01", s)
		} else {
			err = errors.New("not a date")
		}
	case len("2006"):
		if f == Annual {
			t, err = time.Parse("2006", s)
		} else {
			err = errors.New("not a date")
		}
	default:
		err = errors.New("not a date")
	}
	if err != nil {
		return "", 0, 0, fmt.Errorf("bad %s period %q", f, s)
	}
	y := t.Year()
	switch f {
	case Daily, Weekly:
		return t.Format(time.DateOnly), epochDays(t), y, nil
	case Monthly:
		start := time.Date(y, t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start.Format("2006-01"), epochDays(start), y, nil
	case Annual:
		start := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		return start.Format("2006"), epochDays(start), y, nil
	}
	return "", 0, 0, fmt.Errorf("frequency %s not supported", f)
}
