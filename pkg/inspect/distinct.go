package inspect

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// distinct counts the distinct non-null values of an attribute column and
// its nulls. The common column types are counted by their values (strings
// as views of the mapped buffer, numbers by their bits), so a summary of
// millions of series costs one hash insert per series and no allocation per
// row; a series-sorted column repeats values in runs, which are skipped
// before hashing. Other types fall back to their rendered text, which is
// what a reader sees, so two values that print alike count once.
func distinct(arr arrow.Array) (int64, int64) {
	nulls := int64(arr.NullN())
	switch a := arr.(type) {
	case *array.Dictionary:
		return distinctDictionary(a), nulls
	case *array.String:
		return countDistinct(a, a.Value), nulls
	case *array.LargeString:
		return countDistinct(a, a.Value), nulls
	case *array.Int8:
		return countDistinct(a, a.Value), nulls
	case *array.Int16:
		return countDistinct(a, a.Value), nulls
	case *array.Int32:
		return countDistinct(a, a.Value), nulls
	case *array.Int64:
		return countDistinct(a, a.Value), nulls
	case *array.Uint8:
		return countDistinct(a, a.Value), nulls
	case *array.Uint16:
		return countDistinct(a, a.Value), nulls
	case *array.Uint32:
		return countDistinct(a, a.Value), nulls
	case *array.Uint64:
		return countDistinct(a, a.Value), nulls
	case *array.Date32:
		return countDistinct(a, a.Value), nulls
	case *array.Boolean:
		return countDistinct(a, a.Value), nulls
	case *array.Float64:
		return countDistinct(a, func(i int) uint64 { return floatKey(a.Value(i)) }), nulls
	case *array.Float32:
		return countDistinct(a, func(i int) uint64 { return floatKey(float64(a.Value(i))) }), nulls
	}
	return countDistinct(arr, func(i int) string { return CellOf(arr, i).Text }), nulls
}

// floatKey keys a float by its bits, with every NaN one key (they print
// alike).
func floatKey(f float64) uint64 {
	if math.IsNaN(f) {
		return math.Float64bits(math.NaN())
	}
	return math.Float64bits(f)
}

// countDistinct counts the distinct values value(i) of arr's non-null rows.
func countDistinct[K comparable](arr arrow.Array, value func(int) K) int64 {
	seen := map[K]struct{}{}
	var prev K
	havePrev := false
	for i := 0; i < arr.Len(); i++ {
		if arr.IsNull(i) {
			continue
		}
		v := value(i)
		if havePrev && v == prev {
			continue
		}
		seen[v] = struct{}{}
		prev, havePrev = v, true
	}
	return int64(len(seen))
}

// distinctDictionary counts a dictionary column through its indices: the
// entries used, counted by their text once each (a dictionary may repeat a
// value, and it is small beside the column).
func distinctDictionary(d *array.Dictionary) int64 {
	used := make([]bool, d.Dictionary().Len())
	for i := 0; i < d.Len(); i++ {
		if !d.IsNull(i) {
			used[d.GetValueIndex(i)] = true
		}
	}
	seen := map[string]struct{}{}
	for k, u := range used {
		if u {
			seen[CellOf(d.Dictionary(), k).Text] = struct{}{}
		}
	}
	return int64(len(seen))
}
