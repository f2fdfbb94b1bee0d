package verify

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/inspect"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/verify/arrowcheck"
)

func noData(d arrow.ArrayData) bool { return arrowcheck.NoData(d) }

// mutant is one change to the index file's bytes; the manifest's
// checksum of the file is resealed afterwards, so only the structural
// checks can catch it.
type mutant struct {
	desc string
	off  int
	val  []byte // written at off
	// class: "bad" (a string offset out of bounds or decreasing: every
	// level must find it, snapinspect must refuse), "shift" (a string
	// offset moved within bounds: the strings change, so --against must
	// find it), "byte" (a random byte: nothing may panic, and levels agree).
	class string
}

// offsetRegions finds, in the index file's bytes, the offsets buffer of
// every plain string column and every dictionary of the index batch.
func offsetRegions(t *testing.T, path string, file []byte) map[string][2]int {
	t.Helper()
	x, err := arrowfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	rec, err := x.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	out := map[string][2]int{}
	add := func(name string, d arrow.ArrayData) {
		if d.DataType().ID() != arrow.STRING || d.Len() == 0 {
			return
		}
		b := d.Buffers()[1].Bytes()[d.Offset()*4 : (d.Offset()+d.Len()+1)*4]
		if i := bytes.Index(file, b); i >= 0 && bytes.LastIndex(file, b) == i {
			out[name] = [2]int{i, d.Len() + 1}
		}
	}
	for i, c := range rec.Columns() {
		name := rec.Schema().Field(i).Name
		add(name, c.Data())
		if dict := c.Data().Dictionary(); !noData(dict) {
			add(name+" (dictionary)", dict)
		}
	}
	return out
}

// resealedMutants lists offset mutants (every region, several slots,
// several bad values) and random byte flips over the whole file.
func resealedMutants(t *testing.T, path string, file []byte) []mutant {
	regions := offsetRegions(t, path, file)
	if _, ok := regions["series_id"]; !ok {
		t.Fatalf("no series_id offsets found in the index (regions %v)", regions)
	}
	le := binary.LittleEndian
	var ms []mutant
	for name, r := range regions {
		start, n := r[0], r[1]
		for _, k := range []int{0, 1, n / 2, n - 1} {
			if k < 0 || k >= n {
				continue
			}
			cur := int32(le.Uint32(file[start+4*k:]))
			prev := int32(-1)
			if k > 0 {
				prev = int32(le.Uint32(file[start+4*(k-1):]))
			}
			next := int32(1 << 30)
			if k+1 < n {
				next = int32(le.Uint32(file[start+4*(k+1):]))
			}
			put := func(class string, v int32) {
				b := make([]byte, 4)
				le.PutUint32(b, uint32(v))
				ms = append(ms, mutant{desc: fmt.Sprintf("%s offset %d: %d -> %d", name, k, cur, v), off: start + 4*k, val: b, class: class})
			}
			put("bad", cur+1<<20)
			put("bad", 1<<30)
			put("bad", -4)
			if k > 0 && prev > 0 {
				put("bad", prev-1) // before the previous offset
			}
			if k > 0 && k < n-1 && cur-1 > prev {
				put("shift", cur-1) // a string one byte shorter, the next one longer
			}
			if k > 0 && k < n-1 && cur+1 < next {
				put("shift", cur+1)
			}
		}
	}
	rng := rand.New(rand.NewPCG(15, 2))
	for i := 0; i < 80; i++ {
		off := rng.IntN(len(file))
		ms = append(ms, mutant{desc: fmt.Sprintf("byte %d ^= x", off), off: off, val: []byte{file[off] ^ byte(1+rng.IntN(255))}, class: "byte"})
	}
	return ms
}

// safely runs f, turning a panic into a test failure.
func safely(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// TestResealedIndexMutants mutates the index sidecar's bytes and reseals
// its checksum in the manifest: verification (fast, deep, against) and
// snapinspect never panic, a bad string offset is a finding at every
// level and an error for snapinspect, and whatever one level finds,
// the levels that include it find too.
func TestResealedIndexMutants(t *testing.T) {
	f := getFixture(t)
	img := snapshotImage(t, f.ds)
	pristine := img.files[f.index]
	ds := filepath.Join(t.TempDir(), filepath.Base(f.ds))
	ms := resealedMutants(t, filepath.Join(f.ds, filepath.FromSlash(f.index)), pristine)
	var offsets, shifts, found, quiet int
	for _, mu := range ms {
		if err := img.restore(ds); err != nil {
			t.Fatal(err)
		}
		b := bytes.Clone(pristine)
		copy(b[mu.off:], mu.val)
		if bytes.Equal(b, pristine) {
			continue
		}
		p := filepath.Join(ds, filepath.FromSlash(f.index))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum, _, err := fileutil.ChecksumFile(p)
		if err != nil {
			t.Fatal(err)
		}
		editManifest(t, ds, func(m *manifest.Manifest) {
			for i := range m.Files {
				if m.Files[i].Path == f.index {
					m.Files[i].Checksum = sum
				}
			}
		})

		levels := []struct {
			name string
			opt  Options
		}{{"fast", Options{}}, {"deep", Options{Deep: true}}, {"against", Options{Deep: true, Against: f.lake}}}
		counts := make([]int, len(levels))
		for i, l := range levels {
			safely(t, mu.desc+": verify "+l.name, func() {
				rep, err := Verify(ds, l.opt)
				if err != nil {
					t.Errorf("%s: verify %s: an error instead of findings: %v", mu.desc, l.name, err)
					return
				}
				counts[i] = len(rep.Findings)
				for _, fd := range rep.Findings {
					if fd.File == "" {
						t.Errorf("%s: verify %s: a finding names no file: %s", mu.desc, l.name, fd)
					}
					if fd.Check == CheckPanic {
						t.Errorf("%s: verify %s: a panic reached the last line of defence: %s", mu.desc, l.name, fd)
					}
				}
			})
		}
		var inspectErr error
		safely(t, mu.desc+": inspect", func() {
			if s, err := inspect.Summarize(ds, 0); err != nil {
				inspectErr = err
			} else if s.Error != "" {
				inspectErr = fmt.Errorf("%s", s.Error)
			}
			s, err := inspect.Open(ds, 0)
			if err != nil {
				inspectErr = err
				return
			}
			defer s.Close()
			if _, err := inspect.Latest(s, inspect.LatestQuery{All: true}); err != nil && inspectErr == nil {
				inspectErr = err
			}
		})

		switch mu.class {
		case "bad":
			offsets++
			for i, l := range levels {
				if counts[i] == 0 {
					t.Errorf("%s: verify %s found nothing", mu.desc, l.name)
				}
			}
			if inspectErr == nil {
				t.Errorf("%s: snapinspect reported no error", mu.desc)
			}
		case "shift":
			shifts++
			if counts[2] == 0 {
				t.Errorf("%s: verify --against found nothing", mu.desc)
			}
		}
		if counts[0] > 0 && (counts[1] == 0 || counts[2] == 0) {
			t.Errorf("%s: fast finds %d, deep %d, against %d", mu.desc, counts[0], counts[1], counts[2])
		}
		if inspectErr != nil && counts[0] == 0 {
			t.Errorf("%s: snapinspect refuses (%v) but fast verification finds nothing", mu.desc, inspectErr)
		}
		if counts[2] > 0 {
			found++
		} else {
			quiet++
		}
	}
	t.Logf("%d mutants (%d bad string offsets, %d shifted ones): %d found, %d by no level (random bytes in padding or in values only the data can contradict)", len(ms), offsets, shifts, found, quiet)
}
