package snapshot

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"

	"github.com/energyscope/servingsnap/pkg/period"
)

// TestReadsFixtures opens the snapshots committed under testdata/vN, one
// per published format version (v1 was written by the builder before
// index version 2, v2 by pkg/sortwrite's former TestGoldenV2 -update, v4
// by its former TestGoldenV4 -update, whose lake adds the attribute
// source, written as codes, v5 by TestGoldenV5 -update from the same
// lake, its index with a lookup table): every reader must keep opening every version, with and
// without checksums, and see the same series, rows and attributes in each.
func TestReadsFixtures(t *testing.T) {
	for _, tc := range []struct {
		dir     string
		version int
		types   []string // the attributes' types (units, then v4's source): v1 dictionary-encodes units, v4 codes source
	}{
		{"../../testdata/v1/FIXTURE", 1, []string{"dictionary<values=utf8, indices=int8, ordered=false>"}},
		{"../../testdata/v2/FIXTURE", 2, []string{"utf8"}},
		{"../../testdata/v4/FIXTURE", 4, []string{"utf8", "dictionary<values=utf8, indices=int8, ordered=false>"}},
		{"../../testdata/v5/FIXTURE", 5, []string{"utf8", "dictionary<values=utf8, indices=int8, ordered=false>"}},
	} {
		for _, opt := range []Options{{}, {VerifyData: true}} {
			t.Run(fmt.Sprintf("v%d/verify=%v", tc.version, opt.VerifyData), func(t *testing.T) {
				s, err := Open(tc.dir, opt)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if s.Manifest.FormatVersion != tc.version {
					t.Fatalf("format_version %d, want %d", s.Manifest.FormatVersion, tc.version)
				}
				checkFixture(t, s)
				f, c := s.Index().Attributes()
				if len(f) != len(tc.types) || f[0].Name != "units" {
					t.Fatalf("attributes %v, want units (and source) of types %v", f, tc.types)
				}
				for k, typ := range tc.types {
					if f[k].Type.String() != typ || c[k].DataType().String() != typ {
						t.Errorf("attribute %s is %s (column %s), want %s", f[k].Name, f[k].Type, c[k].DataType(), typ)
					}
				}
				for i, want := range []string{"$/MMBtu", "$/bbl", "$/bbl"} {
					if got := c[0].GetOneForMarshal(i); got != want {
						t.Errorf("units of series %d = %v, want %s", i, got, want)
					}
					if len(c) > 1 && c[1].GetOneForMarshal(i) != "EIA" {
						t.Errorf("source of series %d = %v, want EIA", i, c[1].GetOneForMarshal(i))
					}
				}
			})
		}
	}
}

func checkFixture(t *testing.T, s *Snapshot) {
	t.Helper()
	want := []struct {
		id     string
		rows   int64
		latest string
		value  float64
	}{
		{"NG.Ü.Q", 1, "2019-10-01", -1.25},
		{"PET.A.A", 2, "2020-01-01", 11},
		{"PET.B.M", 3, "2020-02-01", 3},
	}
	x := s.Index()
	if x.Len() != len(want) {
		t.Fatalf("%d series, want %d", x.Len(), len(want))
	}
	for i, w := range want {
		code, ok := s.Lookup(w.id)
		if !ok || code != i {
			t.Fatalf("Lookup(%q) = %d, %v", w.id, code, ok)
		}
		rec, err := s.Rows(code, math.MinInt32, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		lp, ok := x.Latest(code)
		if rec.NumRows() != w.rows || !ok || period.Format(lp) != w.latest || x.LatestValues().GetOneForMarshal(code) != w.value {
			t.Errorf("%s: rows %d latest %s=%v", w.id, rec.NumRows(), period.Format(lp), x.LatestValues().GetOneForMarshal(code))
		}
		rec.Release()
	}
	if got := s.Schema().Field(3).Name; got != "note" {
		t.Errorf("varying column = %q, want note", got)
	}
}

// TestVersionsMustAgree: a manifest's format_version says which index
// layout to expect; an index of the other version is refused as corrupt
// (a version-1 index cannot be mapped, a version-2 one must not be taken
// for version 1), whatever the checksums say.
func TestVersionsMustAgree(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		claim   int
	}{
		{"../../testdata/v1/FIXTURE", 2},
		{"../../testdata/v2/FIXTURE", 1},
		{"../../testdata/v2/FIXTURE", 4},
		{"../../testdata/v4/FIXTURE", 2},
		{"../../testdata/v4/FIXTURE", 5},
		{"../../testdata/v5/FIXTURE", 4},
	} {
		t.Run(fmt.Sprintf("%s as version %d", filepath.Base(filepath.Dir(tc.fixture)), tc.claim), func(t *testing.T) {
			ds := filepath.Join(t.TempDir(), "FIXTURE")
			if err := os.CopyFS(ds, os.DirFS(tc.fixture)); err != nil {
				t.Fatal(err)
			}
			d, err := dataset.Open(ds)
			if err != nil {
				t.Fatal(err)
			}
			m, err := d.Current()
			if err != nil {
				t.Fatal(err)
			}
			m.FormatVersion = tc.claim
			b, err := manifest.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ds, dataset.ManifestPath(m.SnapshotID)), b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, opt := range []Options{{}, {VerifyData: true}} {
				s, err := Open(ds, opt)
				if err == nil {
					s.Close()
					t.Fatalf("opened a version-%d manifest over the other index version", tc.claim)
				}
				xf, _ := m.FileByRole(manifest.RoleIndex)
				if f, _ := corrupt.File(err); !errors.Is(err, ErrCorrupt) || f != xf.Path {
					t.Errorf("%v: want ErrCorrupt in %s", err, xf.Path)
				}
			}
		})
	}
}
