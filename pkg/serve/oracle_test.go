package serve

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// The server tests' oracle computes a query's answer from the lake the
// snapshot was built from, with none of the project's read path: the
// Parquet files are read with parquet-go (the builder reads with arrow-go's
// pqarrow), periods are parsed by oraclePeriod below (not pkg/period), and
// rows are filtered, sorted and reduced to latest values here. So a bug
// shared by the builder, the snapshot reader and the server cannot hide in
// the expected rows.

// lakeRow is one observation of the lake: series id, the period's first day
// (days since 1970-01-01), value (float64 or nil) and every other column.
type lakeRow struct {
	id     string
	period int32
	value  any
	cols   map[string]any
}

var lakeCache sync.Map // lake dir -> []lakeRow (sorted by id, period)

// lakeOf is the lake a test dataset directory was built from: the fixture
// writes dataset NAME from lake-NAME beside it or in the fixture directory.
func lakeOf(t *testing.T, dir string) string {
	t.Helper()
	name := "lake-" + filepath.Base(dir)
	for _, p := range []string{filepath.Join(filepath.Dir(dir), name), filepath.Join(fixtureDir, name)} {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
	}
	t.Fatalf("no lake %s for dataset %s", name, dir)
	return ""
}

// readLake reads every Parquet file under lake with parquet-go, sorted by
// (series id, period); a repeated key fails the test (the oracle does not
// model the builder's duplicate policy, and the fixtures have none).
func readLake(t *testing.T, lake string) []lakeRow {
	t.Helper()
	if v, ok := lakeCache.Load(lake); ok {
		return v.([]lakeRow)
	}
	var out []lakeRow
	err := filepath.WalkDir(lake, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		rows, err := readParquetRows(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, rows...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].id != out[j].id {
			return out[i].id < out[j].id
		}
		return out[i].period < out[j].period
	})
	for i := 1; i < len(out); i++ {
		if out[i].id == out[i-1].id && out[i].period == out[i-1].period {
			t.Fatalf("lake %s repeats (%s, %d): the oracle does not model duplicates", lake, out[i].id, out[i].period)
		}
	}
	lakeCache.Store(lake, out)
	return out
}

func readParquetRows(path string) ([]lakeRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range pf.Schema().Columns() {
		names = append(names, strings.Join(c, "."))
	}
	var out []lakeRow
	buf := make([]parquet.Row, 512)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, rerr := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				lr := lakeRow{cols: map[string]any{}}
				for _, v := range r {
					name := names[v.Column()]
					var x any
					if !v.IsNull() {
						switch v.Kind() {
						case parquet.ByteArray, parquet.FixedLenByteArray:
							x = string(v.ByteArray())
						case parquet.Double:
							x = v.Double()
						case parquet.Float:
							x = float64(v.Float())
						case parquet.Int32:
							x = v.Int32()
						case parquet.Int64:
							x = v.Int64()
						default:
							x = v.String()
						}
					}
					switch name {
					case "series_id":
						lr.id, _ = x.(string)
					case "period":
						s, ok := x.(string)
						if !ok {
							rows.Close()
							return nil, fmt.Errorf("period %v is not a string", x)
						}
						first, _, err := oraclePeriod(s)
						if err != nil {
							rows.Close()
							return nil, err
						}
						lr.period = first
					case "value":
						lr.value = x
					default:
						lr.cols[name] = x
					}
				}
				out = append(out, lr)
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				rows.Close()
				return nil, rerr
			}
		}
		rows.Close()
	}
	return out, nil
}

// oraclePeriod parses an EIA-style period (YYYY, YYYY-MM, YYYY-Qn or YYYYQn,
// YYYY-MM-DD) to its first and last day, in days since 1970-01-01.
func oraclePeriod(s string) (first, last int32, err error) {
	bad := fmt.Errorf("oracle: period %q", s)
	if len(s) < 4 {
		return 0, 0, bad
	}
	y, err := strconv.Atoi(s[:4])
	if err != nil {
		return 0, 0, bad
	}
	var a, b time.Time
	rest := strings.TrimPrefix(s[4:], "-")
	switch {
	case rest == "":
		a = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		b = a.AddDate(1, 0, 0)
	case rest[0] == 'Q' && len(rest) == 2:
		q := int(rest[1] - '0')
		if q < 1 || q > 4 {
			return 0, 0, bad
		}
		a = time.Date(y, time.Month(3*q-2), 1, 0, 0, 0, 0, time.UTC)
		b = a.AddDate(0, 3, 0)
	case len(rest) == 2:
		m, err := strconv.Atoi(rest)
		if err != nil || m < 1 || m > 12 {
			return 0, 0, bad
		}
		a = time.Date(y, time.Month(m), 1, 0, 0, 0, 0, time.UTC)
		b = a.AddDate(0, 1, 0)
	case len(rest) == 5 && rest[2] == '-':
		d, err := time.Parse("2006-01-02", s)
		if err != nil {
			return 0, 0, bad
		}
		a, b = d, d.AddDate(0, 0, 1)
	default:
		return 0, 0, bad
	}
	return int32(a.Unix() / 86400), int32(b.Unix()/86400) - 1, nil
}

// TestOraclePeriod pins the oracle's own period rules.
func TestOraclePeriod(t *testing.T) {
	for _, tc := range []struct {
		in          string
		first, last string
	}{
		{"2020", "2020-01-01", "2020-12-31"},
		{"2020-02", "2020-02-01", "2020-02-29"},
		{"2020Q3", "2020-07-01", "2020-09-30"},
		{"2019-Q4", "2019-10-01", "2019-12-31"},
		{"2021-03-15", "2021-03-15", "2021-03-15"},
	} {
		a, b, err := oraclePeriod(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		day := func(d int32) string { return time.Unix(int64(d)*86400, 0).UTC().Format("2006-01-02") }
		if day(a) != tc.first || day(b) != tc.last {
			t.Errorf("%s: %s–%s, want %s–%s", tc.in, day(a), day(b), tc.first, tc.last)
		}
	}
	for _, s := range []string{"", "20", "2020-13", "2020Q5", "2020-1-1"} {
		if _, _, err := oraclePeriod(s); err == nil {
			t.Errorf("%q parses", s)
		}
	}
}
