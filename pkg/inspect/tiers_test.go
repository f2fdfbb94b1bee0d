package inspect

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/inspect/inspecttest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// tieredDatasets builds inspecttest's two vintages with each tier policy.
func tieredDatasets(t *testing.T) map[string]string {
	t.Helper()
	since, err := period.Parse("2024-01-03")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, p := range map[string]coldfile.Policy{
		"hot-since": {HotSince: since, HasHotSince: true},
		"hot-rows":  {HotRows: 1},
		"all-cold":  {AllCold: true},
	} {
		out[name] = inspecttest.BuildTiered(t, filepath.Join(t.TempDir(), name), p)
	}
	return out
}

func openDS(t *testing.T, ds string, id uint64) *snapshot.Snapshot {
	t.Helper()
	s, err := Open(ds, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestTieredReportsEqualAllHot: series (every format, ranges inside and
// across the tiers), latest, history and diff of a tiered build of the
// same inputs print exactly what the all-hot build prints, and diffing an
// all-hot vintage against a tiered one finds the known differences; the
// summary says where the rows are.
func TestTieredReportsEqualAllHot(t *testing.T) {
	hot := fixture(t)
	var ids []string
	{
		s := openDS(t, hot, 2)
		for i := 0; i < s.Index().Len(); i++ {
			ids = append(ids, s.Index().SeriesID(i))
		}
	}
	ranges := []Range{{}, mustRange(t, "2024-01-02", "2024-01-03"), mustRange(t, "2024-01-04", ""), mustRange(t, "", "2024-01-02")}
	series := func(ds string, id uint64) string {
		s := openDS(t, ds, id)
		var b bytes.Buffer
		for _, r := range ranges {
			for _, f := range []string{FormatText, FormatCSV, FormatJSON} {
				if err := WriteSeries(&b, s, ids2(s, ids), r, f); err != nil {
					t.Fatal(err)
				}
			}
		}
		return b.String()
	}
	latest := func(ds string, id uint64) *LatestReport {
		r, err := Latest(openDS(t, ds, id), LatestQuery{All: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	history := func(ds string) []Vintage {
		h, err := LoadHistory(ds)
		if err != nil {
			t.Fatal(err)
		}
		var out []Vintage
		for _, v := range h.Snapshots {
			if v.SnapshotID == inspecttest.CorruptID {
				continue
			}
			out = append(out, v)
		}
		return out
	}
	diff := func(a, b *snapshot.Snapshot) (DiffTotals, []SeriesDiff) {
		var ds []SeriesDiff
		tot, err := Diff(a, b, func(d SeriesDiff) error { ds = append(ds, d); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return tot, ds
	}
	hotDiff, hotSeries := diff(openDS(t, hot, 1), openDS(t, hot, 2))
	for name, ds := range tieredDatasets(t) {
		t.Run(name, func(t *testing.T) {
			for _, id := range []uint64{1, 2} {
				if got, want := series(ds, id), series(hot, id); got != want {
					t.Errorf("snapshot %d: series output differs from the all-hot build's:\n%s\nwant:\n%s", id, got, want)
				}
				if got, want := latest(ds, id), latest(hot, id); !reflect.DeepEqual(got, want) {
					t.Errorf("snapshot %d: latest differs:\n%+v\nwant\n%+v", id, got, want)
				}
			}
			if got, want := history(ds), history(hot); !sameVintages(got, want) {
				t.Errorf("history differs:\n%+v\nwant\n%+v", got, want)
			}
			for _, pair := range [][2]*snapshot.Snapshot{
				{openDS(t, ds, 1), openDS(t, ds, 2)},  // tiered against tiered
				{openDS(t, hot, 1), openDS(t, ds, 2)}, // all hot against tiered
				{openDS(t, ds, 1), openDS(t, hot, 2)},
			} {
				tot, sd := diff(pair[0], pair[1])
				if tot != hotDiff || !reflect.DeepEqual(sd, hotSeries) {
					t.Errorf("diff: %+v %+v, all-hot diff: %+v %+v", tot, sd, hotDiff, hotSeries)
				}
			}
			same, _ := diff(openDS(t, hot, 2), openDS(t, ds, 2))
			if same.Differ() {
				t.Errorf("the all-hot and tiered snapshot 2 differ: %+v", same)
			}

			sum, err := Summarize(ds, 2)
			if err != nil || sum.Error != "" {
				t.Fatal(err, sum.Error)
			}
			tr := sum.Tiers
			if !tr.Tiered || tr.Hot.Rows+tr.Cold.Rows != sum.Rows || tr.Cold.Rows == 0 || tr.Cold.Chunks == 0 || tr.Cold.Bytes == 0 {
				t.Errorf("tiers %+v of %d rows", tr, sum.Rows)
			}
			if (name == "all-cold") != (tr.Format == coldfile.FormatVortex && tr.Hot.Rows == 0) {
				t.Errorf("tiers %+v", tr)
			}
			var text, js bytes.Buffer
			if err := sum.WriteText(&text, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(text.Bytes(), []byte("\ntiers (")) || !bytes.Contains(text.Bytes(), []byte("cold.vortex")) {
				t.Errorf("text summary lacks the tiers:\n%s", text.String())
			}
			if err := sum.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Tiers map[string]any `json:"tiers"`
			}
			if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"tiered", "format", "hot_since", "hot_rows", "hot", "cold"} {
				if _, ok := doc.Tiers[k]; !ok {
					t.Errorf("JSON tiers lacks %q: %v", k, doc.Tiers)
				}
			}
		})
	}
	sum, err := Summarize(hot, 2)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Tiers.Tiered || sum.Tiers.Format != "arrow" || sum.Tiers.Hot.Rows != sum.Rows || sum.Tiers.Cold != (TierSize{}) {
		t.Errorf("all-hot tiers %+v", sum.Tiers)
	}
}

// ids2 keeps the ids snapshot s has.
func ids2(s *snapshot.Snapshot, ids []string) []string {
	var out []string
	for _, id := range ids {
		if _, ok := s.Lookup(id); ok {
			out = append(out, id)
		}
	}
	return out
}

func mustRange(t *testing.T, from, to string) Range {
	r, err := ParseRange(from, to)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sameVintages compares what history says of each vintage (the
// directories differ).
func sameVintages(a, b []Vintage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.SnapshotID != y.SnapshotID || x.ParentID != y.ParentID || x.Rows != y.Rows || x.Series != y.Series ||
			x.FirstPeriod != y.FirstPeriod || x.LastPeriod != y.LastPeriod || x.Current != y.Current || x.Error != y.Error {
			return false
		}
	}
	return true
}

// TestDamagedColdNeverPanics flips bytes of a tiered snapshot's
// cold.vortex (snapinspect does not checksum it, so every flip reaches
// the decoder): summary, series in every format, latest and diff return
// an error or a report, never a panic.
func TestDamagedColdNeverPanics(t *testing.T) {
	for _, p := range []coldfile.Policy{{AllCold: true}, {HotRows: 1}} {
		ds := inspecttest.BuildTiered(t, t.TempDir(), p)
		cold := filepath.Join(ds, "snapshots", "000002", coldfile.FileName)
		pristine, err := os.ReadFile(cold)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, uint64(len(pristine))))
		var errs int
		for k := 0; k < 300; k++ {
			b := bytes.Clone(pristine)
			off := rng.IntN(len(b))
			b[off] ^= byte(1 + rng.IntN(255))
			if k%10 == 9 {
				b = b[:rng.IntN(len(b))] // and some truncations
			}
			if err := os.WriteFile(cold, b, 0o644); err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("byte %d: panic: %v", off, r)
					}
				}()
				if _, err := Summarize(ds, 2); err != nil {
					t.Errorf("byte %d: summary fails instead of reporting: %v", off, err)
				}
				s, err := Open(ds, 2)
				if err != nil {
					errs++
					return
				}
				defer s.Close()
				var ids []string
				for i := 0; i < s.Index().Len(); i++ {
					ids = append(ids, s.Index().SeriesID(i))
				}
				for _, f := range []string{FormatText, FormatCSV, FormatJSON} {
					if err := WriteSeries(io.Discard, s, ids, Range{}, f); err != nil {
						errs++
					}
				}
				if _, err := Latest(s, LatestQuery{All: true}); err != nil {
					t.Errorf("byte %d: latest reads the index only, yet: %v", off, err)
				}
				a, err := Open(ds, 1)
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				if _, err := Diff(a, s, func(SeriesDiff) error { return nil }); err != nil {
					errs++
				}
			}()
		}
		t.Logf("%+v: 300 damaged cold files, %d errors reported, no panic", p, errs)
	}
}
