package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  bool
)

// fixture is the two-vintage dataset of inspecttest, built once per run.
func fixture(t *testing.T) string {
	t.Helper()
	fixtureOnce.Do(func() {
		root, err := os.MkdirTemp("", "inspect-test-")
		if err != nil {
			t.Fatal(err)
		}
		fixtureErr = true
		fixtureDir = inspecttest.Build(t, root, true)
		fixtureErr = false
	})
	if fixtureErr {
		t.Fatal("fixture build failed")
	}
	return fixtureDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(filepath.Dir(fixtureDir))
	}
	os.Exit(code)
}

func open(t *testing.T, id uint64) *snapshot.Snapshot {
	t.Helper()
	s, err := Open(fixture(t), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestDiffKnownCounts(t *testing.T) {
	a, b := open(t, 1), open(t, 2)
	got := map[string]SeriesDiff{}
	var order []string
	tot, err := Diff(a, b, func(d SeriesDiff) error {
		got[d.SeriesID] = d
		order = append(order, d.SeriesID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := DiffTotals{
		SeriesAdded: inspecttest.SeriesAdded, SeriesRemoved: inspecttest.SeriesRemoved,
		SeriesChanged: inspecttest.SeriesChanged, SeriesUnchanged: inspecttest.SeriesUnchanged,
		SeriesNet: inspecttest.SeriesB - inspecttest.SeriesA,
		RowsAdded: inspecttest.RowsAdded, RowsRemoved: inspecttest.RowsRemoved, RowsChanged: inspecttest.RowsChanged,
		RowsNet: inspecttest.RowsB - inspecttest.RowsA,
	}
	if tot != want {
		t.Errorf("totals %+v\nwant   %+v", tot, want)
	}
	if strings.Join(order, " ") != "NG.HH.D PET.BRENT.D PET.WTI.D ZZ.OLD.Q" {
		t.Errorf("visited %v, want series_id order of the differing series", order)
	}
	check := func(id, change string, ra, rb, add, rem, chg int64) {
		t.Helper()
		w := SeriesDiff{SeriesID: id, Change: change, RowsA: ra, RowsB: rb, RowsAdded: add, RowsRemoved: rem, RowsChanged: chg}
		if got[id] != w {
			t.Errorf("%s: %+v, want %+v", id, got[id], w)
		}
	}
	check(inspecttest.ChangedNG, Changed, 5, 7, inspecttest.NGAdded, inspecttest.NGRemoved, inspecttest.NGChanged)
	check(inspecttest.ChangedBrent, Changed, 4, 3, inspecttest.BrentAdded, inspecttest.BrentRemoved, inspecttest.BrentChanged)
	check(inspecttest.AddedSeries, Added, 0, 3, 3, 0, 0)
	check(inspecttest.RemovedSeries, Removed, 2, 0, 0, 2, 0)

	// Reversed, every count mirrors.
	rev, err := Diff(b, a, func(SeriesDiff) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if rev.SeriesAdded != tot.SeriesRemoved || rev.RowsAdded != tot.RowsRemoved || rev.RowsChanged != tot.RowsChanged || rev.RowsNet != -tot.RowsNet {
		t.Errorf("reverse diff %+v does not mirror %+v", rev, tot)
	}
	// A snapshot against itself: nothing.
	same, err := Diff(b, b, func(d SeriesDiff) error { t.Errorf("self-diff reports %+v", d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if same.SeriesUnchanged != inspecttest.SeriesB || same.RowsAdded+same.RowsRemoved+same.RowsChanged != 0 {
		t.Errorf("self-diff totals %+v", same)
	}
}

func TestDiffVisitErrorStops(t *testing.T) {
	a, b := open(t, 1), open(t, 2)
	stop := errors.New("stop")
	n := 0
	_, err := Diff(a, b, func(SeriesDiff) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Diff = %v after %d visits, want the visitor's error after 1", err, n)
	}
}

func TestLatestSelection(t *testing.T) {
	s := open(t, 2)
	ids := func(q LatestQuery) (string, error) {
		r, err := Latest(s, q)
		if err != nil {
			return "", err
		}
		var out []string
		for _, ls := range r.Series {
			out = append(out, ls.SeriesID)
		}
		return strings.Join(out, " "), nil
	}
	cases := []struct {
		q    LatestQuery
		want string
	}{
		{LatestQuery{IDs: []string{"PET.WTI.D", "NG.HH.D", "PET.WTI.D"}}, "PET.WTI.D NG.HH.D"},
		{LatestQuery{Prefix: "PET.BRENT.", HasPrefix: true}, "PET.BRENT.D PET.BRENT.M"},
		{LatestQuery{Category: "Petroleum", HasCategory: true}, "PET.BRENT.D PET.BRENT.M PET.EMPTY.W PET.WTI.D"},
		{LatestQuery{Category: "Petroleum/", HasCategory: true}, "PET.BRENT.D PET.BRENT.M PET.EMPTY.W PET.WTI.D"},
		{LatestQuery{Category: "Petroleum/Prices/Spot", HasCategory: true}, "PET.BRENT.D PET.BRENT.M PET.WTI.D"},
		{LatestQuery{Category: "Petroleum/Prices/Spot", HasCategory: true, Prefix: "PET.B", HasPrefix: true}, "PET.BRENT.D PET.BRENT.M"},
		{LatestQuery{Category: "PetroleumCoke", HasCategory: true}, "PET.COKE.A"},
		{LatestQuery{All: true}, "NG.HH.D PET.BRENT.D PET.BRENT.M PET.COKE.A PET.EMPTY.W PET.WTI.D"},
	}
	for _, c := range cases {
		got, err := ids(c.q)
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.q, got, err, c.want)
		}
	}
	for _, q := range []LatestQuery{
		{IDs: []string{"NG.HH.D", "NOPE", "ALSO.NOPE"}},
		{Prefix: "XX", HasPrefix: true},
		{Category: "Petrol", HasCategory: true},
		{Category: "Prices", HasCategory: true},
	} {
		if _, err := Latest(s, q); !errors.Is(err, query.ErrNotFound) {
			t.Errorf("%+v: err %v, want query.ErrNotFound, which is snapshot.ErrNotFound", q, err)
		}
	}
	_, err := Latest(s, LatestQuery{IDs: []string{"NOPE", "ALSO.NOPE"}})
	if err == nil || !strings.Contains(err.Error(), `"NOPE", "ALSO.NOPE"`) {
		t.Errorf("unknown ids error %v does not name both", err)
	}

	r, err := Latest(s, LatestQuery{IDs: []string{"PET.BRENT.D", "PET.EMPTY.W"}})
	if err != nil {
		t.Fatal(err)
	}
	if b := r.Series[0]; b.LatestPeriod == nil || *b.LatestPeriod != "2024-01-04" || b.LatestValue.Text != "78.25" || b.Rows != 3 {
		t.Errorf("PET.BRENT.D latest %+v", b)
	}
	if e := r.Series[1]; e.LatestPeriod != nil || !e.LatestValue.Null || e.FirstPeriod != "2024-01-01" || e.LastPeriod != "2024-01-08" {
		t.Errorf("PET.EMPTY.W (all null) latest %+v", e)
	}
}

func TestLatestNoCategoryColumn(t *testing.T) {
	ds := inspecttest.BuildNoCategory(t, t.TempDir())
	s, err := Open(ds, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Latest(s, LatestQuery{Category: "x", HasCategory: true})
	if !errors.Is(err, snapshot.ErrNotFound) || !strings.Contains(err.Error(), `no "category" attribute column`) || !strings.Contains(err.Error(), "units") {
		t.Fatalf("err %v", err)
	}
}

func TestParseRange(t *testing.T) {
	day := func(s string) int32 {
		d, err := period.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	cases := []struct{ from, to, wantFrom, wantTo string }{
		{"2020", "2020", "2020-01-01", "2020-12-31"},
		{"2020-02", "2020-02", "2020-02-01", "2020-02-29"},
		{"202002", "202012", "2020-02-01", "2020-12-31"},
		{"2019-Q4", "2019q4", "2019-10-01", "2019-12-31"},
		{"2020-W01", "2020-W53", "2019-12-30", "2021-01-03"},
		{"20200315", "2020-03-15", "2020-03-15", "2020-03-15"},
		{"9999", "9999", "9999-01-01", "9999-12-31"},
	}
	for _, c := range cases {
		r, err := ParseRange(c.from, c.to)
		if err != nil {
			t.Errorf("%s..%s: %v", c.from, c.to, err)
			continue
		}
		if r.From != day(c.wantFrom) || r.To != day(c.wantTo) || r.FromDate() != c.wantFrom || r.ToDate() != c.wantTo {
			t.Errorf("%s..%s = %s..%s, want %s..%s", c.from, c.to, r.FromDate(), r.ToDate(), c.wantFrom, c.wantTo)
		}
	}
	if r, err := ParseRange("", ""); err != nil || r.From != math.MinInt32 || r.To != math.MaxInt32 || r.FromDate() != "" || r.ToDate() != "" {
		t.Errorf("open range %+v, %v", r, err)
	}
	for _, bad := range [][2]string{{"2020-13", ""}, {"", "yesterday"}, {"2021", "2020"}, {" 2020", ""}} {
		if _, err := ParseRange(bad[0], bad[1]); err == nil {
			t.Errorf("ParseRange(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestWriteSeriesFormats(t *testing.T) {
	s := open(t, 2)
	r, _ := ParseRange("2024-01-03", "2024-01-04")
	var buf bytes.Buffer
	if err := WriteSeries(&buf, s, []string{"PET.BRENT.D", "NG.HH.D"}, r, FormatCSV); err != nil {
		t.Fatal(err)
	}
	want := "series_id,period,value,status\n" +
		"PET.BRENT.D,2024-01-03,77.5,final\nPET.BRENT.D,2024-01-04,78.25,final\n" +
		"NG.HH.D,2024-01-03,2.55,final\nNG.HH.D,2024-01-04,2.7,final\n"
	if buf.String() != want {
		t.Errorf("csv:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := WriteSeries(&buf, s, []string{"PET.EMPTY.W"}, AllPeriods, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(doc.Rows) != 2 || doc.Rows[0]["value"] != nil || doc.Rows[0]["period"] != "2024-01-01" {
		t.Errorf("json rows %v", doc.Rows)
	}
	buf.Reset()
	err := WriteSeries(&buf, s, []string{"NG.HH.D", "ZZ.OLD.Q"}, AllPeriods, FormatText)
	if !errors.Is(err, snapshot.ErrNotFound) || !strings.Contains(err.Error(), `"ZZ.OLD.Q"`) || buf.Len() != 0 {
		t.Errorf("unknown id: err %v, wrote %q", err, buf.String())
	}
}

func TestCellsAndNumbers(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", -1234567: "-1,234,567", 100000: "100,000"} {
		if got := Commas(n); got != want {
			t.Errorf("Commas(%d) = %q", n, got)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 536130: "523.6 KiB", 3 << 30: "3.0 GiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q", n, got)
		}
	}
	for v, want := range map[float64]string{0: "0", 2.5: "2.5", 1e20: "100000000000000000000", 1e21: "1e+21", 1e-7: "1e-07", -0.001: "-0.001"} {
		if got := formatFloat(v, 64); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", v, got, want)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		b, _ := floatCell(v, 64).MarshalJSON()
		if !json.Valid(b) {
			t.Errorf("%v renders invalid JSON %s", v, b)
		}
	}
}

func TestTableAlignment(t *testing.T) {
	tb := newTable("name", "n").alignRight(1)
	tb.add("a", "1")
	tb.add("longer", "1,000")
	tb.add("a short row's last cell spans")
	var buf bytes.Buffer
	if err := tb.write(&buf, "  "); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"  name        n\n" +
		"  a           1\n" +
		"  longer  1,000\n" +
		"  a short row's last cell spans\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
