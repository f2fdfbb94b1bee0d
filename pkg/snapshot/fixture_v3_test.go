package snapshot

import (
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/manifest"
)

// fixtureRows is every row of every series of an open snapshot as
// "period value note" strings, per series id: the cold rows (ColdRange)
// then the hot ones (Range), as a reader serves them.
func fixtureRows(t *testing.T, s *Snapshot) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(id string, rec arrow.RecordBatch, lo, hi int64) {
		for i := lo; i < hi; i++ {
			var row []any
			for c := 1; c < int(rec.NumCols()); c++ {
				row = append(row, rec.Column(c).GetOneForMarshal(int(i)))
			}
			out[id] = append(out[id], fmt.Sprint(row...))
		}
	}
	x := s.Index()
	for code := 0; code < x.Len(); code++ {
		e := x.Entry(code)
		id := x.SeriesID(code)
		rec, lo, hi, err := s.ColdRange(e, math.MinInt32, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		if rec != nil {
			add(id, rec, lo, hi)
		}
		b, lo, hi, err := s.Range(e, math.MinInt32, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		if hi > lo {
			add(id, s.Batch(b), lo, hi)
		}
	}
	return out
}

// TestReadsFixturesV3 opens the tiered snapshots committed under
// testdata/v3 (written by pkg/sortwrite's former TestGoldenV3 -update from
// the version-2 fixture's lake), testdata/v4 (the former TestGoldenV4:
// index version 4 with the tier columns, from the same lake plus a source
// attribute) and testdata/v5 (TestGoldenV5: the same with the lookup
// table): FIXTURE or TIERED (--hot-since 2020-01-01) and VORTEX
// (--format vortex). Each opens with and without checksums, records the
// split the policy makes (cold rows per series, hot rows per series), and
// serves, cold piece then hot slice, exactly the rows, latest values and
// attributes of the all-hot version-2 fixture.
func TestReadsFixturesV3(t *testing.T) {
	v2, err := Open("../../testdata/v2/FIXTURE", Options{VerifyData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	want := fixtureRows(t, v2)
	for _, tc := range []struct {
		dir       string
		cold, hot []int64 // per series code (NG.Ü.Q, PET.A.A, PET.B.M)
		format    string
		version   int // the manifest's; the index's is the same number
	}{
		{"../../testdata/v3/FIXTURE", []int64{0, 1, 2}, []int64{1, 1, 1}, "", 3},
		{"../../testdata/v3/VORTEX", []int64{1, 2, 3}, []int64{0, 0, 0}, "vortex", 3},
		{"../../testdata/v4/TIERED", []int64{0, 1, 2}, []int64{1, 1, 1}, "", 4},
		{"../../testdata/v4/VORTEX", []int64{1, 2, 3}, []int64{0, 0, 0}, "vortex", 4},
		{"../../testdata/v5/TIERED", []int64{0, 1, 2}, []int64{1, 1, 1}, "", 5},
		{"../../testdata/v5/VORTEX", []int64{1, 2, 3}, []int64{0, 0, 0}, "vortex", 5},
	} {
		for _, opt := range []Options{{}, {VerifyData: true}} {
			t.Run(fmt.Sprintf("v%d/%s/verify=%v", tc.version, filepath.Base(tc.dir), opt.VerifyData), func(t *testing.T) {
				s, err := Open(tc.dir, opt)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				m := s.Manifest
				if m.FormatVersion != tc.version || !s.Tiered() || s.Index().Version() != fmt.Sprint(tc.version) || m.Build.DataFormat != tc.format {
					t.Fatalf("format_version %d, tiered %v, index version %q, build.format %q", m.FormatVersion, s.Tiered(), s.Index().Version(), m.Build.DataFormat)
				}
				df, _ := m.FileByRole(manifest.RoleData)
				cf, _ := m.FileByRole(manifest.RoleCold)
				if df.Rows+cf.Rows != m.Stats.Rows || m.Stats.Rows != 6 {
					t.Errorf("data %d + cold %d rows, stats %d", df.Rows, cf.Rows, m.Stats.Rows)
				}
				x := s.Index()
				for code := 0; code < x.Len(); code++ {
					e := x.Entry(code)
					w := v2.Index().Entry(code)
					if e.Cold.Rows != tc.cold[code] || e.RowCount != tc.hot[code] {
						t.Errorf("%s: %d cold, %d hot rows; want %d, %d", e.SeriesID, e.Cold.Rows, e.RowCount, tc.cold[code], tc.hot[code])
					}
					if e.FirstPeriod != w.FirstPeriod || e.LastPeriod != w.LastPeriod {
						t.Errorf("%s: periods %d..%d, the series' are %d..%d", e.SeriesID, e.FirstPeriod, e.LastPeriod, w.FirstPeriod, w.LastPeriod)
					}
					lp, ok := x.Latest(code)
					wp, wok := v2.Index().Latest(code)
					if lp != wp || ok != wok || x.LatestValues().GetOneForMarshal(code) != v2.Index().LatestValues().GetOneForMarshal(code) {
						t.Errorf("%s: latest %d %v", e.SeriesID, lp, x.LatestValues().GetOneForMarshal(code))
					}
				}
				if got := fixtureRows(t, s); !reflect.DeepEqual(got, want) {
					t.Errorf("rows %v\nwant (all-hot v2) %v", got, want)
				}
				f, c := x.Attributes()
				if len(f) < 1 || f[0].Name != "units" || c[0].GetOneForMarshal(0) != "$/MMBtu" || c[0].GetOneForMarshal(2) != "$/bbl" {
					t.Errorf("attributes %v", f)
				}
				if tc.version == 4 && (len(f) != 2 || f[1].Name != "source" || f[1].Type.ID() != arrow.DICTIONARY || c[1].GetOneForMarshal(1) != "EIA") {
					t.Errorf("attributes %v, want units and source (codes) = EIA", f)
				}
				if got := s.Schema().Field(3).Name; got != "note" {
					t.Errorf("varying column = %q, want note", got)
				}
			})
		}
	}
}
