package sortwrite

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestExternalPlanHonoursBudget: for a lakegen-shaped build (100k series,
// 15M rows, a float64 value, four string attributes), the collector's
// limit the external sort sets while runs are read and while they are
// merged, with the program's reserve, stays within the budget once the
// budget is above the merge's floor (two data batches and the per-series
// state), and at that floor below it; runs and the final merge's read
// buffers take their shares of the work memory.
func TestExternalPlanHonoursBudget(t *testing.T) {
	const rows, series = 15_000_000, 100_000
	str := func(name string) *store { return newStore(Column{Name: name, Type: arrow.BinaryTypes.String}, 0, nil) }
	tbl := &table{
		rows:   rows,
		series: str("series_id"),
		value:  newStore(Column{Name: "value", Type: arrow.PrimitiveTypes.Float64}, 0, nil),
		others: []*store{str("units"), str("frequency"), str("name"), str("category")},
	}
	ids := make([]string, series)
	for i := range ids {
		ids[i] = fmt.Sprintf("ELEC.GEN.%06d-US-99.M", i)
	}
	if err := tbl.series.dict.internLocal(ids, make([]uint32, series)); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	for _, tc := range []struct {
		budget, batchRows int64
		floor             int64 // MiB the plan needs whatever the budget
	}{
		{64 * mib, 1 << 20, 135},
		{128 * mib, 1 << 20, 135},
		{160 * mib, 1 << 20, 135},
		{256 * mib, 1 << 20, 135},
		{1 << 30, 1 << 20, 135},
		{6 << 30, 1 << 20, 135},
		{64 * mib, 64 << 10, 100},
		{128 * mib, 64 << 10, 100},
	} {
		t.Run(fmt.Sprintf("budget=%dMiB/batch=%d", tc.budget/mib, tc.batchRows), func(t *testing.T) {
			e := &external{t: tbl, opt: Options{BatchRows: int(tc.batchRows)}, budget: tc.budget,
				isAttr: []bool{true, true, true, true}}
			for _, st := range tbl.others {
				e.firsts = append(e.firsts, st.like())
				e.firsts[len(e.firsts)-1].grow(series)
			}
			e.seen = make([]bool, series)
			run := max(e.runRows(), 131072) // a lakegen row group
			if tc.budget-programReserve > 64*mib {
				runMem := int64(run)*perRowRun(tbl) + e.seriesCost() + e.dictCost()
				if share := int64(float64(e.work()) * runShare); runMem > share+perRowRun(tbl) {
					t.Errorf("a run of %d rows holds %d bytes with the per-series state, over its share %d", run, runMem, share)
				}
			}
			// The final merge reads at most fanIn runs (narrow merges more
			// in passes first), through a tenth of the work memory.
			spilled := (rows + run - 1) / run
			e.runs = make([]runSource, min(spilled, fanIn(e)))
			if got, most := int64(e.readBuffer())*int64(len(e.runs)), max(e.work()/10, 16*minReadBuffer); got > most {
				t.Errorf("%d runs read through %d bytes of buffers, want at most %d", len(e.runs), got, most)
			}
			runLimit := e.limitFor(int64(run)*perRowRun(tbl) + e.seriesCost() + e.dictCost() + spillSlack)
			mergeLimit := e.limitFor(e.mergeNeed())
			peak := max(runLimit, mergeLimit) + programReserve
			t.Logf("runs of %d rows (%d, %d merged at once), limits: runs %d MiB, merge %d MiB; planned peak %d MiB",
				run, spilled, len(e.runs), runLimit/mib, mergeLimit/mib, peak/mib)
			if want := max(tc.budget, tc.floor*mib); peak > want {
				t.Errorf("planned peak %d MiB (runs %d MiB, merge %d MiB, reserve %d MiB), want at most %d MiB",
					peak/mib, runLimit/mib, mergeLimit/mib, programReserve/mib, want/mib)
			}
			if tc.budget >= tc.floor*mib && peak != tc.budget {
				t.Errorf("planned peak %d MiB, want the budget (%d MiB): the collector's limit is the work memory", peak/mib, tc.budget/mib)
			}
		})
	}
}
