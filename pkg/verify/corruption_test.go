package verify

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// The corruption suite damages a copy of a pristine snapshot in every way
// a disk, a copy tool or a careless hand can, and checks that fast
// verification reports each damage and that snapshot.Open with VerifyData
// refuses every snapshot fast verification rejects (docs/ARCHITECTURE.md
// "Invariants", 8). The seeds are fixed, so a failure reproduces.

var indexRE = regexp.MustCompile(`\[\d+\]`)

// fault is one damage applied to a fresh copy of the dataset.
type fault struct {
	class  string // flip, truncate, zero-page, delete, swap, dangling, garbage, ...
	target string // data, index, manifest, CURRENT, dataset
	desc   string
	// apply damages the dataset at ds; false means the damage turned out
	// to change nothing (a zero page over zeros) and the fault is skipped.
	apply func(ds string) (bool, error)
}

// checks that snapshot.Open makes too: a finding from one of them means
// Open must refuse. The others (manifest-rules, arrow magic, schema,
// stats) are verify-only.
var openChecks = map[string]bool{CheckCurrent: true, CheckManifest: true, CheckFiles: true, CheckChecksum: true, CheckOpen: true}

type tally struct {
	tried, detected, skipped int
	verifyOnly               int // detected by checks Open does not make (Open accepts)
}

func TestCorruptionByteFaults(t *testing.T) {
	f := getFixture(t)
	runFaultSuite(t, f.ds, byteFaults(t, f), f.port)
}

// runFaultSuite applies each fault to a fresh copy of the pristine
// dataset at src and checks that fast verification reports it and that
// snapshot.Open with VerifyData refuses exactly what an open check
// rejects. port is the portable copy's path ("" for none), which no
// server opens.
func runFaultSuite(t *testing.T, src string, faults []fault, port string) {
	start := time.Now()
	img := snapshotImage(t, src)

	// Faults run on parallel workers, each on its own fresh copy.
	outcomes := make([]outcome, len(faults))
	workers := max(runtime.GOMAXPROCS(0), 2)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		ds := filepath.Join(t.TempDir(), filepath.Base(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				outcomes[i] = runFault(faults[i], img, ds)
			}
		}()
	}
	for i := range faults {
		next <- i
	}
	close(next)
	wg.Wait()

	tallies := map[string]*tally{}
	verifyOnly := map[string]int{}
	for i, fl := range faults {
		o := outcomes[i]
		key := fl.target + "/" + fl.class
		what := fmt.Sprintf("fault %d %s %s", i, key, fl.desc)
		tl := tallies[key]
		if tl == nil {
			tl = &tally{}
			tallies[key] = tl
		}
		if o.err != nil {
			t.Errorf("%s: %v", what, o.err)
			continue
		}
		if !o.changed {
			tl.skipped++
			continue
		}
		tl.tried++
		rep, oerr := o.rep, o.openErr
		if rep.Opens != (oerr == nil) && rep.SnapshotID != 0 {
			t.Errorf("%s: report says opens=%v, snapshot.Open says %v", what, rep.Opens, oerr)
		}
		if len(rep.Findings) > 0 {
			tl.detected++
			byOpenCheck := false
			for _, fd := range rep.Findings {
				// The server never opens the portable copy, so Open
				// cannot refuse what is wrong with it alone.
				byOpenCheck = byOpenCheck || openChecks[fd.Check] && (port == "" || fd.File != port)
				if fd.File == "" {
					t.Errorf("%s: finding names no file: %s", what, fd)
				}
			}
			switch {
			case byOpenCheck && oerr == nil:
				t.Errorf("%s: snapshot.Open accepts a snapshot fast verification rejects:%s", what, findings(rep))
			case !byOpenCheck && oerr != nil:
				t.Errorf("%s: snapshot.Open refuses (%v) but verification only reports:%s", what, oerr, findings(rep))
			case !byOpenCheck:
				tl.verifyOnly++
				for _, fd := range rep.Findings {
					verifyOnly[fd.Check+" "+indexRE.ReplaceAllString(fd.Location, "[]")]++
				}
			}
			continue
		}
		if oerr != nil {
			t.Errorf("%s: verification found nothing, snapshot.Open refuses: %v", what, oerr)
			continue
		}
		// Undetected. Every byte of every file is covered by a checksum
		// or a rule (the manifest carries its own checksum), so any fault
		// that changes a byte and goes unnoticed is a hole, whatever the
		// field: no fault class is excused here.
		t.Errorf("%s: not detected by fast verification, and snapshot.Open accepts it", what)
	}

	var keys []string
	for k := range tallies {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var tot tally
	t.Logf("%-22s %6s %8s %7s %11s", "fault class", "tried", "detected", "skipped", "verify-only")
	for _, k := range keys {
		x := tallies[k]
		t.Logf("%-22s %6d %8d %7d %11d", k, x.tried, x.detected, x.skipped, x.verifyOnly)
		tot.tried += x.tried
		tot.detected += x.detected
		tot.skipped += x.skipped
		tot.verifyOnly += x.verifyOnly
	}
	t.Logf("%-22s %6d %8d %7d %11d", "total", tot.tried, tot.detected, tot.skipped, tot.verifyOnly)
	t.Logf("columns: verify-only = detected only by checks snapshot.Open does not make (Open accepts); skipped = the damage changed no byte (zeros over zeros, a file replaced by itself)")
	if tot.detected != tot.tried {
		t.Errorf("%d of %d faults that changed bytes went undetected", tot.tried-tot.detected, tot.tried)
	}
	if len(verifyOnly) > 0 {
		t.Logf("findings of faults snapshot.Open accepts, by check and location: %v", verifyOnly)
	}
	t.Logf("%d faults on %d workers in %s", len(faults), workers, time.Since(start).Round(time.Millisecond))
}

// outcome is what one fault led to.
type outcome struct {
	err     error
	changed bool
	rep     *Report
	openErr error
}

// runFault restores the pristine image at ds, applies fl, and verifies.
// It runs on worker goroutines, so it reports through its result.
func runFault(fl fault, img *image, ds string) (o outcome) {
	if o.err = img.restore(ds); o.err != nil {
		return o
	}
	if o.changed, o.err = fl.apply(ds); o.err != nil || !o.changed {
		return o
	}
	if o.rep, o.err = Verify(ds, Options{}); o.err != nil {
		o.err = fmt.Errorf("Verify returned an error instead of findings: %w", o.err)
		return o
	}
	s, err := snapshot.Open(ds, snapshot.Options{VerifyData: true})
	if err == nil {
		s.Close()
	}
	o.openErr = err
	return o
}

// image is a dataset directory held in memory, to restore fresh copies
// quickly.
type image struct {
	dirs  []string
	files map[string][]byte // slash-separated relative path -> content
}

func snapshotImage(t testing.TB, src string) *image {
	img := &image{files: map[string][]byte{}}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			img.dirs = append(img.dirs, rel)
			return nil
		}
		b, err := os.ReadFile(p)
		img.files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func (img *image) restore(dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	for _, d := range img.dirs {
		if err := os.MkdirAll(filepath.Join(dst, d), 0o755); err != nil {
			return err
		}
	}
	for rel, b := range img.files {
		if err := os.WriteFile(filepath.Join(dst, filepath.FromSlash(rel)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// byteFaults lists the byte-level faults, from fixed seeds.
func byteFaults(t testing.TB, f *fixture) []fault {
	rng := rand.New(rand.NewPCG(2024, 3))
	size := func(rel string) int64 {
		st, err := os.Stat(filepath.Join(f.ds, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	var out []fault
	files := []struct {
		target, rel                     string
		flips, truncs, pages, unaligned int
	}{
		{"data", f.data, 300, 100, 40, 20},
		{"index", f.index, 300, 100, 40, 20},
		{"portable", f.port, 150, 50, 20, 10},
		{"manifest", f.man, 400, 100, 1, 10},
		{"CURRENT", dataset.CurrentFile, 0, 0, 1, 0}, // exhaustive below
	}
	for _, fl := range files {
		rel, n := fl.rel, size(fl.rel)
		for i := 0; i < fl.flips; i++ {
			off, x := rng.Int64N(n), byte(1+rng.IntN(255))
			out = append(out, fault{"flip", fl.target, fmt.Sprintf("byte %d ^= %#02x", off, x), flipAt(rel, off, x)})
		}
		for i := 0; i < fl.truncs; i++ {
			l := rng.Int64N(n)
			out = append(out, fault{"truncate", fl.target, fmt.Sprintf("to %d of %d bytes", l, n), truncateTo(rel, l)})
		}
		pages := (n + 4095) / 4096
		for i := 0; i < fl.pages; i++ {
			off := 4096 * (int64(i) % pages)
			if fl.pages > int(pages) && i >= int(pages) {
				off = 4096 * rng.Int64N(pages)
			}
			out = append(out, fault{"zero-page", fl.target, fmt.Sprintf("4 KiB of zeros at %d", off), zeroAt(rel, off)})
		}
		for i := 0; i < fl.unaligned; i++ {
			off := rng.Int64N(n)
			out = append(out, fault{"zero-page", fl.target, fmt.Sprintf("4 KiB of zeros at unaligned %d", off), zeroAt(rel, off)})
		}
	}
	// CURRENT is 22 bytes: flip every byte 8 ways, truncate to every length.
	cur := size(dataset.CurrentFile)
	for off := int64(0); off < cur; off++ {
		for k := 0; k < 8; k++ {
			x := byte(1 + rng.IntN(255))
			out = append(out, fault{"flip", "CURRENT", fmt.Sprintf("byte %d ^= %#02x", off, x), flipAt(dataset.CurrentFile, off, x)})
		}
	}
	for l := int64(0); l < cur; l++ {
		out = append(out, fault{"truncate", "CURRENT", fmt.Sprintf("to %d bytes", l), truncateTo(dataset.CurrentFile, l)})
	}

	// Deleted files and directories.
	for _, d := range []struct{ target, rel string }{
		{"data", f.data}, {"index", f.index}, {"manifest", f.man}, {"CURRENT", dataset.CurrentFile},
		{"dataset", dataset.SnapshotPath(f.m.SnapshotID)}, {"dataset", dataset.ManifestsDir}, {"dataset", dataset.SnapshotsDir},
	} {
		rel := d.rel
		out = append(out, fault{"delete", d.target, rel, func(ds string) (bool, error) {
			return true, os.RemoveAll(filepath.Join(ds, filepath.FromSlash(rel)))
		}})
	}
	out = append(out, fault{"delete", "data", "data.arrow replaced by a directory", func(ds string) (bool, error) {
		p := filepath.Join(ds, filepath.FromSlash(f.data))
		if err := os.Remove(p); err != nil {
			return false, err
		}
		return true, os.Mkdir(p, 0o755)
	}})

	// Files swapped in from the donor's snapshot 2 (different data), and
	// within the snapshot.
	donor := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(f.donor, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dd, _ := f.donorM.FileByRole(manifest.RoleData)
	dx, _ := f.donorM.FileByRole(manifest.RoleIndex)
	for _, s := range []struct {
		target, desc, rel string
		content           []byte
	}{
		{"data", "donor's data.arrow", f.data, donor(dd.Path)},
		{"index", "donor's index.arrow", f.index, donor(dx.Path)},
		{"manifest", "donor's manifest 2 as manifest 1", f.man, donor(dataset.ManifestPath(2))},
		{"manifest", "donor's manifest 1 (same id and dataset, other files)", f.man, donor(dataset.ManifestPath(1))},
		{"CURRENT", "donor's CURRENT (names snapshot 2)", dataset.CurrentFile, donor(dataset.CurrentFile)},
		{"data", "index.arrow as data.arrow", f.data, readFile(t, f.ds, f.index)},
		{"index", "data.arrow as index.arrow", f.index, readFile(t, f.ds, f.data)},
	} {
		out = append(out, fault{"swap", s.target, s.desc, replaceWith(s.rel, s.content)})
	}

	// CURRENT pointing nowhere, and CURRENT garbage.
	for _, id := range []uint64{2, 9, 999999, 1000000} {
		out = append(out, fault{"dangling", "CURRENT", fmt.Sprintf("names manifest %d", id),
			replaceWith(dataset.CurrentFile, []byte(dataset.ManifestPath(id)+"\n"))})
	}
	garbage := []string{
		"", "\n", "manifests/000001.json", "manifests/000001.json\n\n", "manifests/000001.json\r\n",
		"/abs/manifests/000001.json\n", "../SYN/manifests/000001.json\n", "manifests/../manifests/000001.json\n",
		"./manifests/000001.json\n", "manifests/1.json\n", "manifests/0000001.json\n", "manifests/000000.json\n",
		"snapshots/000001\n", "manifests/000001.JSON\n", " manifests/000001.json\n", "manifests/000001.json \n",
		"manifests/000001.json\x00\n", "manifests\\000001.json\n", "manifests/-00001.json\n", "manifests/+00001.json\n",
		"MANIFESTS/000001.json\n", "manifests/000001.json\nmanifests/000001.json\n",
	}
	for i := 0; i < 40; i++ {
		b := make([]byte, rng.IntN(65))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		garbage = append(garbage, string(b))
	}
	for _, g := range garbage {
		out = append(out, fault{"garbage", "CURRENT", fmt.Sprintf("%q", g), replaceWith(dataset.CurrentFile, []byte(g))})
	}
	return out
}

func readFile(t testing.TB, ds, rel string) []byte {
	b, err := os.ReadFile(filepath.Join(ds, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flipAt(rel string, off int64, x byte) func(string) (bool, error) {
	return func(ds string) (bool, error) {
		p := filepath.Join(ds, filepath.FromSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil {
			return false, err
		}
		b[off] ^= x
		return true, os.WriteFile(p, b, 0o644)
	}
}

func truncateTo(rel string, n int64) func(string) (bool, error) {
	return func(ds string) (bool, error) {
		return true, os.Truncate(filepath.Join(ds, filepath.FromSlash(rel)), n)
	}
}

// zeroAt overwrites 4 KiB from off (or up to the end of the file) with
// zeros; it reports false if those bytes were zero already.
func zeroAt(rel string, off int64) func(string) (bool, error) {
	return func(ds string) (bool, error) {
		p := filepath.Join(ds, filepath.FromSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil {
			return false, err
		}
		end := min(off+4096, int64(len(b)))
		if !bytes.ContainsFunc(b[off:end], func(r rune) bool { return r != 0 }) {
			return false, nil
		}
		clear(b[off:end])
		return true, os.WriteFile(p, b, 0o644)
	}
}

func replaceWith(rel string, content []byte) func(string) (bool, error) {
	return func(ds string) (bool, error) {
		p := filepath.Join(ds, filepath.FromSlash(rel))
		old, _ := os.ReadFile(p)
		if bytes.Equal(old, content) {
			return false, nil
		}
		return true, os.WriteFile(p, content, 0o644)
	}
}

// TestCorruptionSemantic rewrites snapshot files into valid Arrow files
// that break the format's structural rules, with the manifest's sizes and
// checksums recomputed, so that only --deep can tell.
func TestCorruptionSemantic(t *testing.T) {
	f := getFixture(t)
	n := int(f.m.Stats.Series)
	cases := []struct {
		name      string
		fastClean bool // fast verification must pass (only --deep can tell)
		wantCheck string
		damage    func(t *testing.T, ds string)
	}{
		{"control: data and index rewritten unchanged", true, "", func(t *testing.T, ds string) {
			sc, recs := readArrow(t, filepath.Join(ds, f.data))
			writeArrow(t, ds, f.data, sc, recs)
			xs, xr := readArrow(t, filepath.Join(ds, f.index))
			writeArrow(t, ds, f.index, xs, xr)
		}},
		{"data: rows of the first two series swapped", true, CheckSort, func(t *testing.T, ds string) {
			sc, recs := readArrow(t, filepath.Join(ds, f.data))
			b0 := recs[0]
			a, b := seriesRange(b0, 0), seriesRange(b0, 1)
			recs[0] = concatRows(t, sc, b0.NewSlice(b[0], b[1]), b0.NewSlice(a[0], a[1]), b0.NewSlice(b[1], b0.NumRows()))
			writeArrow(t, ds, f.data, sc, recs)
		}},
		{"data: periods of a series reversed", true, CheckSort, func(t *testing.T, ds string) {
			sc, recs := readArrow(t, filepath.Join(ds, f.data))
			b0 := recs[0]
			r := seriesRange(b0, 2)
			parts := []arrow.RecordBatch{b0.NewSlice(0, r[0])}
			for i := r[1] - 1; i >= r[0]; i-- {
				parts = append(parts, b0.NewSlice(i, i+1))
			}
			parts = append(parts, b0.NewSlice(r[1], b0.NumRows()))
			recs[0] = concatRows(t, sc, parts...)
			writeArrow(t, ds, f.data, sc, recs)
		}},
		{"data: a period repeated (duplicate key)", true, CheckSort, func(t *testing.T, ds string) {
			sc, recs := readArrow(t, filepath.Join(ds, f.data))
			b0 := recs[0]
			r := seriesRange(b0, 3)
			p := append([]arrow.Date32(nil), b0.Column(1).(*array.Date32).Date32Values()...)
			p[r[0]+1] = p[r[0]]
			recs[0] = withColumn(b0, 1, dates(p, nil))
			writeArrow(t, ds, f.data, sc, recs)
		}},
		{"data: latest value of a series changed", true, CheckIndex, func(t *testing.T, ds string) {
			sc, recs := readArrow(t, filepath.Join(ds, f.data))
			b0 := recs[0]
			r := seriesRange(b0, 4)
			recs[0] = withColumn(b0, 2, float64s(b0.Column(2), func(v []float64, valid []bool) {
				for i := r[1] - 1; i >= r[0]; i-- {
					if valid[i] {
						v[i] += 1
						return
					}
				}
			}))
			writeArrow(t, ds, f.data, sc, recs)
		}},
		{"data: series_code out of range", true, CheckSeriesCode, func(t *testing.T, ds string) {
			sc, recs := readArrow(t, filepath.Join(ds, f.data))
			last := len(recs) - 1
			c := append([]uint32(nil), recs[last].Column(0).(*array.Uint32).Uint32Values()...)
			c[len(c)-1] = uint32(n)
			recs[last] = withColumn(recs[last], 0, uint32s(c))
			writeArrow(t, ds, f.data, sc, recs)
		}},
		{"data: a series split over two runs", true, CheckSeriesCode, func(t *testing.T, ds string) {
			sc, recs := readArrow(t, filepath.Join(ds, f.data))
			b0 := recs[0]
			r := seriesRange(b0, 6)
			c := append([]uint32(nil), b0.Column(0).(*array.Uint32).Uint32Values()...)
			c[r[0]+1] = 5 // series 5 starts again inside series 6
			recs[0] = withColumn(b0, 0, uint32s(c))
			writeArrow(t, ds, f.data, sc, recs)
		}},
		{"data: a series straddles two batches (index consistent)", true, CheckBatches, func(t *testing.T, ds string) {
			cuts := batchCuts(t, ds, f)
			cuts[1]-- // batch 0 loses its last row to batch 1
			rebatch(t, ds, f, cuts)
		}},
		{"data: batches 0 and 1 merged beyond batch_rows (index consistent)", true, CheckBatches, func(t *testing.T, ds string) {
			cuts := batchCuts(t, ds, f)
			rebatch(t, ds, f, append(cuts[:1:1], cuts[2:]...))
		}},
		{"index: latest_value changed", true, CheckIndex, func(t *testing.T, ds string) {
			editIndex(t, ds, f, index.ColLatestValue, func(a arrow.Array) arrow.Array {
				return float64s(a, func(v []float64, valid []bool) {
					for i := range v {
						if valid[i] {
							v[i] *= 1.5
							return
						}
					}
				})
			})
		}},
		{"index: latest_period nulled", true, CheckIndex, func(t *testing.T, ds string) {
			editIndex(t, ds, f, index.ColLatestPeriod, func(a arrow.Array) arrow.Array {
				v := append([]arrow.Date32(nil), a.(*array.Date32).Date32Values()...)
				valid := validity(a)
				valid[7] = false
				return dates(v, valid)
			})
		}},
		{"index: row_offset off by one", true, CheckIndex, func(t *testing.T, ds string) {
			editIndex(t, ds, f, index.ColRowOffset, func(a arrow.Array) arrow.Array {
				v := append([]int64(nil), a.(*array.Int64).Int64Values()...)
				v[10]++
				return int64s(v)
			})
		}},
		{"index: first_period moved a day", true, CheckIndex, func(t *testing.T, ds string) {
			editIndex(t, ds, f, index.ColFirstPeriod, func(a arrow.Array) arrow.Array {
				v := append([]arrow.Date32(nil), a.(*array.Date32).Date32Values()...)
				v[11]++
				return dates(v, nil)
			})
		}},
		{"index: two series ids swapped", true, CheckIndex, func(t *testing.T, ds string) {
			editIDs(t, ds, f, func(a arrow.Array) arrow.Array {
				s := a.(*array.String)
				b := array.NewStringBuilder(memory.DefaultAllocator)
				for i := 0; i < s.Len(); i++ {
					j := i
					switch i {
					case 20:
						j = 21
					case 21:
						j = 20
					}
					b.Append(s.Value(j))
				}
				return b.NewArray()
			})
		}},
		{"index: the first series id emptied", false, CheckIndex, func(t *testing.T, ds string) {
			editIDs(t, ds, f, func(a arrow.Array) arrow.Array {
				s := a.(*array.String)
				b := array.NewStringBuilder(memory.DefaultAllocator)
				b.Append("") // still sorted: "" is before every id
				for i := 1; i < s.Len(); i++ {
					b.Append(s.Value(i))
				}
				return b.NewArray()
			})
		}},
		{"index: a series id changed under its lookup table", false, CheckOpen, func(t *testing.T, ds string) {
			// The table still files the id under its old bucket: open with
			// checksums (fast) refuses it before anything is served.
			editIndex(t, ds, f, index.ColSeriesID, func(a arrow.Array) arrow.Array {
				s := a.(*array.String)
				b := array.NewStringBuilder(memory.DefaultAllocator)
				for i := 0; i < s.Len(); i++ {
					v := s.Value(i)
					if i == 5 {
						v += "0" // still sorted: the next id differs earlier
					}
					b.Append(v)
				}
				return b.NewArray()
			})
		}},
		{"index: a last_period after 9999-12-31", false, CheckIndex, func(t *testing.T, ds string) {
			editIndex(t, ds, f, index.ColLastPeriod, func(a arrow.Array) arrow.Array {
				v := append([]arrow.Date32(nil), a.(*array.Date32).Date32Values()...)
				v[len(v)-1] = arrow.Date32(period.MaxDays + 1)
				return dates(v, nil)
			})
		}},
		{"manifest: stats.first_period edited", false, CheckStats, func(t *testing.T, ds string) {
			editManifest(t, ds, func(m *manifest.Manifest) { m.Stats.FirstPeriod = "2014-12-31" })
		}},
		{"manifest: schema.attributes renamed", false, CheckSchema, func(t *testing.T, ds string) {
			editManifest(t, ds, func(m *manifest.Manifest) { m.Schema.Attributes[0] += "x" })
		}},
		{"index: an attribute named like the index's own row_offset (manifest agreeing)", false, CheckSchema, func(t *testing.T, ds string) {
			xs, xr := readArrow(t, filepath.Join(ds, f.index))
			fields := xs.Fields()
			var old string
			editManifest(t, ds, func(m *manifest.Manifest) {
				old, m.Schema.Attributes[0] = m.Schema.Attributes[0], index.ColRowOffset
				for i := range m.Schema.Index {
					if m.Schema.Index[i].Name == old {
						m.Schema.Index[i].Name = index.ColRowOffset
					}
				}
			})
			fields[xs.FieldIndices(old)[0]].Name = index.ColRowOffset
			md := xs.Metadata()
			renamed := arrow.NewSchema(fields, &md)
			writeArrow(t, ds, f.index, renamed, []arrow.RecordBatch{array.NewRecordBatch(renamed, xr[0].Columns(), xr[0].NumRows())})
		}},
		{"manifest: build.batch_rows lowered", true, CheckBatches, func(t *testing.T, ds string) {
			editManifest(t, ds, func(m *manifest.Manifest) { m.Build.BatchRows = 100 })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := f.freshCopy(t)
			tc.damage(t, ds)
			fast, err := Verify(ds, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.fastClean && !fast.OK {
				t.Errorf("fast verification should pass (only --deep can tell):%s", findings(fast))
			}
			if fast.OK {
				s, err := snapshot.Open(ds, snapshot.Options{VerifyData: true})
				if err != nil {
					t.Errorf("fast verification passes but snapshot.Open refuses: %v", err)
				} else {
					s.Close()
				}
			}
			deep, err := Verify(ds, Options{Deep: true})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantCheck == "" {
				if !deep.OK {
					t.Fatalf("control: deep verification reports:%s", findings(deep))
				}
				return
			}
			if deep.OK {
				t.Fatal("deep verification found nothing")
			}
			found := false
			for _, fd := range deep.Findings {
				found = found || fd.Check == tc.wantCheck
				if fd.File == "" {
					t.Errorf("finding names no file: %s", fd)
				}
			}
			if !found {
				t.Errorf("no %q finding among:%s", tc.wantCheck, findings(deep))
			}
			t.Logf("%d findings, first: %s", len(deep.Findings), deep.Findings[0])
		})
	}
}

// seriesRange returns the rows [lo, hi) of series code c in batch rec.
func seriesRange(rec arrow.RecordBatch, c uint32) [2]int64 {
	codes := rec.Column(0).(*array.Uint32).Uint32Values()
	lo, hi := int64(-1), int64(-1)
	for i, x := range codes {
		if x == c {
			if lo < 0 {
				lo = int64(i)
			}
			hi = int64(i) + 1
		}
	}
	if lo < 0 {
		panic(fmt.Sprintf("series %d not in batch", c))
	}
	return [2]int64{lo, hi}
}

// batchCuts returns the first global row of every data batch.
func batchCuts(t *testing.T, ds string, f *fixture) []int64 {
	_, recs := readArrow(t, filepath.Join(ds, f.data))
	var cuts []int64
	var r int64
	for _, rec := range recs {
		cuts = append(cuts, r)
		r += rec.NumRows()
	}
	if len(cuts) < 3 {
		t.Fatalf("fixture has %d batches, want at least 3", len(cuts))
	}
	return cuts
}

// rebatch rewrites the data file with batches starting at cuts, and the
// index's batch and batch_offset columns to match.
func rebatch(t *testing.T, ds string, f *fixture, cuts []int64) {
	sc, recs := readArrow(t, filepath.Join(ds, f.data))
	all := concatRows(t, sc, recs...)
	var out []arrow.RecordBatch
	for i, c := range cuts {
		end := all.NumRows()
		if i+1 < len(cuts) {
			end = cuts[i+1]
		}
		out = append(out, all.NewSlice(c, end))
	}
	writeArrow(t, ds, f.data, sc, out)
	xs, xr := readArrow(t, filepath.Join(ds, f.index))
	x := xr[0]
	offs := x.Column(index.ColumnRowOffset).(*array.Int64).Int64Values()
	batch := make([]uint32, len(offs))
	boff := make([]uint32, len(offs))
	for i, o := range offs {
		k := sort.Search(len(cuts), func(k int) bool { return cuts[k] > o }) - 1
		batch[i], boff[i] = uint32(k), uint32(o-cuts[k])
	}
	x = withColumn(withColumn(x, index.ColumnBatch, uint32s(batch)), index.ColumnBatchOffset, uint32s(boff))
	writeArrow(t, ds, f.index, xs, []arrow.RecordBatch{x})
}

// editIndex rewrites one index column.
// editIDs is editIndex of the series_id column, with the index's lookup
// table rebuilt for the edited ids (FORMAT.md §4, version 5), so that only
// what the edit does to the ids' order and their agreement with the data
// is left to find.
func editIDs(t *testing.T, ds string, f *fixture, edit func(arrow.Array) arrow.Array) {
	xs, xr := readArrow(t, filepath.Join(ds, f.index))
	i := xs.FieldIndices(index.ColSeriesID)[0]
	ids := edit(xr[0].Column(i)).(*array.String)
	n := ids.Len()
	start, code := make([]uint32, n), make([]uint32, n)
	for c := range n { // a counting sort by bucket, codes increasing in each
		start[index.Bucket(ids.Value(c), n)]++
	}
	at := uint32(0)
	for b := range start {
		start[b], at = at, at+start[b]
	}
	next := append([]uint32(nil), start...)
	for c := range n {
		b := index.Bucket(ids.Value(c), n)
		code[next[b]] = uint32(c)
		next[b]++
	}
	rec := withColumn(xr[0], i, ids)
	rec = withColumn(rec, xs.FieldIndices(index.ColLookupStart)[0], uint32s(start))
	rec = withColumn(rec, xs.FieldIndices(index.ColLookupCode)[0], uint32s(code))
	writeArrow(t, ds, f.index, xs, []arrow.RecordBatch{rec})
}

func editIndex(t *testing.T, ds string, f *fixture, col string, edit func(arrow.Array) arrow.Array) {
	xs, xr := readArrow(t, filepath.Join(ds, f.index))
	i := xs.FieldIndices(col)[0]
	writeArrow(t, ds, f.index, xs, []arrow.RecordBatch{withColumn(xr[0], i, edit(xr[0].Column(i)))})
}
