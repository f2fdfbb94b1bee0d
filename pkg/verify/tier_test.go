package verify

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/inspect"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
	"github.com/energyscope/servingsnap/pkg/vortexio"
)

// tierFixture is the main fixture's lake built with each tier policy: a
// hot window by date (most rows cold), by row count, and every row cold
// (--format vortex). Built once, never modified.
type tierFixture struct {
	lake  string
	dirs  map[string]string // variant -> dataset directory (named SYN)
	cold  map[string]string // variant -> the cold file, manifest-relative
	index map[string]string // variant -> the index file
	data  map[string]string
}

var (
	tierOnce sync.Once
	tierFix  *tierFixture
)

// tierVariants are the policies built, by name.
var tierVariants = map[string]coldfile.Policy{
	"since":   {HotSince: int32(mustDay("2022-01-01")), HasHotSince: true},
	"rows":    {HotRows: 3},
	"allcold": {AllCold: true},
}

func mustDay(s string) int32 {
	p, err := period.Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

func getTierFixture(t testing.TB) *tierFixture {
	t.Helper()
	f := getFixture(t)
	tierOnce.Do(func() {
		tf := &tierFixture{lake: f.lake, dirs: map[string]string{}, cold: map[string]string{}, index: map[string]string{}, data: map[string]string{}}
		for name, p := range tierVariants {
			ds := filepath.Join(fixRoot, "tier-"+name, "SYN")
			testsnap.Build(t, f.lake, ds, func(o *sortwrite.Options) { o.BatchRows = 5000; o.Tiers = p })
			m := loadManifest(t, ds, 0)
			c, ok := m.FileByRole(manifest.RoleCold)
			if !ok || m.FormatVersion != manifest.Version {
				t.Fatalf("%s: format_version %d, no cold file", name, m.FormatVersion)
			}
			x, _ := m.FileByRole(manifest.RoleIndex)
			d, _ := m.FileByRole(manifest.RoleData)
			tf.dirs[name], tf.cold[name], tf.index[name], tf.data[name] = ds, c.Path, x.Path, d.Path
		}
		tierFix = tf
	})
	if tierFix == nil {
		t.Fatal("tier fixture failed to build")
	}
	return tierFix
}

// copyOf copies a variant into a fresh directory named SYN.
func (tf *tierFixture) copyOf(t testing.TB, variant string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "SYN")
	copyTree(t, tf.dirs[variant], dst)
	return dst
}

// TestTieredIntact: every tier policy verifies clean at every level, and
// the report counts both tiers.
func TestTieredIntact(t *testing.T) {
	tf := getTierFixture(t)
	for _, name := range []string{"since", "rows", "allcold"} {
		t.Run(name, func(t *testing.T) {
			ds := tf.dirs[name]
			m := loadManifest(t, ds, 0)
			c, _ := m.FileByRole(manifest.RoleCold)
			for _, opt := range []Options{{}, {Deep: true}, {Deep: true, Against: tf.lake}, {Against: tf.lake}} {
				rep, err := Verify(ds, opt)
				if err != nil {
					t.Fatal(err)
				}
				if !rep.OK {
					t.Fatalf("%+v: findings:%s", opt, findings(rep))
				}
				if rep.Rows != m.Stats.Rows || rep.ColdRows != c.Rows || rep.ColdChunks != c.Batches || c.Rows == 0 {
					t.Errorf("%+v: rows %d cold %d in %d chunks; manifest: %d rows, cold %d in %d chunks", opt, rep.Rows, rep.ColdRows, rep.ColdChunks, m.Stats.Rows, c.Rows, c.Batches)
				}
			}
		})
	}
	// The decode windows are bounded whatever the file's chunks.
	if w := windows([]int64{0, 10, 200000, 200001}, 200001); !equalInts(w, []int64{0, 10, 10 + maxColdWindow, 10 + 2*maxColdWindow, 10 + 3*maxColdWindow, 200000, 200001}) {
		t.Errorf("windows: %v", w)
	}
}

// coldColumns reads the index's tier columns (and row_count, first_period)
// of a dataset copy.
type tierCols struct {
	start, rows []int64
	first, last []arrow.Date32
	rowCount    []int64
	firstP      []arrow.Date32
}

func readTierCols(t *testing.T, ds, rel string) tierCols {
	_, xr := readArrow(t, filepath.Join(ds, rel))
	x := xr[0]
	i64 := func(c int) []int64 { return append([]int64(nil), x.Column(c).(*array.Int64).Int64Values()...) }
	d32 := func(c int) []arrow.Date32 {
		return append([]arrow.Date32(nil), x.Column(c).(*array.Date32).Date32Values()...)
	}
	return tierCols{start: i64(index.ColumnColdStart), rows: i64(index.ColumnColdRows),
		first: d32(index.ColumnColdFirstPeriod), last: d32(index.ColumnColdLastPeriod),
		rowCount: i64(index.ColumnRowCount), firstP: d32(index.ColumnFirstPeriod)}
}

// writeTierCols rewrites the index with the given columns (resealed).
func writeTierCols(t *testing.T, ds, rel string, c tierCols) {
	xs, xr := readArrow(t, filepath.Join(ds, rel))
	x := xr[0]
	x = withColumn(x, index.ColumnColdStart, int64s(c.start))
	x = withColumn(x, index.ColumnColdRows, int64s(c.rows))
	x = withColumn(x, index.ColumnColdFirstPeriod, dates(c.first, nil))
	x = withColumn(x, index.ColumnColdLastPeriod, dates(c.last, nil))
	x = withColumn(x, index.ColumnRowCount, int64s(c.rowCount))
	x = withColumn(x, index.ColumnFirstPeriod, dates(c.firstP, nil))
	writeArrow(t, ds, rel, xs, []arrow.RecordBatch{x})
}

// coldSeries returns the first series (from k) with at least min cold rows.
func coldSeries(t *testing.T, c tierCols, k int, min int64) int {
	for i := k; i < len(c.rows); i++ {
		if c.rows[i] >= min {
			return i
		}
	}
	t.Fatalf("no series from %d with %d cold rows", k, min)
	return -1
}

// rewriteCold decodes the cold file, lets edit change its rows, and
// writes it back cut at the same chunks, resealing the manifest.
func rewriteCold(t *testing.T, ds, rel string, edit func(rec arrow.RecordBatch) arrow.RecordBatch) {
	p := filepath.Join(ds, filepath.FromSlash(rel))
	vf, err := vortexio.OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	bounds, err := chunkBounds(vf)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := vf.ReadRange(nil, 0, vf.NumRows())
	vf.Close()
	if err != nil {
		t.Fatal(err)
	}
	rec = edit(rec)
	os.Remove(p)
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := vortexio.NewWriter(fh, rec.Schema(), vortexio.WriterOptions{ChunkRows: 65536})
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k+1 < len(bounds); k++ {
		part := rec.NewSlice(bounds[k], bounds[k+1])
		if err := w.Write(part); err != nil {
			t.Fatal(err)
		}
		if err := w.Cut(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	chunks := len(w.ChunkRows())
	fh.Close()
	sum, size, err := fileutil.ChecksumFile(p)
	if err != nil {
		t.Fatal(err)
	}
	editManifest(t, ds, func(m *manifest.Manifest) {
		for i := range m.Files {
			if m.Files[i].Path == rel {
				m.Files[i].Size, m.Files[i].Checksum, m.Files[i].Batches, m.Files[i].Rows = size, sum, chunks, rec.NumRows()
			}
		}
	})
}

// TestTieredSemantic rewrites a tiered snapshot's index tier columns or
// cold rows into valid files that break the format's rules, checksums
// resealed: an out-of-bounds or inconsistent location is a fast finding;
// a shift that stays in bounds only --deep can see; a changed cold value
// only --against. Nothing panics, and fast-clean snapshots open.
func TestTieredSemantic(t *testing.T) {
	tf := getTierFixture(t)
	type level int
	const (
		fast level = iota
		deep
		against
	)
	cases := []struct {
		name      string
		variant   string
		level     level  // the first level that must find it
		wantCheck string // the check that finds it there
		damage    func(t *testing.T, ds string)
	}{
		{"control: index and cold file rewritten unchanged", "since", -1, "", func(t *testing.T, ds string) {
			writeTierCols(t, ds, tf.index["since"], readTierCols(t, ds, tf.index["since"]))
			rewriteCold(t, ds, tf.cold["since"], func(r arrow.RecordBatch) arrow.RecordBatch { return r })
		}},
		{"cold_start shifted by one", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 5, 2)
			c.start[i]++
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"cold_rows grown by one", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			c.rows[coldSeries(t, c, 5, 2)]++
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"last series' cold_rows past the end of the file", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			c.rows[len(c.rows)-1] += 1000
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"cold_rows negative", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			c.rows[coldSeries(t, c, 3, 1)] = -1
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"cold_last_period moved onto the first hot period", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 7, 2)
			c.last[i] = arrow.Date32(mustDay("2022-01-01") + 400) // after the first hot row
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"cold_first_period alone moved a day (first_period disagrees)", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			c.first[coldSeries(t, c, 9, 3)]++
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"row_count 0 outside an all-cold snapshot", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			c.rowCount[len(c.rowCount)-1] = 0
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"row_count 1 in an all-cold snapshot", "allcold", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["allcold"])
			c.rowCount[4] = 1
			writeTierCols(t, ds, tf.index["allcold"], c)
		}},
		{"hot rows: a series' first hot period moved onto its last cold period", "since", fast, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 15, 1)
			sc, recs := readArrow(t, filepath.Join(ds, tf.data["since"]))
			_, xr := readArrow(t, filepath.Join(ds, tf.index["since"]))
			b := int(xr[0].Column(index.ColumnBatch).(*array.Uint32).Value(i))
			off := int(xr[0].Column(index.ColumnBatchOffset).(*array.Uint32).Value(i))
			p := append([]arrow.Date32(nil), recs[b].Column(1).(*array.Date32).Date32Values()...)
			p[off] = c.last[i]
			recs[b] = withColumn(recs[b], 1, dates(p, nil))
			writeArrow(t, ds, tf.data["since"], sc, recs)
		}},
		{"boundary between two series' cold rows moved by one (tiling intact)", "since", deep, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 10, 3)
			j := coldSeries(t, c, i+1, 1)
			if j != i+1 {
				t.Skipf("series %d and %d are not neighbours", i, j) // the fixture has cold rows in every series
			}
			c.rows[i]--
			c.start[j]--
			c.rows[j]++
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"cold_first_period and first_period moved a day together", "since", deep, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 12, 3)
			c.first[i]++
			c.firstP[i]++
			writeTierCols(t, ds, tf.index["since"], c)
		}},
		{"cold_last_period moved back a day", "rows", deep, CheckCold, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["rows"])
			i := coldSeries(t, c, 14, 3)
			c.last[i]--
			writeTierCols(t, ds, tf.index["rows"], c)
		}},
		{"cold rows: periods of a series reversed", "since", deep, CheckSort, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 2, 4)
			lo, hi := c.start[i], c.start[i]+c.rows[i]
			rewriteCold(t, ds, tf.cold["since"], func(r arrow.RecordBatch) arrow.RecordBatch {
				p := append([]arrow.Date32(nil), r.Column(1).(*array.Date32).Date32Values()...)
				for a, b := lo, hi-1; a < b; a, b = a+1, b-1 {
					p[a], p[b] = p[b], p[a]
				}
				return withColumn(r, 1, dates(p, nil))
			})
		}},
		{"cold rows: a series code changed inside a run", "since", deep, CheckSeriesCode, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 6, 3)
			rewriteCold(t, ds, tf.cold["since"], func(r arrow.RecordBatch) arrow.RecordBatch {
				codes := append([]uint32(nil), r.Column(0).(*array.Uint32).Uint32Values()...)
				codes[c.start[i]+1] = uint32(i - 1) // the previous series starts again
				return withColumn(r, 0, uint32s(codes))
			})
		}},
		{"all cold: the latest value of a series changed", "allcold", deep, CheckIndex, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["allcold"])
			i := coldSeries(t, c, 8, 2)
			rewriteCold(t, ds, tf.cold["allcold"], func(r arrow.RecordBatch) arrow.RecordBatch {
				return withColumn(r, 2, float64s(r.Column(2), func(v []float64, valid []bool) {
					for k := c.start[i] + c.rows[i] - 1; k >= c.start[i]; k-- {
						if valid[k] {
							v[k] += 1
							return
						}
					}
				}))
			})
		}},
		{"cold rows: a value in the middle of a series changed", "since", against, CheckAgainst, func(t *testing.T, ds string) {
			c := readTierCols(t, ds, tf.index["since"])
			i := coldSeries(t, c, 1, 4)
			rewriteCold(t, ds, tf.cold["since"], func(r arrow.RecordBatch) arrow.RecordBatch {
				return withColumn(r, 2, float64s(r.Column(2), func(v []float64, valid []bool) {
					k := c.start[i] + 1
					v[k], valid[k] = v[k]+1, true
				}))
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := tf.copyOf(t, tc.variant)
			tc.damage(t, ds)
			opts := []Options{{}, {Deep: true}, {Deep: true, Against: tf.lake}}
			var reps []*Report
			for _, o := range opts {
				var rep *Report
				safely(t, "verify", func() {
					var err error
					if rep, err = Verify(ds, o); err != nil {
						t.Fatal(err)
					}
				})
				if rep == nil {
					return
				}
				for _, fd := range rep.Findings {
					if fd.File == "" || fd.Check == CheckPanic {
						t.Errorf("%+v: bad finding %s", o, fd)
					}
				}
				reps = append(reps, rep)
			}
			for l, rep := range reps {
				want := tc.wantCheck != "" && level(l) >= tc.level
				if !want {
					if !rep.OK {
						t.Errorf("level %d should be clean (only a later level can tell):%s", l, findings(rep))
					}
					continue
				}
				found := false
				for _, fd := range rep.Findings {
					found = found || fd.Check == tc.wantCheck
				}
				if !found {
					t.Errorf("level %d: no %q finding among:%s", l, tc.wantCheck, findings(rep))
				}
			}
			if reps[0].OK && !reps[0].Opens {
				t.Errorf("fast verification is clean but the snapshot does not open")
			}
			if len(reps[len(reps)-1].Findings) > 0 {
				t.Logf("first finding: %s", reps[len(reps)-1].Findings[0])
			}
		})
	}
}

// TestCorruptionColdByteFaults damages cold.vortex (flips, truncations,
// zeroed pages, deletion, swaps) without resealing: fast verification
// reports every one, and snapshot.Open with VerifyData refuses each.
func TestCorruptionColdByteFaults(t *testing.T) {
	tf := getTierFixture(t)
	f := getFixture(t)
	ds := tf.dirs["since"]
	rel := tf.cold["since"]
	faults := coldByteFaults(t, tf, f, ds, rel)
	runFaultSuite(t, ds, faults, "")
}

func coldByteFaults(t *testing.T, tf *tierFixture, f *fixture, ds, rel string) []fault {
	st, err := os.Stat(filepath.Join(ds, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	n := st.Size()
	var out []fault
	rng := newRng(77)
	for i := 0; i < 150; i++ {
		off, x := rng.Int64N(n), byte(1+rng.IntN(255))
		out = append(out, fault{"flip", "cold", "byte", flipAt(rel, off, x)})
	}
	for i := 0; i < 60; i++ {
		out = append(out, fault{"truncate", "cold", "", truncateTo(rel, rng.Int64N(n))})
	}
	for off := int64(0); off < n; off += 4096 {
		out = append(out, fault{"zero-page", "cold", "", zeroAt(rel, off)})
	}
	out = append(out,
		fault{"delete", "cold", rel, func(d string) (bool, error) { return true, os.Remove(filepath.Join(d, filepath.FromSlash(rel))) }},
		fault{"swap", "cold", "the all-cold build's cold.vortex", replaceWith(rel, readFile(t, tf.dirs["allcold"], tf.cold["allcold"]))},
		fault{"swap", "cold", "the hot-rows build's cold.vortex", replaceWith(rel, readFile(t, tf.dirs["rows"], tf.cold["rows"]))},
		fault{"swap", "index", "the untiered build's index.arrow (version 2)", replaceWith(tf.index["since"], readFile(t, f.ds, f.index))},
		fault{"swap", "cold", "data.arrow as cold.vortex", replaceWith(rel, readFile(t, ds, tf.data["since"]))},
	)
	return out
}

// TestResealedColdMutants flips bytes of cold.vortex and reseals its
// checksum, so that only the structure of the file and the rows can tell:
// nothing panics (verify at any level, snapinspect), whatever a level
// finds the levels including it find, and a mutant fast verification
// accepts opens.
func TestResealedColdMutants(t *testing.T) {
	tf := getTierFixture(t)
	for _, variant := range []string{"since", "allcold"} {
		t.Run(variant, func(t *testing.T) {
			src, rel := tf.dirs[variant], tf.cold[variant]
			img := snapshotImage(t, src)
			pristine := img.files[rel]
			ds := filepath.Join(t.TempDir(), "SYN")
			rng := newRng(91)
			var found, quiet, byFast int
			for k := 0; k < 60; k++ {
				off := rng.IntN(len(pristine))
				if err := img.restore(ds); err != nil {
					t.Fatal(err)
				}
				b := append([]byte(nil), pristine...)
				b[off] ^= byte(1 + rng.IntN(255))
				p := filepath.Join(ds, filepath.FromSlash(rel))
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				sum, _, err := fileutil.ChecksumFile(p)
				if err != nil {
					t.Fatal(err)
				}
				editManifest(t, ds, func(m *manifest.Manifest) {
					for i := range m.Files {
						if m.Files[i].Path == rel {
							m.Files[i].Checksum = sum
						}
					}
				})
				desc := "byte " + itoa(off)
				counts := make([]int, 3)
				for i, o := range []Options{{}, {Deep: true}, {Deep: true, Against: tf.lake}} {
					safely(t, desc+": verify", func() {
						rep, err := Verify(ds, o)
						if err != nil {
							t.Errorf("%s: %v", desc, err)
							return
						}
						counts[i] = len(rep.Findings)
						for _, fd := range rep.Findings {
							if fd.File == "" || fd.Check == CheckPanic {
								t.Errorf("%s: bad finding %s", desc, fd)
							}
						}
					})
				}
				safely(t, desc+": inspect", func() { inspectAll(t, ds) })
				if counts[0] > 0 && (counts[1] == 0 || counts[2] == 0) {
					t.Errorf("%s: fast finds %d, deep %d, against %d", desc, counts[0], counts[1], counts[2])
				}
				if counts[1] > 0 && counts[2] == 0 {
					t.Errorf("%s: deep finds %d, against %d", desc, counts[1], counts[2])
				}
				switch {
				case counts[0] > 0:
					byFast++
					found++
				case counts[2] > 0:
					found++
				default:
					quiet++
					// Found by no level: then no row may differ.
					if !sameColdRows(t, filepath.Join(src, filepath.FromSlash(rel)), p) {
						t.Errorf("%s: the cold rows decode differently, and no level found it", desc)
					}
				}
			}
			t.Logf("60 resealed byte flips: %d found (%d by fast), %d by no level (bytes no row depends on)", found, byFast, quiet)
		})
	}
}

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

func itoa(i int) string { return strconv.Itoa(i) }

// inspectAll runs what snapinspect runs on a dataset (summary, latest of
// every series, every series' rows): errors are fine, panics are not
// (safely catches them).
func inspectAll(t *testing.T, ds string) {
	inspect.Summarize(ds, 0)
	s, err := inspect.Open(ds, 0)
	if err != nil {
		return
	}
	defer s.Close()
	inspect.Latest(s, inspect.LatestQuery{All: true})
	var ids []string
	for i := 0; i < s.Index().Len(); i++ {
		ids = append(ids, s.Index().SeriesID(i))
	}
	inspect.WriteSeries(io.Discard, s, ids, inspect.Range{}, "csv")
}

// sameColdRows reports whether two cold files decode to equal rows (false
// when either does not decode).
func sameColdRows(t *testing.T, a, b string) bool {
	read := func(p string) arrow.RecordBatch {
		vf, err := vortexio.OpenFile(p)
		if err != nil {
			return nil
		}
		defer vf.Close()
		rec, err := vf.ReadRange(nil, 0, vf.NumRows())
		if err != nil {
			return nil
		}
		return rec
	}
	ra, rb := read(a), read(b)
	if ra == nil || rb == nil {
		return false
	}
	defer ra.Release()
	defer rb.Release()
	return array.RecordEqual(ra, rb)
}

// TestResealedTierColumnMutants shifts single values of the index's tier
// columns (cold_start, cold_rows, cold_first_period, cold_last_period) of
// several series by small and large amounts, the index resealed: a value
// thrown out of bounds is a fast finding, every change is at least a deep
// finding (each tier column is determined by the cold rows), and nothing
// panics in verify or snapinspect.
func TestResealedTierColumnMutants(t *testing.T) {
	tf := getTierFixture(t)
	type mut struct {
		col   int
		delta int64
		oob   bool // out of bounds: fast must find it
	}
	var muts []mut
	for _, col := range []int{index.ColumnColdStart, index.ColumnColdRows} {
		muts = append(muts, mut{col, 1, false}, mut{col, -1, false}, mut{col, 1 << 40, true}, mut{col, -(1 << 40), true})
	}
	for _, col := range []int{index.ColumnColdFirstPeriod, index.ColumnColdLastPeriod} {
		muts = append(muts, mut{col, 1, false}, mut{col, -1, false}, mut{col, 1 << 30, true}, mut{col, -(1 << 30), true})
	}
	for _, variant := range []string{"since", "allcold"} {
		t.Run(variant, func(t *testing.T) {
			rel := tf.index[variant]
			c0 := readTierCols(t, tf.dirs[variant], rel)
			n := len(c0.rows)
			img := snapshotImage(t, tf.dirs[variant])
			ds := filepath.Join(t.TempDir(), "SYN")
			var tried, byFast int
			for _, i := range []int{0, 1, n / 2, n - 2, n - 1} {
				for _, mu := range muts {
					if err := img.restore(ds); err != nil {
						t.Fatal(err)
					}
					c := readTierCols(t, ds, rel)
					switch mu.col {
					case index.ColumnColdStart:
						c.start[i] += mu.delta
					case index.ColumnColdRows:
						c.rows[i] += mu.delta
					case index.ColumnColdFirstPeriod:
						c.first[i] = arrow.Date32(int64(c.first[i]) + mu.delta)
					case index.ColumnColdLastPeriod:
						c.last[i] = arrow.Date32(int64(c.last[i]) + mu.delta)
					}
					writeTierCols(t, ds, rel, c)
					desc := "series " + itoa(i) + " column " + itoa(mu.col) + " + " + strconv.FormatInt(mu.delta, 10)
					tried++
					var counts [2]int
					for k, o := range []Options{{}, {Deep: true}} {
						safely(t, desc, func() {
							rep, err := Verify(ds, o)
							if err != nil {
								t.Errorf("%s: %v", desc, err)
								return
							}
							counts[k] = len(rep.Findings)
							for _, fd := range rep.Findings {
								if fd.File == "" || fd.Check == CheckPanic {
									t.Errorf("%s: bad finding %s", desc, fd)
								}
							}
						})
					}
					safely(t, desc+": inspect", func() { inspectAll(t, ds) })
					if counts[1] == 0 {
						t.Errorf("%s: deep verification found nothing", desc)
					}
					if mu.oob && counts[0] == 0 {
						t.Errorf("%s: out of bounds, but fast verification found nothing", desc)
					}
					if counts[0] > 0 {
						byFast++
					}
				}
			}
			t.Logf("%d tier-column mutants: all found by deep, %d already by fast", tried, byFast)
		})
	}
}
