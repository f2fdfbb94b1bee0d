package sortwrite

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/testlake"
)

// TestRebuild: Rebuild returns Build's order in memory: ids sorted, each
// series' periods ascending, duplicates dropped as Build drops them, the
// latest non-null row, attributes once per series.
func TestRebuild(t *testing.T) {
	dir := t.TempDir()
	testlake.WriteParquet(t, dir, "a.parquet", 0,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("B", "A", "B", "A", "C", "B")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2021", "2020-02", "2020", "2020-01", "2019", "2021")},
		testlake.Col{Name: "value", Vals: []any{1.0, 2.0, 3.0, nil, nil, 4.0}},
		testlake.Col{Name: "units", Vals: testlake.Strs("b", "a", "b", "a", "c", "b")},
	)
	r, err := Rebuild(context.Background(), Options{Input: dir, OnDuplicate: OnDuplicateLast})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !slices.Equal(r.IDs, []string{"A", "B", "C"}) || !slices.Equal(r.Start, []int{0, 2, 4}) || r.Rows != 5 || r.Dropped != 1 {
		t.Fatalf("ids %v start %v rows %d dropped %d", r.IDs, r.Start, r.Rows, r.Dropped)
	}
	if !slices.Equal(r.LatestRow, []int{1, 3, -1}) {
		t.Errorf("latest rows %v", r.LatestRow)
	}
	v := r.Value.(*array.Float64)
	if v.IsValid(0) || v.Value(1) != 2 || v.Value(2) != 3 || v.Value(3) != 4 {
		t.Errorf("values %v", v)
	}
	if !slices.IsSorted(r.Period[0:2]) || !slices.IsSorted(r.Period[2:4]) {
		t.Errorf("periods %v", r.Period)
	}
	if !slices.Equal(r.Attr, []string{"units"}) || r.Attrs[0].(*array.String).Value(1) != "b" {
		t.Errorf("attributes %v %v", r.Attr, r.Attrs)
	}
	if _, err := Rebuild(context.Background(), Options{Input: filepath.Join(dir, "none")}); err == nil {
		t.Error("a missing input rebuilds")
	}
}
