package coldfile

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/datafile"
)

func TestPolicyColdRows(t *testing.T) {
	ps := []arrow.Date32{10, 20, 30, 40, 50}
	for _, tc := range []struct {
		name string
		p    Policy
		want int64
	}{
		{"untiered", Policy{}, 0},
		{"hot rows 2", Policy{HotRows: 2}, 3},
		{"hot rows 5", Policy{HotRows: 5}, 0},
		{"hot rows 9", Policy{HotRows: 9}, 0},
		{"hot since 30", Policy{HotSince: 30, HasHotSince: true}, 2},
		{"hot since 31", Policy{HotSince: 31, HasHotSince: true}, 3},
		{"hot since before all", Policy{HotSince: 0, HasHotSince: true}, 0},
		{"hot since after all: last row stays hot", Policy{HotSince: 99, HasHotSince: true}, 4},
		{"either rule keeps: since wins", Policy{HotSince: 20, HasHotSince: true, HotRows: 1}, 1},
		{"either rule keeps: rows win", Policy{HotSince: 50, HasHotSince: true, HotRows: 3}, 2},
	} {
		if got := tc.p.ColdRows(ps); got != tc.want {
			t.Errorf("%s: ColdRows = %d, want %d", tc.name, got, tc.want)
		}
	}
	if (Policy{HotRows: 1}).ColdRows(nil) != 0 {
		t.Error("empty series has cold rows")
	}
}

// table is a data-schema batch of series with lengths ns, periods 100,
// 101, … per series, values = code*1000 + row (null every 7th).
func table(ns []int) arrow.RecordBatch {
	sc := datafile.Schema(arrow.PrimitiveTypes.Float64, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for code, n := range ns {
		for i := 0; i < n; i++ {
			b.Field(0).(*array.Uint32Builder).Append(uint32(code))
			b.Field(1).(*array.Date32Builder).Append(arrow.Date32(100 + i))
			if i%7 == 6 {
				b.Field(2).(*array.Float64Builder).AppendNull()
			} else {
				b.Field(2).(*array.Float64Builder).Append(float64(code*1000 + i))
			}
		}
	}
	return b.NewRecordBatch()
}

// TestRoundTrip: cold prefixes of series written one at a time read back
// exactly, whole and by period range; chunks are cut after the series that
// fill them; the cache serves repeats and evicts under its budget.
func TestRoundTrip(t *testing.T) {
	ns := []int{5, 300, 1, 40, 2500, 7, 60}
	rec := table(ns)
	defer rec.Release()
	pol := Policy{HotRows: 3}
	path := filepath.Join(t.TempDir(), FileName)
	w, err := Create(path, rec.Schema(), Options{ChunkRows: 256})
	if err != nil {
		t.Fatal(err)
	}
	locs := make([]Location, len(ns))
	var start int64
	ps := rec.Column(1).(*array.Date32).Date32Values()
	for code, n := range ns {
		c := pol.ColdRows(ps[start : start+int64(n)])
		if locs[code], err = w.Add(rec, start, start+c); err != nil {
			t.Fatal(err)
		}
		start += int64(n)
	}
	// Code order is enforced.
	if _, err := w.Add(rec, 0, 2); err == nil {
		t.Error("a series code out of order was accepted")
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Cold rows 2, 297, 0, 37, 2497, 4, 57: cuts after 297 (299 ≥ 256), after
	// 2497 (one series over 256 is one cut, not split), then the rest.
	if info.Rows != 2+297+37+2497+4+57 || info.Chunks != 3 {
		t.Errorf("info %+v, want 2894 rows in 3 chunks", info)
	}
	st, _ := os.Stat(path)
	if st.Size() != info.Size {
		t.Errorf("size %d, info says %d", st.Size(), info.Size)
	}
	cache := NewCache(1 << 20)
	f, err := Open(path, rec.Schema(), info.Checksum, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start = 0
	for code, n := range ns {
		loc := locs[code]
		if loc.Rows != pol.ColdRows(ps[start:start+int64(n)]) {
			t.Fatalf("series %d: location %+v", code, loc)
		}
		for _, rg := range [][2]int32{{math.MinInt32, math.MaxInt32}, {101, 103}, {0, 99}, {120, math.MaxInt32}} {
			got, lo, hi, err := f.Rows(loc, rg[0], rg[1])
			if err != nil {
				t.Fatal(err)
			}
			// Expected: the cold rows with period in range.
			var a, z int64 = start, start
			for i := start; i < start+loc.Rows; i++ {
				if int32(ps[i]) < rg[0] {
					a = i + 1
				}
				if int32(ps[i]) <= rg[1] {
					z = i + 1
				}
			}
			z = max(z, a)
			if got == nil {
				if z > a {
					t.Errorf("series %d range %v: no rows, want %d", code, rg, z-a)
				}
				continue
			}
			want := rec.NewSlice(a, z)
			have := got.NewSlice(lo, hi)
			if !array.RecordEqual(want, have) {
				t.Errorf("series %d range %v: rows differ (%d vs %d)", code, rg, have.NumRows(), want.NumRows())
			}
			want.Release()
			have.Release()
		}
		start += int64(n)
	}
	s := cache.Stats()
	if s.Hits == 0 || s.Misses != 6 || s.Evictions != 0 {
		t.Errorf("cache %+v: want 6 misses (one per series with cold rows) and hits", s)
	}

	// A tiny budget evicts; a batch over the budget is not kept.
	small := NewCache(2 * 8 * 300)
	g, err := Open(path, rec.Schema(), "", small)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, code := range []int{1, 3, 6, 1, 4} {
		if _, err := g.Series(locs[code]); err != nil {
			t.Fatal(err)
		}
	}
	if s := small.Stats(); s.Used > s.Budget || s.Evictions == 0 {
		t.Errorf("small cache %+v", s)
	}
}

// TestCorrupt: a location outside the file or disagreeing with the rows,
// a wrong checksum, a wrong schema are corruption, never a panic.
func TestCorrupt(t *testing.T) {
	rec := table([]int{10, 10})
	defer rec.Release()
	path := filepath.Join(t.TempDir(), FileName)
	w, err := Create(path, rec.Schema(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	l0, _ := w.Add(rec, 0, 8)
	if _, err := w.Add(rec, 10, 20); err != nil {
		t.Fatal(err)
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, rec.Schema(), "xxh64:0000000000000000", nil); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Errorf("wrong checksum: %v", err)
	}
	other := datafile.Schema(arrow.PrimitiveTypes.Int64, nil)
	if _, err := Open(path, other, "", nil); !errors.Is(err, corrupt.ErrCorrupt) {
		t.Errorf("wrong schema: %v", err)
	}
	f, err := Open(path, rec.Schema(), info.Checksum, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, loc := range map[string]Location{
		"past the end":  {Start: 10, Rows: 9, FirstPeriod: 100, LastPeriod: 108},
		"negative":      {Start: -1, Rows: 2},
		"wrong periods": {Start: 0, Rows: 8, FirstPeriod: 100, LastPeriod: 200},
		"straddles":     {Start: 4, Rows: 8, FirstPeriod: 104, LastPeriod: 101},
	} {
		if _, err := f.Series(loc); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := f.Series(l0); err != nil {
		t.Errorf("good location: %v", err)
	}
	// Non-increasing periods are refused at write time.
	w2, _ := Create(filepath.Join(t.TempDir(), FileName), rec.Schema(), Options{})
	defer w2.Abort()
	if _, err := w2.Add(rec, 5, 15); err == nil {
		t.Error("rows of two series accepted as one")
	}
}
