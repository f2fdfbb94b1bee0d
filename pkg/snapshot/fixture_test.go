package snapshot

import (
	"math"
	"testing"

	"github.com/energyscope/servingsnap/pkg/period"
)

// TestReadsV1Fixture opens the version-1 snapshot committed under
// testdata/v1 (written by pkg/sortwrite's TestGoldenV1 -update): every
// reader must keep opening every published format version.
func TestReadsV1Fixture(t *testing.T) {
	s, err := Open("../../testdata/v1/FIXTURE", Options{VerifyData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
