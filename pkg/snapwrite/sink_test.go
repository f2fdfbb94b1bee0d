package snapwrite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// dataBatch is a data-schema batch of series with lengths ns (codes from
// first), periods 100, 101, … per series.
func dataBatch(first int, ns []int) arrow.RecordBatch {
	sc := datafile.Schema(arrow.PrimitiveTypes.Float64, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for i, n := range ns {
		for r := 0; r < n; r++ {
			b.Field(datafile.ColumnSeriesCode).(*array.Uint32Builder).Append(uint32(first + i))
			b.Field(datafile.ColumnPeriod).(*array.Date32Builder).Append(arrow.Date32(100 + r))
			b.Field(datafile.ColumnValue).(*array.Float64Builder).Append(float64(r))
		}
	}
	return b.NewRecordBatch()
}

// TestSink writes two batches through a Sink under each kind of policy
// and checks the files it names, where each series' hot and cold rows
// went, and that the rows add up.
func TestSink(t *testing.T) {
	ns := [][]int{{5, 1}, {3}} // series 0, 1 in the first batch, 2 in the second
	for _, tc := range []struct {
		name  string
		p     coldfile.Policy
		files string // path:role:rows, in order
		hot   []int64
		cold  []int64
	}{
		{"untiered", coldfile.Policy{}, "data.arrow:data:9", []int64{5, 1, 3}, []int64{0, 0, 0}},
		{"hot rows 2", coldfile.Policy{HotRows: 2}, "data.arrow:data:5 cold.vortex:cold:4", []int64{2, 1, 2}, []int64{3, 0, 1}},
		{"all cold", coldfile.Policy{AllCold: true}, "data.arrow:data:0 cold.vortex:cold:9", []int64{0, 0, 0}, []int64{5, 1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sc := datafile.Schema(arrow.PrimitiveTypes.Float64, nil)
			k, err := NewSink(dir, sc, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			first := 0
			for _, b := range ns {
				rec := dataBatch(first, b)
				err := k.Write(rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				first += len(b)
			}
			locs := k.Locations()
			for i := range tc.hot {
				if locs[i].RowCount != tc.hot[i] {
					t.Errorf("series %d: %d hot rows, want %d", i, locs[i].RowCount, tc.hot[i])
				}
				if c := k.ColdAt(i); c.Rows != tc.cold[i] {
					t.Errorf("series %d: %d cold rows, want %d", i, c.Rows, tc.cold[i])
				}
			}
			files, err := k.Close()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				got = append(got, fmt.Sprintf("%s:%s:%d", f.Path, f.Role, f.Rows))
				st, err := os.Stat(filepath.Join(dir, f.Path))
				if err != nil || st.Size() != f.Size {
					t.Errorf("%s: on disk %v, %v; the manifest entry says %d bytes", f.Path, st, err, f.Size)
				}
				if f.Checksum == "" {
					t.Errorf("%s has no checksum", f.Path)
				}
			}
			if g := strings.Join(got, " "); g != tc.files {
				t.Errorf("files %s, want %s", g, tc.files)
			}
			if tc.p.Tiered() {
				f := files[1]
				if f.Tier != manifest.TierCold || f.Format != manifest.FormatVortex {
					t.Errorf("cold file entry %+v", f)
				}
			}
		})
	}
}

// TestSinkRefusesBadBatches: a tiered sink names what is wrong with a
// batch it cannot split instead of writing it.
func TestSinkRefusesBadBatches(t *testing.T) {
	sc := datafile.Schema(arrow.PrimitiveTypes.Float64, nil)
	k, err := NewSink(t.TempDir(), sc, coldfile.Policy{HotRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Abort()
	rec := dataBatch(1, []int{2}) // code 1 where 0 is due
	defer rec.Release()
	if err := k.Write(rec); err == nil || !strings.Contains(err.Error(), "series code 1 where 0 was due") {
		t.Errorf("Write = %v, want the out-of-order series code named", err)
	}
	if _, err := NewSplitter(nil, nil, coldfile.Policy{}); err == nil {
		t.Error("NewSplitter accepted an untiered policy")
	}
}

// TestSinkDrain: draining after each batch hands out each series' hot and
// cold location once, in code order, the same as Locations and ColdAt
// give at the end; the codes stay checked across drains (a batch whose
// first code repeats a drained series is refused).
func TestSinkDrain(t *testing.T) {
	ns := [][]int{{5, 1}, {3}, {2, 4}}
	for _, tc := range []struct {
		name string
		p    coldfile.Policy
	}{
		{"untiered", coldfile.Policy{}},
		{"hot rows 2", coldfile.Policy{HotRows: 2}},
		{"all cold", coldfile.Policy{AllCold: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := datafile.Schema(arrow.PrimitiveTypes.Float64, nil)
			write := func(k *Sink, first int, b []int) error {
				rec := dataBatch(first, b)
				defer rec.Release()
				return k.Write(rec)
			}
			// The reference: everything written, then read at once.
			ref, err := NewSink(t.TempDir(), sc, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Abort()
			var want []string
			first := 0
			for _, b := range ns {
				if err := write(ref, first, b); err != nil {
					t.Fatal(err)
				}
				first += len(b)
			}
			for i, l := range ref.Locations() {
				want = append(want, fmt.Sprintf("%+v %+v", l, ref.ColdAt(i)))
			}

			k, err := NewSink(t.TempDir(), sc, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Abort()
			var got []string
			first = 0
			for bi, b := range ns {
				if err := write(k, first, b); err != nil {
					t.Fatal(err)
				}
				first += len(b)
				n := 0
				if err := k.Drain(func(hot datafile.Location, cold index.Cold) error {
					got = append(got, fmt.Sprintf("%+v %+v", hot, cold))
					n++
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if n != len(b) {
					t.Fatalf("batch %d: drained %d series, want %d", bi, n, len(b))
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("drained\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if err := k.Drain(func(datafile.Location, index.Cold) error { return fmt.Errorf("called") }); err != nil {
				t.Errorf("a drain with nothing written: %v", err)
			}
			if err := write(k, first-1, []int{2}); err == nil {
				t.Error("a batch repeating the last drained series' code was written")
			}
		})
	}
}
