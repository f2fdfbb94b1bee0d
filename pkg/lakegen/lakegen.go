package lakegen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/energyscope/servingsnap/pkg/progress"
)

// Defaults applied to zero Options fields.
const (
	DefaultFromYear     = 2000
	DefaultToYear       = 2024
	DefaultRowGroupRows = 131072
)

// Options configures Generate.
type Options struct {
	// Out is the lake directory. It must be absent or empty unless Overwrite
	// is set.
	Out string
	// Series is the number of series (1 ≤ Series ≤ 2^30).
	Series int
	// FromYear and ToYear bound the partitions, inclusive. Both zero means
	// DefaultFromYear..DefaultToYear. Years must have four digits.
	FromYear, ToYear int
	// Seed selects the lake; the same Options give byte-identical files.
	Seed int64
	// RowGroupRows is the target rows per row group (0: DefaultRowGroupRows).
	// Row groups hold whole series, so one longer than the target (a daily
	// series has up to 262 rows a year) gets a row group of its own.
	RowGroupRows int
	// FilesPerYear splits each partition into part-0 ... part-(n-1) files
	// (0: one file per year).
	FilesPerYear int
	// PeriodAsDate writes period as a DATE (the period's first day) instead
	// of an EIA-style string.
	PeriodAsDate bool
	// Overwrite allows a non-empty Out; the year=YYYY directories of the
	// range are removed first, everything else is left alone.
	Overwrite bool
	// Workers bounds the files written concurrently (0: GOMAXPROCS). The
	// output does not depend on it.
	Workers int
	// Progress receives rows written, row group by row group (nil: none).
	Progress progress.Reporter
}

// Summary describes what Generate or GenerateEIAWith wrote.
type Summary struct {
	Files     int   // Parquet files written
	RowGroups int   // row groups over all files
	Rows      int64 // rows over all files
	Series    int   // distinct series
	Bytes     int64 // total size of the files
}

func (o *Options) normalize() error {
	if o.Out == "" {
		return errors.New("lakegen: no output directory")
	}
	if o.Series < 1 || o.Series > maxSeries {
		return fmt.Errorf("lakegen: series must be in 1..%d, got %d", maxSeries, o.Series)
	}
	if o.FromYear == 0 && o.ToYear == 0 {
		o.FromYear, o.ToYear = DefaultFromYear, DefaultToYear
	}
	if o.FromYear < 1000 || o.ToYear > 9998 || o.FromYear > o.ToYear {
		return fmt.Errorf("lakegen: bad year range %d..%d (four-digit years, from ≤ to)", o.FromYear, o.ToYear)
	}
	if o.RowGroupRows == 0 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	if o.RowGroupRows < 1 {
		return fmt.Errorf("lakegen: row group rows must be positive, got %d", o.RowGroupRows)
	}
	if o.FilesPerYear == 0 {
		o.FilesPerYear = 1
	}
	if o.FilesPerYear < 1 || o.FilesPerYear > o.Series {
		return fmt.Errorf("lakegen: files per year must be in 1..series (%d), got %d", o.Series, o.FilesPerYear)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return nil
}

type generator struct {
	opt       Options
	seriesKey uint64
	walkKey   uint64
	anchorKey uint64
	tokenKey  uint64
	orderKey  uint64

	cals   []*yearCalendar // per year from FromYear
	counts [numFreq][]int  // periods per frequency and year

	freq  []Frequency // per series
	start []uint16    // per series: first year - FromYear
}

func newGenerator(opt Options) *generator {
	g := &generator{
		opt:       opt,
		seriesKey: key(opt.Seed, saltSeries),
		walkKey:   key(opt.Seed, saltWalk),
		anchorKey: key(opt.Seed, saltAnchor),
		tokenKey:  key(opt.Seed, saltToken),
		orderKey:  key(opt.Seed, saltOrder),
	}
	for y := opt.FromYear; y <= opt.ToYear; y++ {
		c := newYearCalendar(y)
		g.cals = append(g.cals, c)
		for f := range numFreq {
			g.counts[f] = append(g.counts[f], len(c[f].text))
		}
	}
	return g
}

func (g *generator) periodCount(f Frequency, y int) int { return g.counts[f][y-g.opt.FromYear] }

// fileTask is one Parquet file: the series in [lo, hi) active in year.
type fileTask struct {
	year, part int
	lo, hi     int
	rows       int64
	path, tmp  string
}

// plan computes every series' frequency and start year (three bytes per
// series, the only state that grows with the lake) and cuts each year's
// active series into FilesPerYear contiguous ranges of about equal rows.
func (g *generator) plan(ctx context.Context) ([]*fileTask, error) {
	n := g.opt.Series
	g.freq = make([]Frequency, n)
	g.start = make([]uint16, n)
	var pcg rand.PCG
	r := rand.New(&pcg)
	for i := range n {
		if i%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c := g.core(i, &pcg, r)
		g.freq[i] = c.freq
		g.start[i] = uint16(c.start - g.opt.FromYear)
	}
	var tasks []*fileTask
	for yi := range g.cals {
		y := g.opt.FromYear + yi
		var total int64
		for i := range n {
			total += g.rowsIn(i, yi)
		}
		files := int64(g.opt.FilesPerYear)
		part, lo := 0, 0
		var acc, inFile int64
		target := func() int64 { return total * int64(part+1) / files }
		emit := func(hi int) {
			if inFile > 0 {
				dir := filepath.Join(g.opt.Out, yearDir(y))
				name := "part-" + strconv.Itoa(part) + ".parquet"
				tasks = append(tasks, &fileTask{year: y, part: part, lo: lo, hi: hi, rows: inFile,
					path: filepath.Join(dir, name), tmp: filepath.Join(dir, "."+name+".tmp")})
				part++
			}
			lo, inFile = hi, 0
		}
		for i := range n {
			rows := g.rowsIn(i, yi)
			// Files end at series boundaries, at the one nearest to the
			// running total reaching the file's share of the year's rows.
			if int64(part) < files-1 && inFile > 0 && acc+rows > target() && target()-acc < acc+rows-target() {
				emit(i)
			}
			acc += rows
			inFile += rows
			if int64(part) < files-1 && acc >= target() {
				emit(i + 1)
			}
		}
		emit(n)
	}
	return tasks, nil
}

// rowsIn returns series i's row count in year FromYear+yi.
func (g *generator) rowsIn(i, yi int) int64 {
	if int(g.start[i]) > yi {
		return 0
	}
	return int64(g.counts[g.freq[i]][yi])
}

func yearDir(y int) string { return "year=" + strconv.Itoa(y) }

// Generate writes a synthetic lake as described in the package documentation.
func Generate(ctx context.Context, opt Options) (Summary, error) {
	if err := opt.normalize(); err != nil {
		return Summary{}, err
	}
	var years []int
	for y := opt.FromYear; y <= opt.ToYear; y++ {
		years = append(years, y)
	}
	if err := prepareOut(opt.Out, opt.Overwrite, years); err != nil {
		return Summary{}, err
	}
	g := newGenerator(opt)
	tasks, err := g.plan(ctx)
	if err != nil {
		return Summary{}, err
	}
	for _, t := range tasks {
		if err := os.MkdirAll(filepath.Dir(t.path), 0o755); err != nil {
			return Summary{}, fmt.Errorf("lakegen: %w", err)
		}
	}
	stats := make([]fileStat, len(tasks))
	var planned int64
	for _, t := range tasks {
		planned += t.rows
	}
	ph := progress.Or(opt.Progress).Phase("write", planned, 0)
	defer ph.Done()
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(opt.Workers)
	for k, t := range tasks {
		eg.Go(func() error {
			var err error
			if opt.PeriodAsDate {
				stats[k], err = writeTask[rowDate](ectx, g, t, ph)
			} else {
				stats[k], err = writeTask[rowText](ectx, g, t, ph)
			}
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		for _, t := range tasks {
			os.Remove(t.tmp)
		}
		return Summary{}, err
	}
	sum := Summary{Series: opt.Series}
	for k, t := range tasks {
		if err := os.Rename(t.tmp, t.path); err != nil {
			for _, rest := range tasks[k:] {
				os.Remove(rest.tmp)
			}
			return Summary{}, fmt.Errorf("lakegen: %w", err)
		}
		sum.Files++
		sum.RowGroups += stats[k].rowGroups
		sum.Rows += stats[k].rows
		sum.Bytes += stats[k].bytes
	}
	return sum, nil
}

// prepareOut creates out, or checks that it is empty, or with overwrite
// removes the partitions that are about to be written.
func prepareOut(out string, overwrite bool, years []int) error {
	ents, err := os.ReadDir(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(out, 0o755)
	case err != nil:
		return fmt.Errorf("lakegen: %w", err)
	case len(ents) == 0:
		return nil
	case !overwrite:
		return fmt.Errorf("lakegen: %s is not empty (Overwrite, or --overwrite, replaces its year=YYYY directories)", out)
	}
	for _, y := range years {
		if err := os.RemoveAll(filepath.Join(out, yearDir(y))); err != nil {
			return fmt.Errorf("lakegen: %w", err)
		}
	}
	return nil
}

// rowText and rowDate are the two row layouts: period as an EIA-style string
// or as a DATE.
type rowText struct {
	SeriesID  string   `parquet:"series_id,dict"`
	Period    string   `parquet:"period,dict"`
	Value     *float64 `parquet:"value,optional"`
	Units     string   `parquet:"units,dict"`
	Frequency string   `parquet:"frequency,dict"`
	Name      string   `parquet:"name,dict"`
	Category  string   `parquet:"category,dict"`
}

type rowDate struct {
	SeriesID  string   `parquet:"series_id,dict"`
	Period    int32    `parquet:"period,date"`
	Value     *float64 `parquet:"value,optional"`
	Units     string   `parquet:"units,dict"`
	Frequency string   `parquet:"frequency,dict"`
	Name      string   `parquet:"name,dict"`
	Category  string   `parquet:"category,dict"`
}

func (r *rowText) set(a *attrs, period string, _ int32, v *float64) {
	*r = rowText{SeriesID: a.id, Period: period, Value: v, Units: a.units, Frequency: a.frequency, Name: a.name, Category: a.category}
}

func (r *rowDate) set(a *attrs, _ string, day int32, v *float64) {
	*r = rowDate{SeriesID: a.id, Period: day, Value: v, Units: a.units, Frequency: a.frequency, Name: a.name, Category: a.category}
}

type rowPtr[T any] interface {
	*T
	set(a *attrs, period string, day int32, v *float64)
}

var zstdCodec = &zstd.Codec{Level: zstd.SpeedDefault}

func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(zstdCodec),
		// A fixed creator string: the default embeds the build, and the files
		// must not depend on which binary wrote them.
		parquet.CreatedBy("servingsnap lakegen", "1", "parquet-go"),
	}
}

type fileStat struct {
	rowGroups int
	rows      int64
	bytes     int64
}

// parquetFile writes row groups of T to a new file.
type parquetFile[T any] struct {
	f    *os.File
	w    *parquet.GenericWriter[T]
	stat fileStat
	path string
}

func createParquet[T any](path string) (*parquetFile[T], error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("lakegen: %w", err)
	}
	return &parquetFile[T]{f: f, w: parquet.NewGenericWriter[T](f, writerOptions()...), path: path}, nil
}

func (p *parquetFile[T]) writeGroup(rows []T) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := p.w.Write(rows); err != nil {
		return fmt.Errorf("lakegen: write %s: %w", p.path, err)
	}
	if err := p.w.Flush(); err != nil {
		return fmt.Errorf("lakegen: write %s: %w", p.path, err)
	}
	p.stat.rowGroups++
	p.stat.rows += int64(len(rows))
	return nil
}

func (p *parquetFile[T]) finish() (fileStat, error) {
	err := p.w.Close()
	if err == nil {
		var st os.FileInfo
		if st, err = p.f.Stat(); err == nil {
			p.stat.bytes = st.Size()
		}
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileStat{}, fmt.Errorf("lakegen: write %s: %w", p.path, err)
	}
	return p.stat, nil
}

func (p *parquetFile[T]) abort() { p.f.Close() }

// writeTask generates and writes one file: the active series of t's range,
// whole series per row group, rows shuffled inside each group.
func writeTask[T any, P rowPtr[T]](ctx context.Context, g *generator, t *fileTask, ph progress.Phase) (fileStat, error) {
	pf, err := createParquet[T](t.tmp)
	if err != nil {
		return fileStat{}, err
	}
	ok := false
	defer func() {
		if !ok {
			pf.abort()
		}
	}()

	yi := t.year - g.opt.FromYear
	cal := g.cals[yi]
	// A group holds at most RowGroupRows rows or one series (≤ 262 rows),
	// and never more than the file.
	capRows := int(min(int64(max(g.opt.RowGroupRows, 366)), t.rows))
	rows := make([]T, 0, capRows)
	vals := make([]float64, capRows)
	nulls := make([]bool, capRows)
	var pcg, order rand.PCG
	r := rand.New(&pcg)
	shuffler := rand.New(&order)
	group := 0

	flush := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		order.Seed(g.orderKey^uint64(t.year)<<20^uint64(t.part), uint64(group))
		shuffler.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		group++
		err := pf.writeGroup(rows)
		ph.Add(int64(len(rows)), 0)
		rows = rows[:0]
		return err
	}

	for i := t.lo; i < t.hi; i++ {
		if int(g.start[i]) > yi {
			continue
		}
		f := g.freq[i]
		n := g.counts[f][yi]
		if len(rows) > 0 && len(rows)+n > g.opt.RowGroupRows {
			if err := flush(); err != nil {
				return fileStat{}, err
			}
		}
		c := g.core(i, &pcg, r)
		a := g.render(i, &c)
		base := len(rows)
		v, nl := vals[base:base+n], nulls[base:base+n]
		g.walk(i, &c, t.year, v, nl, &pcg, r)
		pl := &cal[f]
		for k := range n {
			var vp *float64
			if !nl[k] {
				vp = &v[k]
			}
			rows = append(rows, *new(T))
			P(&rows[base+k]).set(&a, pl.text[k], pl.days[k], vp)
		}
	}
	if err := flush(); err != nil {
		return fileStat{}, err
	}
	st, err := pf.finish()
	ok = true // closed by finish
	if err != nil {
		return fileStat{}, err
	}
	if st.rows != t.rows {
		return fileStat{}, fmt.Errorf("lakegen: internal error: %s has %d rows, planned %d", t.path, st.rows, t.rows)
	}
	return st, nil
}
