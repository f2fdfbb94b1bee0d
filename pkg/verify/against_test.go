package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// smallLake writes a lake of three series in two files, with EIA-style
// string periods of mixed forms, a null value and an attribute.
func smallLake(t *testing.T, dir string, edit func(ids []any, periods []any, vals []any) ([]any, []any, []any)) {
	t.Helper()
	ids := testlake.Strs("A", "A", "A", "B", "B", "C")
	periods := testlake.Strs("2019-01", "2019-02", "2019-03", "2019", "2020", "2019-Q1")
	vals := []any{1.0, nil, 3.0, 10.0, 20.0, 7.5}
	if edit != nil {
		ids, periods, vals = edit(ids, periods, vals)
	}
	n := len(ids)
	h := n / 2
	testlake.WriteParquet(t, dir, "year=2019/part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids[:h]},
		testlake.Col{Name: "period", Vals: periods[:h]},
		testlake.Col{Name: "value", Vals: vals[:h], Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "units", Vals: testlake.Repeat("$", h)})
	testlake.WriteParquet(t, dir, "year=2020/part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids[h:]},
		testlake.Col{Name: "period", Vals: periods[h:]},
		testlake.Col{Name: "value", Vals: vals[h:], Typ: arrow.PrimitiveTypes.Float64},
		testlake.Col{Name: "units", Vals: testlake.Repeat("$", n-h)})
}

func TestAgainst(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	smallLake(t, lake, nil)
	ds := filepath.Join(root, "DS")
	testsnap.Build(t, lake, ds, nil)

	rep, err := Verify(ds, Options{Deep: true, Against: lake})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Status != StatusIntact || rep.InputRows != 6 || rep.InputSeries != 3 || rep.InputFiles != 2 {
		t.Fatalf("pristine: ok=%v input rows %d series %d files %d:%s", rep.OK, rep.InputRows, rep.InputSeries, rep.InputFiles, findings(rep))
	}

	cases := []struct {
		name string
		edit func(ids, periods, vals []any) ([]any, []any, []any)
		want []string // substrings of findings, in order
	}{
		{"a value changed", func(i, p, v []any) ([]any, []any, []any) { v[0] = 1.5; return i, p, v },
			[]string{`series 0 "A"`, "same 3 rows in number but different"}},
		{"a null became a value", func(i, p, v []any) ([]any, []any, []any) { v[1] = 0.0; return i, p, v },
			[]string{`"A"`, "different periods or values"}},
		{"a period changed", func(i, p, v []any) ([]any, []any, []any) { p[4] = "2021"; return i, p, v },
			[]string{`"B"`, "different"}},
		{"a row missing", func(i, p, v []any) ([]any, []any, []any) { return i[:5], p[:5], v[:5] },
			[]string{"holds 6 rows, the input 5", `"C"`, "not in the input"}},
		{"an extra series", func(i, p, v []any) ([]any, []any, []any) {
			return append(i, "D"), append(p, "2019"), append(v, 1.0)
		}, []string{"holds 6 rows, the input 7", `series "D"`, "in the input (1 rows) but not in the snapshot"}},
		{"a series renamed", func(i, p, v []any) ([]any, []any, []any) { i[5] = "Z"; return i, p, v },
			[]string{`"C"`, "not in the input", `series "Z"`, "not in the snapshot"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			other := filepath.Join(t.TempDir(), "lake")
			smallLake(t, other, tc.edit)
			rep, err := Verify(ds, Options{Against: other})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK {
				t.Fatal("no finding")
			}
			if rep.Status != StatusDiffers {
				t.Errorf("status %q, want %q: a difference from the input is not damage", rep.Status, StatusDiffers)
			}
			all := findings(rep)
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("findings lack %q:%s", w, all)
				}
			}
			for _, f := range rep.Findings {
				if f.Check != CheckAgainst {
					t.Errorf("unexpected check: %s", f)
				}
			}
		})
	}

	t.Run("unusable input", func(t *testing.T) {
		empty := t.TempDir()
		bad := t.TempDir()
		os.WriteFile(filepath.Join(bad, "x.parquet"), []byte("PAR1 not really"), 0o644)
		noPeriod := t.TempDir()
		testlake.WriteParquet(t, noPeriod, "a.parquet", 0, testlake.Col{Name: "series_id", Vals: testlake.Strs("A")})
		badPeriod := t.TempDir()
		testlake.WriteParquet(t, badPeriod, "a.parquet", 0,
			testlake.Col{Name: "series_id", Vals: testlake.Strs("A")}, testlake.Col{Name: "period", Vals: testlake.Strs("2019-13")})
		for _, in := range []string{filepath.Join(root, "nope"), empty, bad, noPeriod, badPeriod, filepath.Join(lake, "year=2019", "part-0.parquet")} {
			_, err := Verify(ds, Options{Against: in})
			if !errors.Is(err, ErrCannotVerify) {
				t.Errorf("%s: err = %v, want ErrCannotVerify", in, err)
			}
		}
	})
}

// TestAgainstOnDuplicateLast: with --on-duplicate=last the later input row
// wins; the comparison must resolve duplicates the same way.
func TestAgainstOnDuplicateLast(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	write := func(dir, rel string, v float64) {
		testlake.WriteParquet(t, dir, rel, 0,
			testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "A", "B")},
			testlake.Col{Name: "period", Vals: []any{arrow.Date32(100), arrow.Date32(101), arrow.Date32(100)}},
			testlake.Col{Name: "value", Vals: testlake.Floats(v, v+1, v+2)})
	}
	write(lake, "part-2.parquet", 1)
	write(lake, "part-10.parquet", 5) // later in natural order: wins
	ds := filepath.Join(root, "DS")
	testsnap.Build(t, lake, ds, func(o *sortwrite.Options) { o.OnDuplicate = sortwrite.OnDuplicateLast })
	rep, err := Verify(ds, Options{Deep: true, Against: lake})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.InputDuplicates != 3 || rep.InputRows != 6 {
		t.Fatalf("ok=%v duplicates %d rows %d:%s", rep.OK, rep.InputDuplicates, rep.InputRows, findings(rep))
	}
	// The same files under names that reverse their order: the other row
	// of every key wins, so every series differs.
	swapped := filepath.Join(root, "swapped")
	write(swapped, "part-10.parquet", 1)
	write(swapped, "part-2.parquet", 5)
	rep, err = Verify(ds, Options{Against: swapped})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 2 {
		t.Fatalf("want 2 series reported different:%s", findings(rep))
	}
}

// TestAgainstCatchesSilentValueChange: a value in the middle of a series
// is changed and the checksums recomputed. No structural check can see it;
// only the comparison with the input can.
func TestAgainstCatchesSilentValueChange(t *testing.T) {
	f := getFixture(t)
	ds := f.freshCopy(t)
	sc, recs := readArrow(t, filepath.Join(ds, f.data))
	r := seriesRange(recs[1], recs[1].Column(0).(*array.Uint32).Value(0))
	recs[1] = withColumn(recs[1], 2, float64s(recs[1].Column(2), func(v []float64, valid []bool) {
		v[r[0]], valid[r[0]] = 42, true
	}))
	writeArrow(t, ds, f.data, sc, recs)

	// The portable copy is an independent copy of the rows: deep reads it
	// back and sees the change. Without it, only --against can.
	deep, err := Verify(ds, Options{Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(deep.Findings) != 1 || deep.Findings[0].Check != CheckPortable || !strings.Contains(deep.Findings[0].Message, "column value") {
		t.Fatalf("want one portable finding on the value:%s", findings(deep))
	}
	editManifest(t, ds, func(m *manifest.Manifest) {
		m.Files = slices.DeleteFunc(m.Files, func(f manifest.File) bool { return f.Role == manifest.RolePortable })
	})
	deep, err = Verify(ds, Options{Deep: true})
	if err != nil {
		t.Fatal(err)
	}
	if !deep.OK {
		t.Fatalf("deep verification should pass:%s", findings(deep))
	}
	rep, err := Verify(ds, Options{Deep: true, Against: f.lake})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Check != CheckAgainst {
		t.Fatalf("want one against finding:%s", findings(rep))
	}
	t.Logf("%s", rep.Findings[0])
	if rep.InputRows != f.m.Stats.Rows || rep.InputSeries != f.m.Stats.Series || rep.InputFiles != len(f.m.Lineage.Inputs) {
		t.Errorf("input counts %d rows %d series %d files, manifest %d %d %d",
			rep.InputRows, rep.InputSeries, rep.InputFiles, f.m.Stats.Rows, f.m.Stats.Series, len(f.m.Lineage.Inputs))
	}
}

// TestAgainstShard: a shard's snapshot is compared with its own series of
// the whole lake: the other shards' rows are left out (and counted), not
// reported missing, for either shard function; a series of its own that
// the lake changed still differs.
func TestAgainstShard(t *testing.T) {
	root := t.TempDir()
	lakeDir := filepath.Join(root, "lake")
	ids := testlake.UniformIDs(40)
	var sid, per []any
	var val []any
	for _, id := range ids {
		for p := 0; p < 3; p++ {
			sid, per, val = append(sid, id), append(per, fmt.Sprintf("202%d", p)), append(val, float64(p))
		}
	}
	testlake.WriteParquet(t, lakeDir, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: sid},
		testlake.Col{Name: "period", Vals: per},
		testlake.Col{Name: "value", Vals: val, Typ: arrow.PrimitiveTypes.Float64})
	for _, hash := range []string{shard.HashXXH64, shard.HashIcebergBucket} {
		for i := 0; i < 3; i++ {
			ds := filepath.Join(root, fmt.Sprintf("DS-%s-%d", hash, i))
			testsnap.Build(t, lakeDir, ds, func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: i, Count: 3, Hash: hash} })
			rep, err := Verify(ds, Options{Deep: true, Against: lakeDir})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK || rep.Status != StatusIntact || rep.InputRows+rep.InputOtherShardRows != 120 || rep.InputOtherShardRows == 0 {
				t.Errorf("%s shard %d of 3: ok=%v status %s, input rows %d + other shards' %d (want 120 in all):%s",
					hash, i, rep.OK, rep.Status, rep.InputRows, rep.InputOtherShardRows, findings(rep))
			}
		}
	}
	// A changed value of one of the shard's own series is still found.
	spec := shard.Spec{Index: 1, Count: 3}
	ds := filepath.Join(root, "DS-xxhash64-1")
	changed := filepath.Join(root, "lake2")
	for k := range val {
		if spec.Of(sid[k].(string)) == 1 {
			val[k] = 99.0
			break
		}
	}
	testlake.WriteParquet(t, changed, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: sid},
		testlake.Col{Name: "period", Vals: per},
		testlake.Col{Name: "value", Vals: val, Typ: arrow.PrimitiveTypes.Float64})
	rep, err := Verify(ds, Options{Deep: true, Against: changed})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Status != StatusDiffers {
		t.Errorf("a changed row of the shard's own series: ok=%v status %s:%s", rep.OK, rep.Status, findings(rep))
	}
	// A manifest naming an unknown shard function: an error, not a panic.
	editManifest(t, ds, func(m *manifest.Manifest) { m.Shard.Hash = "nope" })
	if rep, err := Verify(ds, Options{Deep: true, Against: changed}); err == nil && rep.OK {
		t.Errorf("an unknown shard function was verified as intact")
	}
}
