package lakegen

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

var (
	idRE      = regexp.MustCompile(`^(PET|NG|ELEC|COAL|TOTAL|INTL|SEDS|STEO)\.[A-Z0-9][A-Z0-9_.-]*[A-Z0-9]\.([DWMQA])$`)
	periodREs = map[string]*regexp.Regexp{
		"daily":     regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`),
		"weekly":    regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`),
		"monthly":   regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])$`),
		"quarterly": regexp.MustCompile(`^\d{4}-Q[1-4]$`),
		"annual":    regexp.MustCompile(`^\d{4}$`),
	}
	partFileRE = regexp.MustCompile(`^year=(\d{4})/part-(\d+)\.parquet$`)
)

// lakeFiles lists a lake's files relative to its root, sorted.
func lakeFiles(t testing.TB, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func openParquet(t testing.TB, path string) *parquet.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pf
}

func generate(t testing.TB, opt Options) Summary {
	t.Helper()
	sum, err := Generate(context.Background(), opt)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", opt, err)
	}
	return sum
}

func TestDeterministic(t *testing.T) {
	base := Options{Series: 300, FromYear: 2016, ToYear: 2024, Seed: 7, RowGroupRows: 1500, FilesPerYear: 2}
	dir := t.TempDir()
	run := func(name string, mod func(*Options)) (Summary, map[string][]byte) {
		opt := base
		opt.Out = filepath.Join(dir, name)
		mod(&opt)
		sum := generate(t, opt)
		files := map[string][]byte{}
		for _, f := range lakeFiles(t, opt.Out) {
			b, err := os.ReadFile(filepath.Join(opt.Out, f))
			if err != nil {
				t.Fatal(err)
			}
			files[f] = b
		}
		return sum, files
	}
	sumA, a := run("a", func(o *Options) { o.Workers = 2 })
	sumB, b := run("b", func(o *Options) { o.Workers = 1 })
	if sumA != sumB {
		t.Errorf("summaries differ: %+v vs %+v", sumA, sumB)
	}
	if len(a) != sumA.Files || len(a) < 2*(base.ToYear-base.FromYear+1) {
		t.Fatalf("%d files, summary says %d", len(a), sumA.Files)
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between two runs with the same options", name)
		}
	}
	_, c := run("c", func(o *Options) { o.Seed = 8 })
	same := 0
	for name, data := range a {
		if bytes.Equal(data, c[name]) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d of %d files identical with another seed", same, len(a))
	}
	// PeriodAsDate is deterministic too.
	_, d1 := run("d1", func(o *Options) { o.PeriodAsDate = true })
	_, d2 := run("d2", func(o *Options) { o.PeriodAsDate = true; o.Workers = 1 })
	for name, data := range d1 {
		if !bytes.Equal(data, d2[name]) {
			t.Errorf("period-as-date %s differs between runs", name)
		}
	}
}

type seriesSeen struct {
	row       rowText
	perYear   map[int]map[string]bool
	firstYear int
}

// TestLakeContents checks layout, metadata and every row of a lake.
func TestLakeContents(t *testing.T) {
	opt := Options{Out: t.TempDir(), Series: 400, Seed: 1, RowGroupRows: 1000}
	sum := generate(t, opt)
	files := lakeFiles(t, opt.Out)
	if len(files) != 25 || sum.Files != 25 || sum.Series != 400 {
		t.Fatalf("files %v, summary %+v", files, sum)
	}

	series := map[string]*seriesSeen{}
	var rows, nulls, bytesTotal int64
	rowGroups := 0
	for _, name := range files {
		m := partFileRE.FindStringSubmatch(name)
		if m == nil || m[2] != "0" {
			t.Fatalf("unexpected file %s", name)
		}
		year, _ := strconv.Atoi(m[1])
		path := filepath.Join(opt.Out, name)
		pf := openParquet(t, path)
		bytesTotal += pf.Size()

		md := pf.Metadata()
		if len(md.RowGroups) < 2 {
			t.Errorf("%s: %d row groups, want several", name, len(md.RowGroups))
		}
		rowGroups += len(md.RowGroups)
		for _, rg := range md.RowGroups {
			if rg.NumRows > int64(opt.RowGroupRows) && rg.NumRows > 262 {
				t.Errorf("%s: row group of %d rows", name, rg.NumRows)
			}
			for _, cc := range rg.Columns {
				if cc.MetaData.Codec != format.Zstd {
					t.Errorf("%s: column %v codec %v, want ZSTD", name, cc.MetaData.PathInSchema, cc.MetaData.Codec)
				}
			}
		}
		var cols []string
		for _, f := range pf.Schema().Fields() {
			cols = append(cols, f.Name())
		}
		if want := "series_id,period,value,units,frequency,name,category"; strings.Join(cols, ",") != want {
			t.Fatalf("%s: columns %v, want %s", name, cols, want)
		}

		got, err := parquet.ReadFile[rowText](path)
		if err != nil {
			t.Fatal(err)
		}
		rows += int64(len(got))
		// Shuffled: in series order, adjacent rows would mostly share an id.
		changes := 0
		for k := 1; k < len(got); k++ {
			if got[k].SeriesID != got[k-1].SeriesID {
				changes++
			}
		}
		if changes < len(got)/2 {
			t.Errorf("%s: only %d id changes between %d adjacent rows: not shuffled", name, changes, len(got))
		}
		if slices.IsSortedFunc(got, func(a, b rowText) int {
			return strings.Compare(a.SeriesID+" "+a.Period, b.SeriesID+" "+b.Period)
		}) {
			t.Errorf("%s: rows are sorted", name)
		}

		for _, r := range got {
			m := idRE.FindStringSubmatch(r.SeriesID)
			if m == nil {
				t.Fatalf("%s: malformed series id %q", name, r.SeriesID)
			}
			f, err := ParseFrequency(r.Frequency)
			if err != nil {
				t.Fatal(err)
			}
			if m[2] != f.Letter() {
				t.Fatalf("%s: id %s for a %s series", name, r.SeriesID, r.Frequency)
			}
			if !periodREs[r.Frequency].MatchString(r.Period) || !strings.HasPrefix(r.Period, strconv.Itoa(year)) {
				t.Fatalf("%s: %s period %q of a %s series", name, r.SeriesID, r.Period, r.Frequency)
			}
			if f == Daily || f == Weekly {
				d, err := time.Parse(time.DateOnly, r.Period)
				if err != nil {
					t.Fatalf("%s: bad date %q", name, r.Period)
				}
				if wd := d.Weekday(); wd == time.Saturday || wd == time.Sunday || (f == Weekly && wd != time.Monday) {
					t.Fatalf("%s: %s period %s is a %s", name, r.Frequency, r.Period, wd)
				}
			}
			if r.Value == nil {
				nulls++
			} else if *r.Value <= 0 {
				t.Fatalf("%s: %s value %v", name, r.SeriesID, *r.Value)
			}
			if r.Units == "" || r.Name == "" || !strings.Contains(r.Category, "/") {
				t.Fatalf("%s: incomplete attributes %+v", name, r)
			}
			s := series[r.SeriesID]
			if s == nil {
				s = &seriesSeen{row: r, perYear: map[int]map[string]bool{}, firstYear: year}
				s.row.Period, s.row.Value = "", nil
				series[r.SeriesID] = s
			}
			if s.row.Units != r.Units || s.row.Frequency != r.Frequency || s.row.Name != r.Name || s.row.Category != r.Category {
				t.Fatalf("%s: attributes of %s change: %+v vs %+v", name, r.SeriesID, s.row, r)
			}
			if s.perYear[year] == nil {
				s.perYear[year] = map[string]bool{}
			}
			if s.perYear[year][r.Period] {
				t.Fatalf("%s: %s has period %s twice", name, r.SeriesID, r.Period)
			}
			s.perYear[year][r.Period] = true
			s.firstYear = min(s.firstYear, year)
		}
	}
	if rows != sum.Rows || bytesTotal != sum.Bytes || rowGroups != sum.RowGroups {
		t.Errorf("read %d rows, %d bytes, %d row groups; summary %+v", rows, bytesTotal, rowGroups, sum)
	}
	if len(series) != opt.Series {
		t.Errorf("%d distinct series ids, want %d", len(series), opt.Series)
	}
	if rate := float64(nulls) / float64(rows); rate < 0.002 || rate > 0.01 {
		t.Errorf("null rate %.4f, want about %.3f", rate, nullRate)
	}

	// Row counts follow the frequency arithmetic: every period of every year
	// from the series' first year to ToYear.
	late := 0
	for id, s := range series {
		f, _ := ParseFrequency(s.row.Frequency)
		want, got := 0, 0
		for y := s.firstYear; y <= DefaultToYear; y++ {
			n := PeriodsInYear(f, y)
			want += n
			got += len(s.perYear[y])
			if len(s.perYear[y]) != n {
				t.Errorf("%s (%s) has %d rows in %d, want %d", id, s.row.Frequency, len(s.perYear[y]), y, n)
			}
		}
		if got != want {
			t.Errorf("%s: %d rows, want %d", id, got, want)
		}
		if s.firstYear > DefaultFromYear {
			late++
		}
	}
	if late < opt.Series/4 || late > opt.Series*3/4 {
		t.Errorf("%d of %d series start after the first year, want about half", late, opt.Series)
	}
}

func TestFilesPerYear(t *testing.T) {
	opt := Options{Out: t.TempDir(), Series: 200, FromYear: 2020, ToYear: 2022, FilesPerYear: 3, RowGroupRows: 500}
	sum := generate(t, opt)
	if sum.Files != 9 {
		t.Fatalf("%d files, want 9: %v", sum.Files, lakeFiles(t, opt.Out))
	}
	for y := 2020; y <= 2022; y++ {
		owner := map[string]int{}
		var sizes []int
		for p := range 3 {
			rows, err := parquet.ReadFile[rowText](filepath.Join(opt.Out, fmt.Sprintf("year=%d/part-%d.parquet", y, p)))
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(rows))
			for _, r := range rows {
				if q, ok := owner[r.SeriesID]; ok && q != p {
					t.Fatalf("%d: series %s in part-%d and part-%d", y, r.SeriesID, q, p)
				}
				owner[r.SeriesID] = p
			}
		}
		total := sizes[0] + sizes[1] + sizes[2]
		for p, n := range sizes {
			if n < total/6 {
				t.Errorf("%d: part-%d has %d of %d rows (%v)", y, p, n, total, sizes)
			}
		}
	}
}

func TestPeriodAsDate(t *testing.T) {
	opt := Options{Out: t.TempDir(), Series: 100, FromYear: 2023, ToYear: 2024, PeriodAsDate: true, RowGroupRows: 2000}
	sum := generate(t, opt)
	text := opt
	text.Out, text.PeriodAsDate = t.TempDir(), false
	generate(t, text)

	for _, y := range []int{2023, 2024} {
		name := fmt.Sprintf("year=%d/part-0.parquet", y)
		pf := openParquet(t, filepath.Join(opt.Out, name))
		var period *format.SchemaElement
		for k := range pf.Metadata().Schema {
			if pf.Metadata().Schema[k].Name == "period" {
				period = &pf.Metadata().Schema[k]
			}
		}
		if period == nil {
			t.Fatal("no period column")
		}
		if _, ok := period.LogicalType.Value.(*format.DateType); !ok || period.Type.V != format.Int32 {
			t.Fatalf("period is %v %v, want INT32 DATE", period.Type.V, period.LogicalType.String())
		}
		dates, err := parquet.ReadFile[rowDate](filepath.Join(opt.Out, name))
		if err != nil {
			t.Fatal(err)
		}
		texts, err := parquet.ReadFile[rowText](filepath.Join(text.Out, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(dates) != len(texts) {
			t.Fatalf("%s: %d rows as dates, %d as text", name, len(dates), len(texts))
		}
		for k := range dates {
			d, s := dates[k], texts[k]
			if d.SeriesID != s.SeriesID || !slices.Equal(deref(d.Value), deref(s.Value)) {
				t.Fatalf("%s row %d: %+v vs %+v", name, k, d, s)
			}
			if got, want := time.Unix(int64(d.Period)*86400, 0).UTC().Format(time.DateOnly), periodStart(t, s.Period); got != want {
				t.Fatalf("%s row %d: %s period %s is %s, want %s", name, k, s.Frequency, s.Period, got, want)
			}
		}
	}
	if sum.Rows == 0 {
		t.Fatal("no rows")
	}
}

func deref(p *float64) []float64 {
	if p == nil {
		return nil
	}
	return []float64{*p}
}

// periodStart is the FORMAT.md rule: the first day of an EIA-style period.
func periodStart(t *testing.T, p string) string {
	switch {
	case len(p) == 4:
		return p + "-01-01"
	case len(p) == 7 && p[5] == 'Q':
		q, _ := strconv.Atoi(p[6:])
		return fmt.Sprintf("%s-%02d-01", p[:4], 3*q-2)
	case len(p) == 7:
		return p + "-01"
	case len(p) == 10:
		return p
	}
	t.Fatalf("bad period %q", p)
	return ""
}

// TestSeriesAtScale renders many series without writing them: ids are unique
// and well formed, and the mean row count matches ExpectedRowsPerSeries.
func TestSeriesAtScale(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	opt := Options{Out: t.TempDir(), Series: n, Seed: 42}
	if err := opt.normalize(); err != nil {
		t.Fatal(err)
	}
	g := newGenerator(opt)
	tasks, err := g.plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	for _, tk := range tasks {
		rows += tk.rows
	}
	mean := float64(rows) / float64(n)
	want := ExpectedRowsPerSeries(DefaultFromYear, DefaultToYear)
	if mean < want*0.95 || mean > want*1.05 {
		t.Errorf("mean %.1f rows per series, expected %.1f", mean, want)
	}
	if want < 135 || want > 165 {
		t.Errorf("ExpectedRowsPerSeries(2000, 2024) = %.1f, want about 150", want)
	}
	t.Logf("%d series: %d rows, %.1f per series (expected %.1f)", n, rows, mean, want)

	seen := make(map[string]struct{}, n)
	var pcg rand.PCG
	r := rand.New(&pcg)
	var freqs [numFreq]int
	for i := range n {
		c := g.core(i, &pcg, r)
		a := g.render(i, &c)
		m := idRE.FindStringSubmatch(a.id)
		if m == nil || m[2] != c.freq.Letter() || a.frequency != c.freq.String() {
			t.Fatalf("series %d: id %q, frequency %s", i, a.id, a.frequency)
		}
		if _, dup := seen[a.id]; dup {
			t.Fatalf("series %d: duplicate id %s", i, a.id)
		}
		seen[a.id] = struct{}{}
		freqs[c.freq]++
	}
	for f, cnt := range freqs {
		if share := float64(cnt) / float64(n); share < frequencyMix[f]*0.8-0.001 || share > frequencyMix[f]*1.2+0.001 {
			t.Errorf("%s share %.4f, mix says %.4f", Frequency(f), share, frequencyMix[f])
		}
	}
}

func TestOverwrite(t *testing.T) {
	out := t.TempDir()
	keep := filepath.Join(out, "year=1999", "keep.txt")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(out, "year=2024", "part-7.parquet")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	opt := Options{Out: out, Series: 20, FromYear: 2023, ToYear: 2024}
	if _, err := Generate(context.Background(), opt); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Generate into a non-empty dir: %v", err)
	}
	opt.Overwrite = true
	generate(t, opt)
	want := []string{"year=1999/keep.txt", "year=2023/part-0.parquet", "year=2024/part-0.parquet"}
	if got := lakeFiles(t, out); !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

func TestOptionsErrors(t *testing.T) {
	dir := t.TempDir()
	for _, opt := range []Options{
		{Series: 10},
		{Out: dir},
		{Out: dir, Series: 10, FromYear: 2020, ToYear: 2019},
		{Out: dir, Series: 10, FromYear: 20, ToYear: 2019},
		{Out: dir, Series: 10, RowGroupRows: -1},
		{Out: dir, Series: 10, FilesPerYear: 11},
	} {
		if _, err := Generate(context.Background(), opt); err == nil {
			t.Errorf("Generate(%+v) succeeded", opt)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Generate(ctx, Options{Out: filepath.Join(dir, "c"), Series: 100}); err == nil {
		t.Error("Generate with a cancelled context succeeded")
	}
	files := lakeFiles(t, dir)
	for _, f := range files {
		if strings.HasSuffix(f, ".tmp") {
			t.Errorf("temporary file %s left behind", f)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	dir := b.TempDir()
	opt := Options{Series: 1000, Seed: 1, Overwrite: true, Out: filepath.Join(dir, "lake")}
	var sum Summary
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if sum, err = Generate(context.Background(), opt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(sum.Rows), "rows/op")
	b.ReportMetric(float64(sum.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
