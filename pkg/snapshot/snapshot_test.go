package snapshot

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
	"github.com/energyscope/servingsnap/pkg/vortexio"
)

func sample(t testing.TB) string {
	_, ds := testsnap.Sample(t, t.TempDir(), "SYN", 200, 3, func(o *sortwrite.Options) { o.BatchRows = 5000 })
	return ds
}

func TestOpenLookupRows(t *testing.T) {
	ds := sample(t)
	s, err := Open(ds, Options{VerifyData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.NumBatches() < 2 {
		t.Fatalf("want several batches, got %d", s.NumBatches())
	}
	x := s.Index()
	var total int64
	for code := 0; code < x.Len(); code++ {
		e := x.Entry(code)
		got, ok := s.Lookup(e.SeriesID)
		if !ok || got != code {
			t.Fatalf("Lookup(%q) = %d, %v; want %d", e.SeriesID, got, ok, code)
		}
		rec, err := s.Rows(code, math.MinInt32, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		codes := rec.Column(0).(*array.Uint32).Uint32Values()
		periods := rec.Column(1).(*array.Date32).Date32Values()
		if int64(len(codes)) != e.RowCount {
			t.Fatalf("%s: %d rows, index says %d", e.SeriesID, len(codes), e.RowCount)
		}
		for i := range codes {
			if int(codes[i]) != code || (i > 0 && periods[i] <= periods[i-1]) {
				t.Fatalf("%s: row %d has code %d period %d", e.SeriesID, i, codes[i], periods[i])
			}
		}
		if int32(periods[0]) != e.FirstPeriod || int32(periods[len(periods)-1]) != e.LastPeriod {
			t.Fatalf("%s: bounds differ from the index", e.SeriesID)
		}
		total += int64(len(codes))
		rec.Release()
	}
	if total != s.Manifest.Stats.Rows {
		t.Fatalf("series hold %d rows, manifest says %d", total, s.Manifest.Stats.Rows)
	}
	if _, ok := s.Lookup("NOPE"); ok {
		t.Fatal("found a series that does not exist")
	}
	if _, err := s.Rows(x.Len(), 0, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Rows(out of range) = %v, want ErrNotFound", err)
	}
}

func TestRowsPeriodRange(t *testing.T) {
	ds := sample(t)
	s, err := Open(ds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The longest series, so the range cuts inside it.
	best := 0
	for c := 0; c < s.Index().Len(); c++ {
		if s.Index().Entry(c).RowCount > s.Index().Entry(best).RowCount {
			best = c
		}
	}
	from, _ := period.Parse("2018-01-01")
	to, _ := period.Parse("2019-12-31")
	all, _ := s.Rows(best, math.MinInt32, math.MaxInt32)
	defer all.Release()
	want := 0
	for _, p := range all.Column(1).(*array.Date32).Date32Values() {
		if int32(p) >= from && int32(p) <= to {
			want++
		}
	}
	cases := []struct {
		name     string
		from, to int32
		want     int
	}{
		{"inside", from, to, want},
		{"empty, inverted", to, from, 0},
		{"before everything", math.MinInt32, from - 100000, 0},
		{"open", math.MinInt32, math.MaxInt32, int(all.NumRows())},
	}
	for _, tc := range cases {
		rec, err := s.Rows(best, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if int(rec.NumRows()) != tc.want {
			t.Errorf("%s: %d rows, want %d", tc.name, rec.NumRows(), tc.want)
		}
		rec.Release()
	}
}

func TestRefcountUnmapsAfterLastReader(t *testing.T) {
	ds := sample(t)
	s, err := Open(ds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Acquire() {
		t.Fatal("Acquire on an open snapshot failed")
	}
	s.Close() // the opener's reference
	if s.Refs() != 1 || s.closed {
		t.Fatalf("closed while a reader holds it (refs %d)", s.Refs())
	}
	rec, err := s.Rows(0, math.MinInt32, math.MaxInt32)
	if err != nil {
		t.Fatal(err)
	}
	_ = rec.Column(1).(*array.Date32).Value(0) // still mapped
	rec.Release()
	s.Release()
	if !s.closed || s.Acquire() {
		t.Fatal("last Release did not close, or Acquire succeeded afterwards")
	}
}

// TestOpenRefusesDamage: every damage is refused; damage to the bytes is
// ErrCorrupt (whichever package found it), located in the damaged file, and
// keeps its cause.
func TestOpenRefusesDamage(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, ds string, m *manifest.Manifest)
		opt     Options
		corrupt bool   // errors.Is(err, ErrCorrupt)
		role    string // the file corrupt.File names, "" for none
		cause   error  // errors.Is(err, cause), when set
	}{
		{"data truncated", func(t *testing.T, ds string, m *manifest.Manifest) {
			f, _ := m.FileByRole(manifest.RoleData)
			os.Chmod(filepath.Join(ds, f.Path), 0o644) // published files are 0444
			os.Truncate(filepath.Join(ds, f.Path), f.Size-1)
		}, Options{}, true, manifest.RoleData, nil},
		// The index is checksummed only when asked (invariant 3); unverified,
		// its structure is checked (TestOpenRefusesBadIndexColumns).
		{"index byte flipped, verified", func(t *testing.T, ds string, m *manifest.Manifest) {
			f, _ := m.FileByRole(manifest.RoleIndex)
			flip(t, filepath.Join(ds, f.Path), f.Size/2)
		}, Options{VerifyData: true}, true, manifest.RoleIndex, arrowfile.ErrChecksum},
		{"index truncated", func(t *testing.T, ds string, m *manifest.Manifest) {
			f, _ := m.FileByRole(manifest.RoleIndex)
			os.Truncate(filepath.Join(ds, f.Path), f.Size-1)
		}, Options{}, true, manifest.RoleIndex, nil},
		{"data byte flipped, verified", func(t *testing.T, ds string, m *manifest.Manifest) {
			f, _ := m.FileByRole(manifest.RoleData)
			flip(t, filepath.Join(ds, f.Path), f.Size/2)
		}, Options{VerifyData: true}, true, manifest.RoleData, arrowfile.ErrChecksum},
		{"index deleted", func(t *testing.T, ds string, m *manifest.Manifest) {
			f, _ := m.FileByRole(manifest.RoleIndex)
			os.Remove(filepath.Join(ds, f.Path))
		}, Options{}, true, manifest.RoleIndex, fs.ErrNotExist},
		{"CURRENT dangling", func(t *testing.T, ds string, m *manifest.Manifest) {
			os.WriteFile(filepath.Join(ds, "CURRENT"), []byte("manifests/000009.json\n"), 0o644)
		}, Options{}, false, "", fs.ErrNotExist},
		{"manifest not JSON", func(t *testing.T, ds string, m *manifest.Manifest) {
			os.WriteFile(filepath.Join(ds, dataset.ManifestPath(m.SnapshotID)), []byte("{"), 0o644)
		}, Options{}, true, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := sample(t)
			d, _ := dataset.Open(ds)
			m, err := d.Current()
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, ds, m)
			s, err := Open(ds, tc.opt)
			if err == nil {
				s.Close()
				t.Fatal("opened a damaged snapshot")
			}
			if errors.Is(err, ErrCorrupt) != tc.corrupt || corrupt.Is(err) != tc.corrupt {
				t.Errorf("errors.Is(%v, ErrCorrupt) = %v, want %v", err, !tc.corrupt, tc.corrupt)
			}
			wantFile := ""
			if tc.role != "" {
				f, _ := m.FileByRole(tc.role)
				wantFile = f.Path
			}
			if got, _ := corrupt.File(err); got != wantFile {
				t.Errorf("corrupt.File(%v) = %q, want %q", err, got, wantFile)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("%v: the cause %v is lost", err, tc.cause)
			}
		})
	}
}

// TestOneCorruptSentinel: a damaged manifest found by package manifest is,
// through snapshot.Open, snapshot.ErrCorrupt and manifest.ErrCorrupt alike,
// and errors.As still reaches the JSON decoder's error.
func TestOneCorruptSentinel(t *testing.T) {
	ds := sample(t)
	d, _ := dataset.Open(ds)
	id, err := d.CurrentID()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ds, dataset.ManifestPath(id)), []byte(`{"format": "servingsnap.manifest", "format_version": 1, "snapshot_id": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ds, Options{})
	if err == nil {
		s.Close()
		t.Fatal("opened a snapshot with a damaged manifest")
	}
	for _, target := range []error{ErrCorrupt, manifest.ErrCorrupt, corrupt.ErrCorrupt, vortexio.ErrCorrupt} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field != "snapshot_id" {
		t.Errorf("errors.As(%v, *json.UnmarshalTypeError) does not reach the decoder's error", err)
	}
}

func flip(t *testing.T, path string, off int64) {
	t.Helper()
	os.Chmod(path, 0o644) // published files are 0444
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	f.ReadAt(b, off)
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestRangeRefusesBadEntries: an index entry pointing outside the data is
// ErrCorrupt, never a panic (the index is checksummed, but Range is the
// last line before slicing mapped memory).
func TestRangeRefusesBadEntries(t *testing.T) {
	s, err := Open(sample(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := s.Index().Entry(0)
	for name, mod := range map[string]func(e *index.Entry){
		"batch past the end":  func(e *index.Entry) { e.Batch = s.NumBatches() },
		"negative batch":      func(e *index.Entry) { e.Batch = -1 },
		"rows past the batch": func(e *index.Entry) { e.RowCount = 1 << 40 },
		"negative offset":     func(e *index.Entry) { e.BatchOffset = -5 },
		"negative count":      func(e *index.Entry) { e.RowCount = -1 },
	} {
		e := good
		mod(&e)
		if _, _, _, err := s.Range(e, math.MinInt32, math.MaxInt32); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
	if _, lo, hi, err := s.Range(good, math.MinInt32, math.MaxInt32); err != nil || hi-lo != good.RowCount {
		t.Errorf("good entry: [%d,%d), %v", lo, hi, err)
	}
}
