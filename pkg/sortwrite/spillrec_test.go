package sortwrite

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// writeLateLake writes three files of 97 series whose columns "unit"
// (string) and "level" (int64) are constant within every series; "late"
// (string) and "step" (int64) are too in the first two files, but vary
// within a series in file lateFile only, or in none when lateFile < 0.
func writeLateLake(t *testing.T, dir string, lateFile int) int {
	t.Helper()
	const n = 6000
	for f := range 3 {
		var ids, pers, vals, units, late []any
		var levels, steps []any
		for i := range n {
			s := i % 97
			ids = append(ids, fmt.Sprintf("S%03d", s))
			pers = append(pers, strconv.Itoa(1900+f*(n/97+1)+i/97))
			if i%11 == 0 {
				vals = append(vals, nil)
			} else {
				vals = append(vals, float64(i*10+f))
			}
			units = append(units, fmt.Sprint("u", s%5))
			levels = append(levels, int64(s%7))
			if f == lateFile {
				late = append(late, fmt.Sprint("x", s, "-", i%2))
				steps = append(steps, int64(i%3))
			} else if s%4 == 0 {
				late, steps = append(late, nil), append(steps, nil)
			} else {
				late = append(late, fmt.Sprint("x", s))
				steps = append(steps, int64(s*1000))
			}
		}
		testlake.WriteParquet(t, dir, fmt.Sprintf("part-%d.parquet", f), 1000,
			testlake.Col{Name: "series_id", Vals: ids}, testlake.Col{Name: "period", Vals: pers},
			testlake.Col{Name: "value", Vals: vals}, testlake.Col{Name: "unit", Vals: units},
			testlake.Col{Name: "late", Vals: late}, testlake.Col{Name: "level", Vals: levels},
			testlake.Col{Name: "step", Vals: steps})
	}
	return 3 * n
}

// TestSpillLeavesOutAttributes: the external build's runs leave out the
// columns still taken for attributes when each is written, and write the
// in-memory build's bytes whether those columns stay attributes or vary
// in a later run (filled back from the first values in the merge); so
// does a build from a split whose parts leave them out.
func TestSpillLeavesOutAttributes(t *testing.T) {
	// header 12, value 9, unit 4, late 4, level 9, step 9
	const full, bare = 47, 21
	for _, tc := range []struct {
		name     string
		lateFile int
		attrs    int // attribute columns of the index
	}{
		{"all-attributes", -1, 4},
		{"late-varies-in-last-file", 2, 2},
		{"late-varies-in-second-file", 1, 2},
		{"late-varies-in-first-file", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			lake := filepath.Join(root, "lake")
			rows := writeLateLake(t, lake, tc.lateFile)
			mem, ext := filepath.Join(root, "MEM"), filepath.Join(root, "EXT")
			if _, err := build(t, lake, mem, func(o *Options) { o.BatchRows = 700 }); err != nil {
				t.Fatal(err)
			}
			es, err := build(t, lake, ext, func(o *Options) { o.BatchRows = 700; o.MemoryLimit = 200 << 10 })
			if err != nil {
				t.Fatal(err)
			}
			if !es.External || es.Runs < 3 {
				t.Fatalf("external=%v runs=%d", es.External, es.Runs)
			}
			sameSnapshot(t, mem, ext)
			deepVerify(t, ext, lake)
			m, _, _ := readBack(t, ext)
			if got := len(m.Schema.Attributes); got != tc.attrs {
				t.Errorf("%d attribute columns %v, want %d", got, m.Schema.Attributes, tc.attrs)
			}
			// Every run before the one that finds late and step varying
			// leaves them out, and every run leaves out unit and level.
			lo, hi := int64(rows*bare), int64(rows*(full-13))
			if tc.lateFile < 0 || tc.lateFile == 2 {
				hi = int64(rows*bare + rows/3*(full-13-bare))
			}
			if es.SpillBytes < lo || es.SpillBytes > hi {
				t.Errorf("spilled %d bytes for %d rows, want %d to %d", es.SpillBytes, rows, lo, hi)
			}

			split := filepath.Join(root, "split")
			splitAll(t, lake, split, 2, 2, func(o *Options) { o.MemoryLimit = 200 << 10 })
			for i := range 2 {
				spec := shard.Spec{Index: i, Count: 2}
				ref, got := filepath.Join(root, fmt.Sprint("LAKE", i)), filepath.Join(root, fmt.Sprint("SPLIT", i))
				if _, err := build(t, lake, ref, func(o *Options) { o.Shard = spec; o.BatchRows = 700 }); err != nil {
					t.Fatal(err)
				}
				if _, err := build(t, "", got, func(o *Options) { o.Shard = spec; o.BatchRows = 700; o.FromSplit = split }); err != nil {
					t.Fatal(err)
				}
				sameSnapshot(t, ref, got)
			}
		})
	}
}

// TestRunRowsCountsSeries: the run length leaves room for the state kept
// per series (seen, ranks, the first values of the columns taken for
// attributes or left out by a run) and the dictionaries, so runs shorten
// as series are read.
func TestRunRowsCountsSeries(t *testing.T) {
	tbl := &table{
		series: newStore(Column{Name: "id", Type: arrow.BinaryTypes.String}, 0, nil),
		value:  newStore(Column{Name: "v", Type: arrow.PrimitiveTypes.Float64}, 0, nil),
		others: []*store{
			newStore(Column{Name: "unit", Type: arrow.BinaryTypes.String}, 0, nil),
			newStore(Column{Name: "level", Type: arrow.PrimitiveTypes.Int64}, 0, nil),
		},
	}
	// per row in a run: 24 + value 9 + unit 4 + level 9; the runs get 45%
	// of the budget less the program's reserve
	const perRow = 46
	budget := int64(100 << 20)
	run := int64(float64(budget-programReserve) * runShare)
	for _, tc := range []struct {
		name    string
		series  int
		isAttr  []bool
		kept    bool  // level's first values kept though it is no attribute
		state   int64 // bytes per series kept
		minimum bool  // runs of minRunRows
	}{
		{"no series yet", 0, []bool{true, true}, false, 0, false},
		{"both attributes", 100000, []bool{true, true}, false, 9 + 4 + 9, false},
		{"level varies", 100000, []bool{true, false}, false, 9 + 4, false},
		{"level varies, kept for a run", 100000, []bool{true, false}, true, 9 + 4 + 9, false},
		{"series beyond the budget", 2500000, []bool{true, true}, false, 9 + 4 + 9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl.series.dict = newDictionary()
			ids := make([]string, tc.series)
			for i := range ids {
				ids[i] = fmt.Sprint("S", i)
			}
			if err := tbl.series.dict.internLocal(ids, make([]uint32, len(ids))); err != nil {
				t.Fatal(err)
			}
			e := &external{t: tbl, opt: Options{BatchRows: 1000}, budget: budget, isAttr: tc.isAttr}
			for _, st := range tbl.others {
				e.firsts = append(e.firsts, st.like())
			}
			if tc.kept {
				e.firsts[1].grow(tc.series)
			}
			// The dictionaries: the series ids' (a table of at least two
			// slots a value, its hashes, the value headers and 64 KiB
			// blocks of bytes) and the empty one of unit.
			dicts := tbl.series.dict.footprint() + tbl.others[0].dict.footprint()
			if low := int64(tc.series) * (2*8 + 8 + 16); dicts < low+8<<10 {
				t.Fatalf("dictionaries counted %d bytes, want at least %d", dicts, low+8<<10)
			}
			want := int((run - int64(tc.series)*tc.state - dicts) / perRow)
			if tc.minimum {
				want = minRunRows
			}
			if got := e.runRows(); got != want {
				t.Errorf("runRows = %d, want %d", got, want)
			}
		})
	}
}
