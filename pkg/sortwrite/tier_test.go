package sortwrite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// tierCase is one tier policy as the command line spells it (snapbuild
// build --hot-since, --hot-rows, --format).
type tierCase struct {
	name     string
	hotSince string
	hotRows  int64
	format   string
}

func (c tierCase) policy(t testing.TB) coldfile.Policy {
	t.Helper()
	p, err := coldfile.PolicyOf(c.hotSince, c.hotRows, c.format)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var tierCases = []tierCase{
	{name: "hot-since", hotSince: "2020-01-01"},
	{name: "hot-rows", hotRows: 12},
	{name: "both", hotSince: "2024-01-01", hotRows: 30},
	// Every row is older than hot-since: each series keeps its last row hot.
	{name: "hot-since-after-every-row", hotSince: "2100-01-01"},
	{name: "format-vortex", format: coldfile.FormatVortex},
}

// tierLake is a generated lake of several files and row groups, so that
// the external sort merges several runs.
func tierLake(t *testing.T, dir string, series int) string {
	t.Helper()
	lake := filepath.Join(dir, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: series, Seed: 11, FromYear: 2015, ToYear: 2024, RowGroupRows: 3000, FilesPerYear: 2}); err != nil {
		t.Fatal(err)
	}
	return lake
}

// servedRow is one row as the read layer serves it: every data column but
// series_code, rendered for comparison.
type servedRow []any

// servedRows reads a dataset's current snapshot through query.FromSnapshot
// (cold piece, then hot slice, for a tiered snapshot), per series id, in
// the order served, together with each series' index facts that must not
// depend on tiers.
func servedRows(t *testing.T, dir string) (map[string][]servedRow, map[string]string) {
	t.Helper()
	s, err := snapshot.Open(dir, snapshot.Options{VerifyData: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := query.FromSnapshot("DS", s)
	if err != nil {
		t.Fatal(err)
	}
	x := s.Index()
	rows := map[string][]servedRow{}
	facts := map[string]string{}
	var pieces []query.Piece
	for code := 0; code < x.Len(); code++ {
		id := strings.Clone(r.SeriesID(code)) // the mapping goes at Close
		pieces, err = r.Rows(code, query.AllPeriods, pieces[:0])
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pieces {
			for i := p.Lo; i < p.Hi; i++ {
				row := servedRow{}
				for c := 1; c < int(p.Rec.NumCols()); c++ {
					col := p.Rec.Column(c)
					if col.IsNull(int(i)) {
						row = append(row, nil)
					} else {
						v := col.GetOneForMarshal(int(i))
						if str, ok := v.(string); ok {
							v = strings.Clone(str)
						}
						row = append(row, v)
					}
				}
				rows[id] = append(rows[id], row)
			}
		}
		e := x.Entry(code)
		lp, ok := x.Latest(code)
		lrow, lok, err := r.LatestRow(code, query.AllPeriods)
		if err != nil {
			t.Fatal(err)
		}
		var lval any
		if lok {
			lval = lrow.Rec.Column(2).GetOneForMarshal(int(lrow.Lo))
		}
		facts[id] = fmt.Sprintf("first %d last %d latest %d %v value %v latest row %v %v periods %d",
			e.FirstPeriod, e.LastPeriod, lp, ok, x.LatestValues().GetOneForMarshal(code), lok, lval, len(r.Periods(code)))
	}
	return rows, facts
}

func currentManifest(t *testing.T, dir string) *manifest.Manifest {
	t.Helper()
	ds, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Current()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameFiles fails unless the two datasets' current snapshots list the same
// files with the same checksums, sizes, rows and batches (byte-identical).
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	ma, mb := currentManifest(t, a), currentManifest(t, b)
	if len(ma.Files) != len(mb.Files) {
		t.Fatalf("files differ: %+v\n%+v", ma.Files, mb.Files)
	}
	for i := range ma.Files {
		if ma.Files[i] != mb.Files[i] {
			t.Errorf("%s differs:\n%+v\n%+v", ma.Files[i].Role, ma.Files[i], mb.Files[i])
		}
	}
	if fmt.Sprint(ma.Stats, ma.Schema, ma.Build) != fmt.Sprint(mb.Stats, mb.Schema, mb.Build) {
		t.Errorf("stats, schema or build differ:\n%+v\n%+v", ma, mb)
	}
}

// wantHot is which rows of a series (its periods, ascending) the policy
// keeps hot, computed from the rule itself (FORMAT.md §2): a row is hot if
// its period is at or after hot-since or it is among the last hot-rows
// rows; the last row is hot whatever the rule; with --format vortex none.
func wantHot(c tierCase, t *testing.T, periods []int32) []int32 {
	p := c.policy(t)
	if p.AllCold {
		return nil
	}
	var hot []int32
	for i, d := range periods {
		last := i == len(periods)-1
		byDate := p.HasHotSince && d >= p.HotSince
		byCount := p.HotRows > 0 && int64(len(periods)-i) <= p.HotRows
		if last || byDate || byCount {
			hot = append(hot, d)
		}
	}
	return hot
}

// TestTiersBuild: for each tier policy, the in-memory and the external
// build write byte-identical files; the rows served (cold piece + hot
// slice) and every series' index facts equal the all-hot build's; the hot
// file holds exactly the rows the policy keeps hot; the manifest and the
// index record the tiers as FORMAT.md says.
func TestTiersBuild(t *testing.T) {
	root := t.TempDir()
	lake := tierLake(t, root, 300)
	allHot := filepath.Join(root, "HOT")
	if _, err := build(t, lake, allHot, func(o *Options) { o.BatchRows = 4000 }); err != nil {
		t.Fatal(err)
	}
	wantRows, wantFacts := servedRows(t, allHot)
	_, hotAll, _ := readBack(t, allHot)
	if m := currentManifest(t, allHot); m.FormatVersion != manifest.Version {
		t.Fatalf("an all-hot build writes format_version %d, want %d", m.FormatVersion, manifest.Version)
	}

	for _, tc := range tierCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mem, ext := filepath.Join(dir, "MEM"), filepath.Join(dir, "EXT")
			ms, err := build(t, lake, mem, func(o *Options) { o.BatchRows = 4000; o.Tiers = tc.policy(t) })
			if err != nil {
				t.Fatal(err)
			}
			es, err := build(t, lake, ext, func(o *Options) { o.BatchRows = 4000; o.Tiers = tc.policy(t); o.MemoryLimit = 1 << 20 })
			if err != nil {
				t.Fatal(err)
			}
			if ms.External || !es.External || es.Runs < 2 {
				t.Fatalf("want one in-memory and one external build of several runs: %v, %v runs %d", ms.External, es.External, es.Runs)
			}
			sameFiles(t, mem, ext)

			m := currentManifest(t, mem)
			if m.FormatVersion != manifest.Version {
				t.Errorf("format_version %d, want %d", m.FormatVersion, manifest.Version)
			}
			hs, hr, f := m.Build.HotSince, m.Build.HotRows, m.Build.DataFormat
			if hs != tc.hotSince || hr != tc.hotRows || f != tc.format {
				t.Errorf("build records hot_since %q hot_rows %d format %q, want %q %d %q", hs, hr, f, tc.hotSince, tc.hotRows, tc.format)
			}
			df, _ := m.FileByRole(manifest.RoleData)
			cf, ok := m.FileByRole(manifest.RoleCold)
			if !ok || cf.Path != "snapshots/000001/"+coldfile.FileName || cf.Tier != manifest.TierCold || cf.Format != manifest.FormatVortex || cf.Rows == 0 || cf.Batches == 0 {
				t.Fatalf("cold file entry %+v", cf)
			}
			if df.Rows+cf.Rows != m.Stats.Rows || m.Stats.Rows != ms.Rows {
				t.Errorf("data %d + cold %d rows, stats %d, summary %d", df.Rows, cf.Rows, m.Stats.Rows, ms.Rows)
			}
			var roles []string
			for _, f := range ms.Files {
				roles = append(roles, f.Role)
			}
			if fmt.Sprint(roles) != "[data cold index]" {
				t.Errorf("summary files %v", roles)
			}

			for name, d := range map[string]string{"in memory": mem, "external": ext} {
				gotRows, gotFacts := servedRows(t, d)
				if !reflect.DeepEqual(gotRows, wantRows) {
					t.Errorf("%s: rows served differ from the all-hot build's", name)
				}
				if !reflect.DeepEqual(gotFacts, wantFacts) {
					for id, w := range wantFacts {
						if gotFacts[id] != w {
							t.Errorf("%s: %s: %s, all-hot %s", name, id, gotFacts[id], w)
							break
						}
					}
				}
			}

			// The hot file holds what the policy keeps hot, the index says
			// where the rest went.
			_, hot, xrec := readBack(t, mem)
			x, err := index.New(xrec)
			if err != nil {
				t.Fatal(err)
			}
			if !x.Tiered() || x.Version() != index.Version {
				t.Fatalf("index version %q, tiered %v", x.Version(), x.Tiered())
			}
			var coldNext int64
			for code := 0; code < x.Len(); code++ {
				id := x.SeriesID(code)
				var all []int32
				for _, r := range hotAll[id] {
					all = append(all, r.Period)
				}
				var got []int32
				for _, r := range hot[id] {
					got = append(got, r.Period)
				}
				want := wantHot(tc, t, all)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: hot periods %v, want %v", id, got, want)
				}
				e := x.Entry(code)
				nCold := int64(len(all) - len(want))
				if e.RowCount != int64(len(want)) || e.Cold.Rows != nCold {
					t.Errorf("%s: index row_count %d cold_rows %d, want %d %d", id, e.RowCount, e.Cold.Rows, len(want), nCold)
				}
				if e.FirstPeriod != all[0] || e.LastPeriod != all[len(all)-1] {
					t.Errorf("%s: first/last period %d..%d, want the series' %d..%d", id, e.FirstPeriod, e.LastPeriod, all[0], all[len(all)-1])
				}
				if nCold > 0 {
					if e.Cold.Start != coldNext || e.Cold.FirstPeriod != all[0] || e.Cold.LastPeriod != all[nCold-1] {
						t.Errorf("%s: cold %+v, want start %d periods %d..%d", id, e.Cold, coldNext, all[0], all[nCold-1])
					}
					coldNext += nCold
				} else if e.Cold != (index.Cold{Start: coldNext}) {
					// No cold rows: cold_start is where they would begin.
					t.Errorf("%s: no cold rows, but cold %+v (want start %d, the rest 0)", id, e.Cold, coldNext)
				}
			}
			if coldNext != cf.Rows {
				t.Errorf("cold rows tile %d rows, the file holds %d", coldNext, cf.Rows)
			}
		})
	}
}

// TestTiersEmpty: an empty input with --allow-empty and a tier policy
// publishes a tiered snapshot of no rows (an empty cold file beside an
// empty hot file) that opens and serves nothing.
func TestTiersEmpty(t *testing.T) {
	for _, tc := range tierCases {
		t.Run(tc.name, func(t *testing.T) {
			in, out := t.TempDir(), filepath.Join(t.TempDir(), "DS")
			writeSeries(t, in, 0)
			sum, err := build(t, in, out, func(o *Options) { o.AllowEmpty = true; o.Tiers = tc.policy(t) })
			if err != nil {
				t.Fatal(err)
			}
			m := currentManifest(t, out)
			cf, ok := m.FileByRole(manifest.RoleCold)
			if sum.Rows != 0 || m.FormatVersion != manifest.Version || !ok || cf.Rows != 0 {
				t.Fatalf("rows %d, format_version %d, cold %+v %v", sum.Rows, m.FormatVersion, cf, ok)
			}
			rows, _ := servedRows(t, out)
			if len(rows) != 0 {
				t.Errorf("served %d series", len(rows))
			}
		})
	}
}

// TestTiersSharded: a sharded build with a tier policy writes a tiered
// snapshot per shard, and the shards together serve the all-hot rows.
func TestTiersSharded(t *testing.T) {
	root := t.TempDir()
	lake := tierLake(t, root, 120)
	allHot := filepath.Join(root, "HOT")
	if _, err := build(t, lake, allHot, nil); err != nil {
		t.Fatal(err)
	}
	want, _ := servedRows(t, allHot)
	for _, tc := range []tierCase{tierCases[0], tierCases[len(tierCases)-1]} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]servedRow{}
			const n = 3
			for i := range n {
				dir := filepath.Join(t.TempDir(), fmt.Sprintf("DS.shard-%03d", i))
				if _, err := build(t, lake, dir, func(o *Options) { o.Shard = shard.Spec{Index: i, Count: n}; o.Tiers = tc.policy(t) }); err != nil {
					t.Fatal(err)
				}
				m := currentManifest(t, dir)
				if _, ok := m.FileByRole(manifest.RoleCold); !ok || m.FormatVersion != manifest.Version || m.Shard == nil {
					t.Fatalf("shard %d: format_version %d, files %+v, shard %+v", i, m.FormatVersion, m.Files, m.Shard)
				}
				rows, _ := servedRows(t, dir)
				for id, r := range rows {
					if shard.Of(id, n) != i {
						t.Errorf("series %s in shard %d", id, i)
					}
					got[id] = r
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the shards serve %d series, the all-hot build %d, or their rows differ", len(got), len(want))
			}
		})
	}
}

// TestTiersRange: a range that stops before the hot rows is served from
// the cold piece alone, and one that starts after the cold rows from the
// hot slice alone, with the all-hot build's rows.
func TestTiersRange(t *testing.T) {
	root := t.TempDir()
	lake := tierLake(t, root, 40)
	hot, tiered := filepath.Join(root, "HOT"), filepath.Join(root, "TIER")
	if _, err := build(t, lake, hot, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := build(t, lake, tiered, func(o *Options) { o.Tiers = tierCases[0].policy(t) }); err != nil {
		t.Fatal(err)
	}
	split := int32(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix() / 86400)
	open := func(dir string) (*snapshot.Snapshot, *query.SnapshotReader) {
		s, err := snapshot.Open(dir, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		r, err := query.FromSnapshot("DS", s)
		if err != nil {
			t.Fatal(err)
		}
		return s, r
	}
	_, hr := open(hot)
	ts, tr := open(tiered)
	for _, rg := range []struct {
		name   string
		r      query.Range
		pieces int // per series with cold rows, in the tiered snapshot
	}{
		{"recent only", query.Range{From: split, To: math.MaxInt32}, 1},
		{"old only", query.Range{From: math.MinInt32, To: split - 1}, 1},
		{"full history", query.AllPeriods, 2},
	} {
		t.Run(rg.name, func(t *testing.T) {
			for code := 0; code < ts.Index().Len(); code++ {
				want, err := hr.Rows(code, rg.r, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := tr.Rows(code, rg.r, nil)
				if err != nil {
					t.Fatal(err)
				}
				e := ts.Index().Entry(code)
				if e.Cold.Rows > 0 && e.RowCount > 1 && len(got) != rg.pieces {
					t.Errorf("series %d: %d pieces, want %d", code, len(got), rg.pieces)
				}
				if a, b := piecePeriods(want), piecePeriods(got); !reflect.DeepEqual(a, b) {
					t.Errorf("series %d: periods %v, all-hot %v", code, b, a)
				}
			}
		})
	}
}

func piecePeriods(ps []query.Piece) []int32 {
	var out []int32
	for _, p := range ps {
		col := p.Rec.Column(1).(*array.Date32)
		for i := p.Lo; i < p.Hi; i++ {
			out = append(out, int32(col.Value(int(i))))
		}
	}
	return out
}

// TestTiersIfChanged: --if-changed skips a build only when the table's
// snapshot and the tier policy are both CURRENT's: adding, changing or
// dropping a policy over an unchanged table builds.
func TestTiersIfChanged(t *testing.T) {
	fixture := filepath.Join("..", "..", "testdata", "delta", "spark_dv")
	out := filepath.Join(t.TempDir(), "DV")
	since, _ := coldfile.PolicyOf("2020-01-01", 0, "")
	since2, _ := coldfile.PolicyOf("2021-01-01", 0, "")
	vortex, _ := coldfile.PolicyOf("", 0, coldfile.FormatVortex)
	for i, step := range []struct {
		policy    coldfile.Policy
		unchanged bool
	}{
		{coldfile.Policy{}, false}, // first build
		{coldfile.Policy{}, true},
		{since, false},
		{since, true},
		{since2, false},
		{vortex, false},
		{vortex, true},
		{coldfile.Policy{}, false}, // back to all hot
		{coldfile.Policy{}, true},
	} {
		sum, err := build(t, fixture, out, func(o *Options) { o.IfChanged = true; o.Tiers = step.policy; o.MaxChange = 0 })
		if step.unchanged {
			if !errors.Is(err, ErrUnchanged) || !sum.Unchanged {
				t.Fatalf("step %d: want unchanged, got %v", i, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		m := currentManifest(t, out)
		_, tiered := m.FileByRole(manifest.RoleCold)
		if tiered != step.policy.Tiered() {
			t.Errorf("step %d: built, but tiered %v", i, tiered)
		}
	}
}
