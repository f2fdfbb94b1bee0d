package period

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // tests must not depend on the host's zoneinfo

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func newMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// column runs Column with a dst longer than needed, checking the tail is
// left alone.
func column(t *testing.T, arr arrow.Array) ([]int32, error) {
	t.Helper()
	dst := make([]int32, arr.Len()+1)
	dst[arr.Len()] = 12345
	err := Column(arr, dst)
	if dst[arr.Len()] != 12345 {
		t.Errorf("Column wrote past arr.Len()")
	}
	return dst[:arr.Len()], err
}

// wantDays checks that Column converts arr without error to the given dates.
func wantDays(t *testing.T, arr arrow.Array, want ...string) {
	t.Helper()
	got, err := column(t, arr)
	if err != nil {
		t.Fatalf("Column(%s): %v", arr.DataType(), err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i, w := range want {
		if Format(got[i]) != w {
			t.Errorf("row %d: got %s, want %s", i, Format(got[i]), w)
		}
	}
}

// wantRowError checks that Column fails with a RowError with the given row,
// value and message.
func wantRowError(t *testing.T, arr arrow.Array, row int, value, msg string) *RowError {
	t.Helper()
	_, err := column(t, arr)
	var re *RowError
	if !errors.As(err, &re) {
		t.Fatalf("Column(%s) = %v, want *RowError", arr.DataType(), err)
	}
	if re.Row != row || re.Value != value {
		t.Errorf("RowError{Row: %d, Value: %q}, want {Row: %d, Value: %q}", re.Row, re.Value, row, value)
	}
	if msg != "" && re.Error() != msg {
		t.Errorf("error\n got %s\nwant %s", re, msg)
	}
	return re
}

func stringArray(mem memory.Allocator, dt arrow.DataType, vals ...*string) arrow.Array {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for _, v := range vals {
		if v == nil {
			b.AppendNull()
			continue
		}
		switch b := b.(type) {
		case *array.StringBuilder:
			b.Append(*v)
		case *array.LargeStringBuilder:
			b.Append(*v)
		case *array.StringViewBuilder:
			b.Append(*v)
		}
	}
	return b.NewArray()
}

func p(s string) *string { return &s }

func TestColumnStrings(t *testing.T) {
	for _, dt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.StringView} {
		t.Run(dt.String(), func(t *testing.T) {
			mem := newMem(t)
			arr := stringArray(mem, dt, p("2019"), p("2019-03"), p("201904"), p("2019-03-15"), p("20190316"),
				p("2019Q2"), p("2019-q3"), p("2015-W01"), p("1969-12-31"))
			defer arr.Release()
			wantDays(t, arr, "2019-01-01", "2019-03-01", "2019-04-01", "2019-03-15", "2019-03-16",
				"2019-04-01", "2019-07-01", "2014-12-29", "1969-12-31")

			// Bad value, long enough not to be inlined in a string view.
			bad := stringArray(mem, dt, p("2019"), p("2019-02-29T00:00:00Z"), p("2019-13"))
			defer bad.Release()
			re := wantRowError(t, bad, 1, "2019-02-29T00:00:00Z",
				`row 1: period "2019-02-29T00:00:00Z": unrecognised period format; want YYYY, YYYY-MM, YYYYMM, YYYY-MM-DD, YYYYMMDD, YYYY-Qn or YYYY-Www`)
			if !errors.Is(re, errFormat) {
				t.Errorf("RowError does not unwrap to its cause")
			}

			bad2 := stringArray(mem, dt, p("2019-01"), p("2019-02"), p("2019-03"), p("2019-13"))
			defer bad2.Release()
			wantRowError(t, bad2, 3, "2019-13", `row 3: period "2019-13": month 13 out of range 1-12`)

			nulls := stringArray(mem, dt, p("2019"), p("2020"), nil, p("bad"))
			defer nulls.Release()
			re = wantRowError(t, nulls, 2, "null", `row 2: period "null": null period`)
			if !errors.Is(re, ErrNull) {
				t.Errorf("null RowError does not wrap ErrNull")
			}

			// Slices: rows are numbered within the slice.
			sl := array.NewSlice(nulls, 1, 4)
			defer sl.Release()
			wantRowError(t, sl, 1, "null", "")
			sl2 := array.NewSlice(bad2, 2, 4)
			defer sl2.Release()
			wantRowError(t, sl2, 1, "2019-13", "")
			sl3 := array.NewSlice(nulls, 0, 2)
			defer sl3.Release()
			wantDays(t, sl3, "2019-01-01", "2020-01-01")
		})
	}
}

// TestRowErrorValueIsCopied guards against RowError.Value aliasing Arrow
// memory that is released before the error is read.
func TestRowErrorValueIsCopied(t *testing.T) {
	mem := newMem(t)
	arr := stringArray(mem, arrow.BinaryTypes.String, p("2019-99"))
	err := Column(arr, make([]int32, 1))
	buf := arr.Data().Buffers()[2].Bytes()
	copy(buf, "XXXXXXX")
	arr.Release()
	var re *RowError
	if !errors.As(err, &re) || re.Value != "2019-99" {
		t.Fatalf("got %v", err)
	}
}

func TestColumnDate32(t *testing.T) {
	mem := newMem(t)
	b := array.NewDate32Builder(mem)
	defer b.Release()
	b.AppendValues([]arrow.Date32{0, -1, 17897, -719162}, nil)
	arr := b.NewArray()
	defer arr.Release()
	wantDays(t, arr, "1970-01-01", "1969-12-31", "2019-01-01", "0001-01-01")

	b.AppendValues([]arrow.Date32{1, 2, 3}, []bool{true, false, true})
	nulls := b.NewArray()
	defer nulls.Release()
	wantRowError(t, nulls, 1, "null", `row 1: period "null": null period`)
}

func TestColumnDate64(t *testing.T) {
	mem := newMem(t)
	b := array.NewDate64Builder(mem)
	defer b.Release()
	const day = 86_400_000
	b.AppendValues([]arrow.Date64{0, day - 1, day, -1, -day, -day - 1, 17897 * day, -719162 * day}, nil)
	arr := b.NewArray()
	defer arr.Release()
	wantDays(t, arr, "1970-01-01", "1970-01-01", "1970-01-02", "1969-12-31", "1969-12-31", "1969-12-30", "2019-01-01", "0001-01-01")

	b.AppendValues([]arrow.Date64{0, math.MaxInt64}, nil)
	huge := b.NewArray()
	defer huge.Release()
	wantRowError(t, huge, 1, "9223372036854775807", `row 1: period "9223372036854775807": date64 value outside the date32 range`)

	b.AppendValues([]arrow.Date64{0, 0}, []bool{true, false})
	nulls := b.NewArray()
	defer nulls.Release()
	wantRowError(t, nulls, 1, "null", "")
}

func timestampArray(mem memory.Allocator, unit arrow.TimeUnit, tz string, vals []int64, valid []bool) arrow.Array {
	b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: unit, TimeZone: tz})
	defer b.Release()
	for i, v := range vals {
		if valid != nil && !valid[i] {
			b.AppendNull()
			continue
		}
		b.Append(arrow.Timestamp(v))
	}
	return b.NewArray()
}

func TestColumnTimestampNaive(t *testing.T) {
	units := []struct {
		unit   arrow.TimeUnit
		perSec int64
	}{{arrow.Second, 1}, {arrow.Millisecond, 1e3}, {arrow.Microsecond, 1e6}, {arrow.Nanosecond, 1e9}}
	for _, u := range units {
		t.Run(u.unit.String(), func(t *testing.T) {
			mem := newMem(t)
			sec := int64(86400)
			vals := []int64{
				0,
				sec*u.perSec - 1,
				sec * u.perSec,
				-1,
				-sec * u.perSec,
				-sec*u.perSec - 1,
				time.Date(2019, 3, 15, 23, 59, 59, 0, time.UTC).Unix() * u.perSec,
				time.Date(1900, 1, 1, 12, 0, 0, 0, time.UTC).Unix() * u.perSec,
			}
			want := []string{"1970-01-01", "1970-01-01", "1970-01-02", "1969-12-31", "1969-12-31", "1969-12-30", "2019-03-15", "1900-01-01"}
			// Nanoseconds only reach back to 1677.
			if u.unit != arrow.Nanosecond {
				vals = append(vals, time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC).Unix()*u.perSec)
				want = append(want, "0001-01-01")
			}
			for _, tz := range []string{"", "UTC"} {
				arr := timestampArray(mem, u.unit, tz, vals, nil)
				wantDays(t, arr, want...)
				arr.Release()
			}

			nulls := timestampArray(mem, u.unit, "", []int64{1, 2}, []bool{true, false})
			defer nulls.Release()
			wantRowError(t, nulls, 1, "null", "")
		})
	}
}

func TestColumnTimestampOutOfRange(t *testing.T) {
	mem := newMem(t)
	const first, last = math.MinInt32 * 86400, math.MaxInt32*86400 + 86399 // seconds
	for _, tc := range []struct {
		tz       string
		bad      []int64
		okFirst  int64 // earliest instant on day MinInt32 in tz
		okLast   int64 // latest instant on day MaxInt32 in tz
		okFormat [2]string
	}{
		{"", []int64{math.MaxInt64, math.MinInt64, last + 1, first - 1}, first, last, [2]string{Format(math.MinInt32), Format(math.MaxInt32)}},
		// New York: LMT -4:56:02 before 1883; day MaxInt32 is 5881580-07-11, in EDT (-4).
		{"America/New_York", []int64{math.MaxInt64, math.MinInt64, last + 4*3600 + 1}, first + 4*3600 + 56*60 + 2, last + 4*3600, [2]string{Format(math.MinInt32), Format(math.MaxInt32)}},
	} {
		for _, v := range tc.bad {
			arr := timestampArray(mem, arrow.Second, tc.tz, []int64{0, v}, nil)
			re := wantRowError(t, arr, 1, strconv.FormatInt(v, 10), "")
			if !strings.Contains(re.Err.Error(), "outside the date32 range") {
				t.Errorf("tz %q, %d: %v", tc.tz, v, re)
			}
			arr.Release()
		}
		// The conversion reaches date32's edges; Column then refuses
		// them as outside years 0001-9999.
		arr := timestampArray(mem, arrow.Second, tc.tz, []int64{tc.okFirst, tc.okLast}, nil)
		days := make([]int32, 2)
		if err := convert(arr, days, func(row int, value string, err error) error { return err }); err != nil {
			t.Fatalf("tz %q: convert: %v", tc.tz, err)
		}
		if Format(days[0]) != tc.okFormat[0] || Format(days[1]) != tc.okFormat[1] {
			t.Errorf("tz %q: got %s, %s, want %s, %s", tc.tz, Format(days[0]), Format(days[1]), tc.okFormat[0], tc.okFormat[1])
		}
		re := wantRowError(t, arr, 0, tc.okFormat[0], "")
		if !errors.Is(re, ErrRange) {
			t.Errorf("tz %q: %v, want ErrRange", tc.tz, re)
		}
		arr.Release()
	}
}

// TestColumnRange: every form's days must lie in years 0001-9999, the
// range tickets and SQL name; the first day outside is the error, with
// the day in the value.
func TestColumnRange(t *testing.T) {
	mem := newMem(t)
	date32 := func(days ...int32) arrow.Array {
		b := array.NewDate32Builder(mem)
		defer b.Release()
		for _, d := range days {
			b.Append(arrow.Date32(d))
		}
		return b.NewArray()
	}
	for _, tc := range []struct {
		name  string
		arr   arrow.Array
		row   int
		value string
	}{
		{"date32 one day before year 1", date32(0, MinDays-1), 1, "0000-12-31"},
		{"date32 one day after 9999", date32(MaxDays + 1), 0, "10000-01-01"},
		{"date32 min", date32(0, 5, math.MinInt32), 2, Format(math.MinInt32)},
		{"date32 max", date32(math.MaxInt32), 0, Format(math.MaxInt32)},
		{"timestamp year 10000", timestampArray(mem, arrow.Second, "", []int64{0, int64(MaxDays+1) * 86400}, nil), 1, "10000-01-01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.arr.Release()
			re := wantRowError(t, tc.arr, tc.row, tc.value, "")
			if !errors.Is(re, ErrRange) {
				t.Errorf("%v, want ErrRange", re)
			}
		})
	}
	edges := date32(MinDays, MaxDays)
	defer edges.Release()
	wantDays(t, edges, "0001-01-01", "9999-12-31")
	if !InRange(MinDays) || !InRange(MaxDays) || InRange(MinDays-1) || InRange(MaxDays+1) {
		t.Error("InRange disagrees with MinDays..MaxDays")
	}
}

func TestColumnTimestampZoned(t *testing.T) {
	mem := newMem(t)
	utc := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.Unix()
	}
	tests := []struct {
		tz   string
		unit arrow.TimeUnit
		at   string
		want string
	}{
		{"America/New_York", arrow.Second, "2019-01-01T03:00:00Z", "2018-12-31"},
		{"America/New_York", arrow.Second, "2019-01-01T05:00:00Z", "2019-01-01"},
		{"America/New_York", arrow.Millisecond, "2019-07-01T03:59:59Z", "2019-06-30"}, // EDT, UTC-4
		{"America/New_York", arrow.Microsecond, "2019-07-01T04:00:00Z", "2019-07-01"},
		{"America/New_York", arrow.Nanosecond, "1969-12-31T23:00:00Z", "1969-12-31"},
		{"America/New_York", arrow.Nanosecond, "1970-01-01T04:59:59Z", "1969-12-31"},
		{"Asia/Tokyo", arrow.Second, "1969-12-31T15:00:00Z", "1970-01-01"},
		{"Asia/Tokyo", arrow.Millisecond, "1969-12-31T14:59:59Z", "1969-12-31"},
		{"Asia/Kolkata", arrow.Second, "2019-01-01T18:30:00Z", "2019-01-02"},
		{"+05:30", arrow.Second, "2019-01-01T18:30:00Z", "2019-01-02"}, // Arrow's fixed-offset form
		{"-08:00", arrow.Second, "2019-01-01T07:59:59Z", "2018-12-31"},
		{"Etc/UTC", arrow.Second, "2019-01-01T00:00:00Z", "2019-01-01"},
		{"Pacific/Kiritimati", arrow.Second, "1994-12-31T10:00:00Z", "1995-01-01"}, // skipped 1994-12-31 (UTC-10 → UTC+14)
	}
	for _, tc := range tests {
		perSec := map[arrow.TimeUnit]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}[tc.unit]
		arr := timestampArray(mem, tc.unit, tc.tz, []int64{utc(tc.at) * perSec}, nil)
		t.Run(tc.tz+"/"+tc.at, func(t *testing.T) { wantDays(t, arr, tc.want) })
		arr.Release()
	}
}

// TestColumnTimestampZoneCache compares the cached-offset conversion with
// time.Time for many instants, in time order (the cache's best case) and
// shuffled (its worst), across DST transitions and historical zone changes.
func TestColumnTimestampZoneCache(t *testing.T) {
	mem := newMem(t)
	rng := rand.New(rand.NewPCG(1, 2))
	lo := time.Date(1850, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	vals := make([]int64, 20000)
	for i := range vals {
		vals[i] = lo + rng.Int64N(hi-lo)
	}
	// Instants either side of every hour boundary near a DST change.
	for h := int64(-48); h < 48; h++ {
		base := time.Date(2019, 3, 10, 7, 0, 0, 0, time.UTC).Unix() + h*3600
		vals = append(vals, base-1, base)
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	for _, tz := range []string{"America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu", "America/Sao_Paulo"} {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range [][]int64{vals, sorted} {
			arr := timestampArray(mem, arrow.Second, tz, in, nil)
			got, err := column(t, arr)
			arr.Release()
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range in {
				lt := time.Unix(v, 0).In(loc)
				if want := refDays(lt.Year(), lt.Month(), lt.Day()); got[i] != want {
					t.Fatalf("%s: %s: got %s, want %s", tz, time.Unix(v, 0).UTC(), Format(got[i]), Format(want))
				}
			}
		}
	}
}

func TestColumnTimestampUnknownZone(t *testing.T) {
	mem := newMem(t)
	arr := timestampArray(mem, arrow.Second, "Mars/Olympus_Mons", []int64{0}, nil)
	defer arr.Release()
	err := Column(arr, make([]int32, 1))
	var re *RowError
	if err == nil || errors.As(err, &re) || !strings.Contains(err.Error(), "Mars/Olympus_Mons") {
		t.Errorf("got %v, want a non-row error naming the zone", err)
	}
}

func TestColumnIntegers(t *testing.T) {
	mem := newMem(t)
	build := func(dt arrow.DataType, vals []int64, valid []bool) arrow.Array {
		b := array.NewBuilder(mem, dt)
		defer b.Release()
		for i, v := range vals {
			if valid != nil && !valid[i] {
				b.AppendNull()
				continue
			}
			switch b := b.(type) {
			case *array.Int16Builder:
				b.Append(int16(v))
			case *array.Int32Builder:
				b.Append(int32(v))
			case *array.Int64Builder:
				b.Append(v)
			case *array.Uint16Builder:
				b.Append(uint16(v))
			case *array.Uint32Builder:
				b.Append(uint32(v))
			case *array.Uint64Builder:
				b.Append(uint64(v))
			}
		}
		return b.NewArray()
	}

	for _, dt := range []arrow.DataType{arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Uint16} {
		arr := build(dt, []int64{2019, 2019, 1969, 9999, 1000}, nil)
		wantDays(t, arr, "2019-01-01", "2019-01-01", "1969-01-01", "9999-01-01", "1000-01-01")
		arr.Release()
		arr = build(dt, []int64{2019, 999}, nil)
		wantRowError(t, arr, 1, "999", `row 1: period "999": unrecognised period format; want YYYY, YYYY-MM, YYYYMM, YYYY-MM-DD, YYYYMMDD, YYYY-Qn or YYYY-Www`)
		arr.Release()
		arr = build(dt, []int64{2019, 12345}, nil)
		wantRowError(t, arr, 1, "12345", "")
		arr.Release()
	}

	for _, dt := range []arrow.DataType{arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64} {
		t.Run(dt.String(), func(t *testing.T) {
			arr := build(dt, []int64{2019, 201903, 201903, 20190315, 20200229, 201912, 2019, 19691231}, nil)
			defer arr.Release()
			wantDays(t, arr, "2019-01-01", "2019-03-01", "2019-03-01", "2019-03-15", "2020-02-29", "2019-12-01", "2019-01-01", "1969-12-31")

			bad := build(dt, []int64{201903, 201913, 201913}, nil)
			defer bad.Release()
			wantRowError(t, bad, 1, "201913", `row 1: period "201913": month 13 out of range 1-12`)

			bad = build(dt, []int64{20190229}, nil)
			defer bad.Release()
			wantRowError(t, bad, 0, "20190229", `row 0: period "20190229": day 29 out of range for 2019-02`)

			bad = build(dt, []int64{201903, 201903, 0}, []bool{true, true, false})
			defer bad.Release()
			wantRowError(t, bad, 2, "null", `row 2: period "null": null period`)

			bad = build(dt, []int64{2019, 2019, 123456789}, nil)
			defer bad.Release()
			wantRowError(t, bad, 2, "123456789", "")
		})
	}

	for _, dt := range []arrow.DataType{arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64} {
		arr := build(dt, []int64{-2019}, nil)
		wantRowError(t, arr, 0, "-2019", "")
		arr.Release()
	}
	arr := build(arrow.PrimitiveTypes.Uint64, []int64{-1}, nil)
	wantRowError(t, arr, 0, "18446744073709551615", "")
	arr.Release()
}

func dictArray(t *testing.T, mem memory.Allocator, indexType arrow.DataType, dict arrow.Array, idx []int64, valid []bool) *array.Dictionary {
	t.Helper()
	b := array.NewBuilder(mem, indexType)
	defer b.Release()
	for i, v := range idx {
		if valid != nil && !valid[i] {
			b.AppendNull()
			continue
		}
		switch b := b.(type) {
		case *array.Int8Builder:
			b.Append(int8(v))
		case *array.Uint8Builder:
			b.Append(uint8(v))
		case *array.Int16Builder:
			b.Append(int16(v))
		case *array.Uint16Builder:
			b.Append(uint16(v))
		case *array.Int32Builder:
			b.Append(int32(v))
		case *array.Uint32Builder:
			b.Append(uint32(v))
		case *array.Int64Builder:
			b.Append(v)
		case *array.Uint64Builder:
			b.Append(uint64(v))
		default:
			t.Fatalf("index type %s", indexType)
		}
	}
	indices := b.NewArray()
	defer indices.Release()
	return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: indexType, ValueType: dict.DataType()}, indices, dict)
}

func TestColumnDictionary(t *testing.T) {
	indexTypes := []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Uint16,
		arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Uint64,
	}
	for _, it := range indexTypes {
		t.Run(it.String(), func(t *testing.T) {
			mem := newMem(t)
			// Entry 1 is bad and entry 3 null, but no row refers to them
			// in the first array: that must not fail the column.
			dict := stringArray(mem, arrow.BinaryTypes.String, p("2019-01"), p("2019-13"), p("2019-Q2"), nil, p("2015-W01"))
			defer dict.Release()

			arr := dictArray(t, mem, it, dict, []int64{0, 2, 2, 4, 0}, nil)
			defer arr.Release()
			wantDays(t, arr, "2019-01-01", "2019-04-01", "2019-04-01", "2014-12-29", "2019-01-01")

			nullIdx := dictArray(t, mem, it, dict, []int64{0, 2, 0, 4}, []bool{true, true, false, true})
			defer nullIdx.Release()
			wantRowError(t, nullIdx, 2, "null", `row 2: period "null": null period`)

			badEntry := dictArray(t, mem, it, dict, []int64{0, 2, 4, 1, 0}, nil)
			defer badEntry.Release()
			wantRowError(t, badEntry, 3, "2019-13", `row 3: period "2019-13": month 13 out of range 1-12`)

			nullEntry := dictArray(t, mem, it, dict, []int64{0, 3}, nil)
			defer nullEntry.Release()
			re := wantRowError(t, nullEntry, 1, "null", "")
			if !errors.Is(re, ErrNull) {
				t.Errorf("null entry: %v does not wrap ErrNull", re)
			}

			// Slices keep row numbers relative to the slice.
			sl := array.NewSlice(badEntry, 2, 5)
			defer sl.Release()
			wantRowError(t, sl, 1, "2019-13", "")
			sl2 := array.NewSlice(nullIdx, 1, 3)
			defer sl2.Release()
			wantRowError(t, sl2, 1, "null", "")

			// A corrupt index is an error, not a panic.
			corrupt := dictArray(t, mem, it, dict, []int64{0, 5}, nil)
			defer corrupt.Release()
			re = wantRowError(t, corrupt, 1, "5", "")
			if !strings.Contains(re.Error(), "dictionary index 5 out of range for 5 entries") {
				t.Errorf("corrupt index: %v", re)
			}
		})
	}
}

func TestColumnDictionaryValueTypes(t *testing.T) {
	mem := newMem(t)

	ls := stringArray(mem, arrow.BinaryTypes.LargeString, p("2019"), p("2020-W53"))
	defer ls.Release()
	arr := dictArray(t, mem, arrow.PrimitiveTypes.Int32, ls, []int64{1, 0}, nil)
	wantDays(t, arr, "2020-12-28", "2019-01-01")
	arr.Release()

	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{201903, 20190315, 2019}, nil)
	ints := ib.NewArray()
	ib.Release()
	defer ints.Release()
	arr = dictArray(t, mem, arrow.PrimitiveTypes.Int8, ints, []int64{2, 1, 0}, nil)
	wantDays(t, arr, "2019-01-01", "2019-03-15", "2019-03-01")
	arr.Release()

	fb := array.NewFloat64Builder(mem)
	fb.Append(2019)
	floats := fb.NewArray()
	fb.Release()
	defer floats.Release()
	arr = dictArray(t, mem, arrow.PrimitiveTypes.Int8, floats, []int64{0}, nil)
	defer arr.Release()
	err := Column(arr, make([]int32, 1))
	var ute *UnsupportedTypeError
	if !errors.As(err, &ute) || !strings.Contains(err.Error(), "dictionary<values=float64, indices=int8") {
		t.Errorf("dictionary of float64: got %v, want UnsupportedTypeError naming the type", err)
	}
}

func TestColumnUnsupported(t *testing.T) {
	mem := newMem(t)
	for _, dt := range []arrow.DataType{
		arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Boolean, arrow.BinaryTypes.Binary,
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Uint8, arrow.FixedWidthTypes.Time32s,
	} {
		b := array.NewBuilder(mem, dt)
		b.AppendNull()
		arr := b.NewArray()
		b.Release()
		err := Column(arr, make([]int32, 1))
		arr.Release()
		var ute *UnsupportedTypeError
		if !errors.As(err, &ute) || !strings.Contains(err.Error(), "unsupported Arrow type "+dt.String()+";") {
			t.Errorf("%s: got %v", dt, err)
		}
	}
}

func TestColumnNullType(t *testing.T) {
	arr := array.NewNull(3)
	defer arr.Release()
	wantRowError(t, arr, 0, "null", "")
}

func TestColumnShortDst(t *testing.T) {
	mem := newMem(t)
	arr := stringArray(mem, arrow.BinaryTypes.String, p("2019"), p("2020"))
	defer arr.Release()
	if err := Column(arr, make([]int32, 1)); err == nil {
		t.Error("short dst accepted")
	}
	empty := stringArray(mem, arrow.BinaryTypes.String)
	defer empty.Release()
	if err := Column(empty, nil); err != nil {
		t.Errorf("empty array: %v", err)
	}
}

func TestColumnDictionaryAllocations(t *testing.T) {
	mem := memory.NewGoAllocator()
	arr := benchDictionary(mem, 1<<12)
	defer arr.Release()
	dst := make([]int32, arr.Len())
	allocs := testing.AllocsPerRun(20, func() {
		if err := Column(arr, dst); err != nil {
			panic(err)
		}
	})
	// The per-entry table; nothing per row.
	if allocs > 1 {
		t.Errorf("Column(dictionary) allocates %.0f times, want 1", allocs)
	}
}

// benchDictionary builds n rows of monthly periods over 30 years, the shape of
// a typical lake input, dictionary-encoded with int32 indices.
func benchDictionary(mem memory.Allocator, n int) *array.Dictionary {
	sb := array.NewStringBuilder(mem)
	for y := 1995; y < 2025; y++ {
		for m := 1; m <= 12; m++ {
			sb.Append(fmt.Sprintf("%04d-%02d", y, m))
		}
	}
	dict := sb.NewArray()
	sb.Release()
	defer dict.Release()
	ib := array.NewInt32Builder(mem)
	defer ib.Release()
	ib.Reserve(n)
	for i := range n {
		ib.UnsafeAppend(int32(i * 7919 % dict.Len()))
	}
	idx := ib.NewArray()
	defer idx.Release()
	return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, idx, dict)
}

func BenchmarkColumnDictionary(b *testing.B) {
	arr := benchDictionary(memory.NewGoAllocator(), 1<<20)
	defer arr.Release()
	dst := make([]int32, arr.Len())
	b.ReportAllocs()
	for b.Loop() {
		if err := Column(arr, dst); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*arr.Len()), "ns/row")
}

func BenchmarkColumnString(b *testing.B) {
	mem := memory.NewGoAllocator()
	dict := benchDictionary(mem, 1<<20)
	defer dict.Release()
	sb := array.NewStringBuilder(mem)
	strs := dict.Dictionary().(*array.String)
	for i := range dict.Len() {
		sb.Append(strs.Value(dict.GetValueIndex(i)))
	}
	arr := sb.NewArray()
	sb.Release()
	defer arr.Release()
	dst := make([]int32, arr.Len())
	b.ReportAllocs()
	for b.Loop() {
		if err := Column(arr, dst); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*arr.Len()), "ns/row")
}
