package index

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
)

// TestMain makes every column buffer of the package's tests a mapped
// file (pkg/mapbuf), as an index of millions of series has them: the
// writer's tests then prove the index it writes from mapped columns.
func TestMain(m *testing.M) {
	spillHeapMax = 0
	os.Exit(m.Run())
}

// tiled returns locations for series with the given row counts, cut into
// batches of at most batchRows rows at series boundaries.
func tiled(counts []int64, batchRows int64) []datafile.Location {
	var locs []datafile.Location
	var row, inBatch int64
	var b uint32
	for i, n := range counts {
		if inBatch > 0 && inBatch+n > batchRows {
			b, inBatch = b+1, 0
		}
		locs = append(locs, datafile.Location{Batch: b, BatchOffset: uint32(inBatch), RowOffset: row, RowCount: n,
			FirstPeriod: int32(100 * i), LastPeriod: int32(100*i + int(n) - 1)})
		row, inBatch = row+n, inBatch+n
	}
	return locs
}

func strs(mem memory.Allocator, vals ...string) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	for _, v := range vals {
		if v == "<null>" {
			b.AppendNull()
		} else {
			b.Append(v)
		}
	}
	return b.NewArray()
}

// readIndex maps the index file at path (zero-copy, as a snapshot does:
// the file holds no dictionaries) and wraps it.
func readIndex(t testing.TB, path string) *Reader {
	t.Helper()
	m, err := arrowfile.Map(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	rec, err := m.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	x, err := New(rec)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestWriterRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)

	ids := []string{"A.1", "A.2", "B", "C.x", "C.y", "D"}
	n := len(ids)
	units := strs(mem, "$/bbl", "$/bbl", "<null>", "$/MMBtu", "$/bbl", "$/bbl") // few distinct: codes
	defer units.Release()
	names := strs(mem, "alpha one", "alpha two", "<null>", "gamma", "delta", "epsilon") // distinct: plain
	defer names.Release()
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{7, -1, 0, 3, 0, 42}, []bool{true, true, false, true, true, true})
	codes := ib.NewArray() // a numeric attribute
	ib.Release()
	defer codes.Release()
	fb := array.NewFloat64Builder(mem)
	fb.AppendValues([]float64{1.5, 0, 2.5, -4, 0, 8}, []bool{true, false, true, true, false, true})
	latest := fb.NewArray()
	fb.Release()
	defer latest.Release()
	hasLatest := []bool{true, false, true, true, false, true}

	attrs := []arrow.Field{
		{Name: "units", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "code", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}
	path := filepath.Join(t.TempDir(), "index.arrow")
	w, err := NewWriter(path, arrow.PrimitiveTypes.Float64, attrs)
	if err != nil {
		t.Fatal(err)
	}
	locs := tiled([]int64{3, 1, 2, 5, 1, 4}, 6)
	s := Series{Attrs: make([]Cell, len(attrs))}
	for i := range n {
		s.ID, s.Location = ids[i], locs[i]
		s.HasLatest, s.LatestPeriod = hasLatest[i], locs[i].LastPeriod
		s.LatestValue = Cell{latest, i}
		s.Attrs[0], s.Attrs[1], s.Attrs[2] = Cell{units, i}, Cell{names, i}, Cell{codes, i}
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	info, schema, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if info.Rows != int64(n) || info.Batches != 1 {
		t.Errorf("info %+v, want %d rows in one batch", info, n)
	}

	x := readIndex(t, path)
	if !x.Record().Schema().Equal(schema) {
		t.Errorf("file schema %s, Close returned %s", x.Record().Schema(), schema)
	}
	if x.Len() != n {
		t.Fatalf("%d series, want %d", x.Len(), n)
	}
	for i, id := range ids {
		if c, ok := x.Lookup(id); !ok || c != i {
			t.Errorf("Lookup(%q) = %d, %v", id, c, ok)
		}
		e, l := x.Entry(i), locs[i]
		want := Entry{Code: i, SeriesID: id, RowOffset: l.RowOffset, RowCount: l.RowCount, Batch: int(l.Batch),
			BatchOffset: int(l.BatchOffset), FirstPeriod: l.FirstPeriod, LastPeriod: l.LastPeriod}
		if e != want {
			t.Errorf("Entry(%d) = %+v, want %+v", i, e, want)
		}
		p, ok := x.Latest(i)
		if ok != hasLatest[i] || (ok && p != l.LastPeriod) {
			t.Errorf("Latest(%d) = %d, %v; want %d, %v", i, p, ok, l.LastPeriod, hasLatest[i])
		}
		lv := x.LatestValues()
		if lv.IsValid(i) != hasLatest[i] || (hasLatest[i] && lv.(*array.Float64).Value(i) != latest.(*array.Float64).Value(i)) {
			t.Errorf("latest value %d = %v, want %v", i, lv.GetOneForMarshal(i), latest.GetOneForMarshal(i))
		}
	}

	fields, cols := x.Attributes()
	if len(fields) != 3 {
		t.Fatalf("%d attributes, want 3", len(fields))
	}
	wantTypes := []string{"dictionary<values=utf8, indices=int8, ordered=false>", "utf8", "int32"}
	for i, f := range fields {
		if f.Name != attrs[i].Name || f.Type.String() != wantTypes[i] {
			t.Errorf("attribute %d is %s %s, want %s %s", i, f.Name, f.Type, attrs[i].Name, wantTypes[i])
		}
	}
	for k, want := range []arrow.Array{units, names, codes} {
		for i := range n {
			if g, w := cols[k].GetOneForMarshal(i), want.GetOneForMarshal(i); fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("attribute %s row %d = %v, want %v", fields[k].Name, i, g, w)
			}
		}
	}
	if f := schema.Field(firstAttr); f.Type.ID() != arrow.INT8 || f.Metadata.FindKey(MetaDictionary) < 0 {
		t.Errorf("file column units is %s %v, want int8 codes with %s", f.Type, f.Metadata, MetaDictionary)
	}
	if x.Version() != Version || schema.Metadata().FindKey(datafile.MetaVersion) < 0 {
		t.Errorf("index version %q, want %q", x.Version(), Version)
	}
}

// TestWriterCodes: version 4 stores a string attribute as int8 or int16
// codes (values in the field's metadata) when it has at most MaxCodes
// distinct values, all valid UTF-8, and that makes it smaller, else as
// plain utf8; never as an Arrow dictionary, whether or not the caller
// declares the field and feeds the cells as one (a version-1 base index
// being compacted): the file must map zero-copy. Read back, the column
// has the values written.
func TestWriterCodes(t *testing.T) {
	repeat := func(distinct, times int) []string {
		var v []string
		for i := range distinct {
			for range times {
				v = append(v, fmt.Sprintf("value-%05d", i))
			}
		}
		return v
	}
	for _, tc := range []struct {
		name string
		vals []string
		dict bool   // declare the field and feed the cells as a dictionary
		want string // the file's column type
	}{
		{"one series", []string{"same"}, false, "utf8"},
		{"two equal", []string{"x", "x"}, false, "int8"},
		{"nulls", []string{"<null>", "<null>", "x"}, false, "int8"},
		{"all null", []string{"<null>", "<null>", "<null>"}, false, "int8"},
		{"128 distinct", repeat(128, 10), false, "int8"},
		{"129 distinct", repeat(129, 10), false, "int16"},
		{"every value distinct", repeat(50, 1), false, "utf8"},
		{"more than MaxCodes distinct", repeat(MaxCodes+1, 3), false, "utf8"},
		{"invalid UTF-8", []string{"a\xff", "a\xff", "a\xff"}, false, "utf8"},
		{"needs JSON escapes", slices.Repeat([]string{"<\"q\">\n", "\u00e9&"}, 8), false, "int8"},
		{"from a dictionary", repeat(3, 10), true, "int8"},
		{"from a dictionary with nulls", []string{"<null>", "b", "a", "b"}, true, "int8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := strs(memory.DefaultAllocator, tc.vals...)
			defer vals.Release()
			field := arrow.Field{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}
			col := vals
			if tc.dict {
				dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
				field.Type = dt
				b := array.NewDictionaryBuilder(memory.DefaultAllocator, dt).(*array.BinaryDictionaryBuilder)
				defer b.Release()
				for _, v := range tc.vals {
					if v == "<null>" {
						b.AppendNull()
					} else if err := b.AppendString(v); err != nil {
						t.Fatal(err)
					}
				}
				col = b.NewArray()
				defer col.Release()
			}
			x := writeIndex(t, []arrow.Field{field}, col)
			for i, f := range x.Record().Schema().Fields() {
				if f.Type.ID() == arrow.DICTIONARY {
					t.Fatalf("column %d (%s) is %s", i, f.Name, f.Type)
				}
			}
			file := x.Record().Schema().Field(firstAttr)
			if got := file.Type.String(); got != tc.want || (got != "utf8") != (file.Metadata.FindKey(MetaDictionary) >= 0) {
				t.Fatalf("file column %s with metadata %v, want %s", got, file.Metadata, tc.want)
			}
			f, c := x.Attributes()
			if tc.want != "utf8" && (f[0].Type.ID() != arrow.DICTIONARY || c[0].DataType().ID() != arrow.DICTIONARY) {
				t.Fatalf("attribute type %s (field %s), want a dictionary", c[0].DataType(), f[0].Type)
			}
			if err := x.CheckAttributes(); err != nil {
				t.Fatal(err)
			}
			for i, v := range tc.vals {
				g := c[0].GetOneForMarshal(i)
				if (v == "<null>") != (g == nil) || (g != nil && g.(string) != v) {
					t.Fatalf("row %d = %v, want %q", i, g, v)
				}
			}
		})
	}
}

// writeIndex writes one series per row of the attribute arrays, with
// generated ids and locations, and reads the index back.
func writeIndex(t *testing.T, attrs []arrow.Field, cols ...arrow.Array) *Reader {
	t.Helper()
	ids := make([]string, cols[0].Len())
	for i := range ids {
		ids[i] = fmt.Sprintf("S%06d", i)
	}
	return writeIndexFields(t, attrs, ids, cols...)
}

// writeIndexIDs writes an index of the given ids (sorted), one row each,
// with cols as attributes (or one utf8 attribute "units" when attrs is
// nil), and reads it back.
func writeIndexIDs(t testing.TB, ids []string, cols ...arrow.Array) *Reader {
	t.Helper()
	return writeIndexFields(t, nil, ids, cols...)
}

func writeIndexFields(t testing.TB, attrs []arrow.Field, ids []string, cols ...arrow.Array) *Reader {
	t.Helper()
	if attrs == nil {
		attrs = []arrow.Field{{Name: "units", Type: arrow.BinaryTypes.String, Nullable: true}}
	}
	path := filepath.Join(t.TempDir(), "index.arrow")
	w, err := NewWriter(path, arrow.PrimitiveTypes.Float64, attrs)
	if err != nil {
		t.Fatal(err)
	}
	n := len(ids)
	counts := make([]int64, n)
	for i := range counts {
		counts[i] = 1
	}
	locs := tiled(counts, 100)
	s := Series{Attrs: make([]Cell, len(cols))}
	for i := range n {
		s.ID, s.Location = ids[i], locs[i]
		for k, c := range cols {
			s.Attrs[k] = Cell{c, i}
		}
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return readIndex(t, path)
}

// TestWriterCells: cells may come from dictionary-encoded arrays (a base
// index), from arrays of the null type (a column a delta lacks), as nil,
// and from sliced arrays.
func TestWriterCells(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	db := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}).(*array.BinaryDictionaryBuilder)
	for _, v := range []string{"kWh", "", "MWh", "kWh"} {
		if v == "" {
			db.AppendNull()
		} else {
			db.AppendString(v)
		}
	}
	dict := db.NewArray()
	db.Release()
	defer dict.Release()
	all := strs(mem, "skip", "p", "<null>", "q", "r")
	defer all.Release()
	sliced := array.NewSlice(all, 1, 5)
	defer sliced.Release()
	null := array.NewNull(4)
	defer null.Release()

	path := filepath.Join(t.TempDir(), "index.arrow")
	attrs := []arrow.Field{
		{Name: "unit", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}
	w, err := NewWriter(path, arrow.PrimitiveTypes.Float64, attrs)
	if err != nil {
		t.Fatal(err)
	}
	locs := tiled([]int64{1, 1, 1, 1, 1}, 10)
	s := Series{Attrs: make([]Cell, 3)}
	for i := range 5 {
		s.ID, s.Location = fmt.Sprint(i), locs[i]
		s.Attrs[0], s.Attrs[1], s.Attrs[2] = Cell{dict, i}, Cell{sliced, i}, Cell{null, i}
		if i == 4 {
			s.Attrs[0], s.Attrs[1], s.Attrs[2] = Cell{}, Cell{}, Cell{}
		}
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, cols := readIndex(t, path).Attributes()
	want := [][]any{{"kWh", nil, "MWh", "kWh", nil}, {"p", nil, "q", "r", nil}, {nil, nil, nil, nil, nil}}
	for k := range want {
		for i, v := range want[k] {
			if g := cols[k].GetOneForMarshal(i); fmt.Sprint(g) != fmt.Sprint(v) {
				t.Errorf("attribute %s row %d = %v, want %v", attrs[k].Name, i, g, v)
			}
		}
	}
}

// TestWriterChecks: an Add that would make the index disagree with the
// data file or break the id order fails, names the series, and leaves
// the writer unusable.
func TestWriterChecks(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	fb := array.NewFloat64Builder(mem)
	fb.AppendValues([]float64{1, 0}, []bool{true, false})
	vals := fb.NewArray()
	fb.Release()
	defer vals.Release()
	ints := array.NewInt64Builder(mem)
	ints.Append(1)
	wrongType := ints.NewArray()
	ints.Release()
	defer wrongType.Release()

	two := tiled([]int64{2, 3}, 10)
	for _, tc := range []struct {
		name string
		edit func(s *Series) // applied to the second series
		want string
	}{
		{"ids out of order", func(s *Series) { s.ID = "A" }, `series id "A" is not after "M" (series 0)`},
		{"ids repeated", func(s *Series) { s.ID = "M" }, `series id "M" is not after "M" (series 0)`},
		{"a gap in the rows", func(s *Series) { s.RowOffset, s.BatchOffset = 3, 3 }, "starts at row 3, the previous series ends at row 2"},
		{"wrong batch offset", func(s *Series) { s.BatchOffset = 1 }, "at batch 0 offset 1, the previous series is at batch 0 offset 0 with 2 rows"},
		{"a batch skipped", func(s *Series) { s.Batch, s.BatchOffset = 2, 0 }, "at batch 2 offset 0"},
		{"no rows", func(s *Series) { s.RowCount = 0 }, "row count 0"},
		{"periods reversed", func(s *Series) { s.FirstPeriod, s.LastPeriod = 5, 4 }, "first period 5 after last period 4"},
		{"latest outside the periods", func(s *Series) { s.HasLatest, s.LatestPeriod = true, 1000 }, "latest period 1000 outside"},
		{"latest value null", func(s *Series) { s.HasLatest, s.LatestPeriod, s.LatestValue = true, s.LastPeriod, Cell{vals, 1} }, "latest value is null"},
		{"latest value of another type", func(s *Series) { s.HasLatest, s.LatestPeriod, s.LatestValue = true, s.LastPeriod, Cell{wrongType, 0} }, "latest value: a int64 array for a float64 column"},
		{"latest row out of range", func(s *Series) { s.HasLatest, s.LatestPeriod, s.LatestValue = true, s.LastPeriod, Cell{vals, 2} }, "latest value: row 2 of a 2-row array"},
		{"too few attributes", func(s *Series) { s.Attrs = nil }, "0 attribute values for 1 attribute columns"},
		{"attribute of another type", func(s *Series) { s.Attrs = []Cell{{vals, 0}} }, `attribute "a": a float64 array for a utf8 column`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "index.arrow")
			w, err := NewWriter(path, arrow.PrimitiveTypes.Float64, []arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}})
			if err != nil {
				t.Fatal(err)
			}
			s := Series{ID: "M", Location: two[0], HasLatest: true, LatestPeriod: two[0].LastPeriod, LatestValue: Cell{vals, 0}, Attrs: []Cell{{}}}
			if err := w.Add(&s); err != nil {
				t.Fatal(err)
			}
			s = Series{ID: "N", Location: two[1], Attrs: []Cell{{}}}
			tc.edit(&s)
			err = w.Add(&s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("series 1 (%q)", s.ID)) {
				t.Errorf("error %q does not name the series", err)
			}
			s = Series{ID: "Z", Location: two[1], Attrs: []Cell{{}}}
			if err := w.Add(&s); err == nil {
				t.Error("an Add after a failed one succeeded")
			}
			if _, _, err := w.Close(); err == nil {
				t.Error("Close after a failed Add succeeded")
			}
		})
	}
}

func TestWriterFirstSeries(t *testing.T) {
	w, err := NewWriter(filepath.Join(t.TempDir(), "index.arrow"), arrow.PrimitiveTypes.Float64, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := Series{ID: "A", Location: datafile.Location{RowOffset: 5, RowCount: 1}}
	if err := w.Add(&s); err == nil || !strings.Contains(err.Error(), "want row 0 of batch 0") {
		t.Errorf("error %v, want one about row 0", err)
	}
}

func TestWriterEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.arrow")
	w, err := NewWriter(path, arrow.PrimitiveTypes.Float64, []arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if x := readIndex(t, path); x.Len() != 0 {
		t.Errorf("%d series, want 0", x.Len())
	}
}

func TestWriterRefusesTypes(t *testing.T) {
	list := arrow.ListOf(arrow.PrimitiveTypes.Int32)
	if _, err := NewWriter("x", list, nil); err == nil {
		t.Error("a list value type was accepted")
	}
	if _, err := NewWriter("x", arrow.PrimitiveTypes.Float64, []arrow.Field{{Name: "l", Type: list}}); err == nil || !strings.Contains(err.Error(), `attribute "l"`) {
		t.Errorf("a list attribute: %v", err)
	}
}

// TestWriterAddAllocs: Add allocates nothing beyond growing its buffers,
// so an index of millions of series costs no garbage per series.
func TestWriterAddAllocs(t *testing.T) {
	w, vals, attrs := benchWriter(t, 1<<16)
	s := Series{Attrs: make([]Cell, len(attrs))}
	i := 0
	allocs := testing.AllocsPerRun(50000, func() {
		fillSeries(&s, i, vals, attrs)
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Add, want 0", allocs)
	}
}

// BenchmarkWriter: 100,000 series with a latest value and four string
// attributes (the benchmark lake's shape): the Adds alone, and the Adds
// followed by Close (dictionary decisions, the write and its fsync).
func BenchmarkWriter(b *testing.B) {
	const n = 100000
	_, vals, attrs := benchWriter(b, n)
	for _, close := range []bool{false, true} {
		name := "add"
		if close {
			name = "add+close"
		}
		b.Run(name, func(b *testing.B) {
			var took time.Duration
			for b.Loop() {
				w, err := NewWriter(filepath.Join(b.TempDir(), "index.arrow"), arrow.PrimitiveTypes.Float64, benchFields(len(attrs)))
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				w.Reserve(n)
				s := Series{Attrs: make([]Cell, len(attrs))}
				for i := range n {
					fillSeries(&s, i, vals, attrs)
					if err := w.Add(&s); err != nil {
						b.Fatal(err)
					}
				}
				if close {
					if _, _, err := w.Close(); err != nil {
						b.Fatal(err)
					}
				}
				took += time.Since(start)
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N)/n, "ns/series")
		})
	}
}

func benchWriter(tb testing.TB, n int) (*Writer, arrow.Array, []arrow.Array) {
	fb := array.NewFloat64Builder(memory.DefaultAllocator)
	sbs := make([]*array.StringBuilder, 4)
	for k := range sbs {
		sbs[k] = array.NewStringBuilder(memory.DefaultAllocator)
	}
	for i := range n {
		fb.Append(float64(i))
		sbs[0].Append([]string{"$/bbl", "$/MMBtu", "cents/kWh"}[i%3])
		sbs[1].Append([]string{"M", "A", "Q", "W", "D"}[i%5])
		sbs[2].Append(fmt.Sprintf("Series number %d, a descriptive name", i))
		sbs[3].Append(fmt.Sprintf("category-%d", i%300))
	}
	vals := fb.NewArray()
	fb.Release()
	var attrs []arrow.Array
	for _, sb := range sbs {
		attrs = append(attrs, sb.NewArray())
		sb.Release()
	}
	w, err := NewWriter(filepath.Join(tb.TempDir(), "index.arrow"), arrow.PrimitiveTypes.Float64, benchFields(len(attrs)))
	if err != nil {
		tb.Fatal(err)
	}
	return w, vals, attrs
}

func benchFields(n int) []arrow.Field {
	var fields []arrow.Field
	for k := range n {
		fields = append(fields, arrow.Field{Name: fmt.Sprint("a", k), Type: arrow.BinaryTypes.String, Nullable: true})
	}
	return fields
}

// benchIDs are sorted series ids, made before anything is measured.
var benchIDs = func() []string {
	ids := make([]string, 100000)
	for i := range ids {
		ids[i] = fmt.Sprintf("SERIES.%08d.M", i)
	}
	return ids
}()

func fillSeries(s *Series, i int, vals arrow.Array, attrs []arrow.Array) {
	s.ID = benchIDs[i]
	s.Location = datafile.Location{Batch: uint32(i / 1000), BatchOffset: uint32(i%1000) * 150, RowOffset: int64(i) * 150, RowCount: 150, FirstPeriod: 0, LastPeriod: 149}
	s.HasLatest, s.LatestPeriod, s.LatestValue = true, 149, Cell{vals, i % vals.Len()}
	for k, a := range attrs {
		s.Attrs[k] = Cell{a, i % a.Len()}
	}
}

// TestLocation: Location is Entry's location.
func TestLocation(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	units := strs(mem, "a", "b", "c", "d")
	defer units.Release()
	x := writeIndex(t, []arrow.Field{{Name: "units", Type: arrow.BinaryTypes.String, Nullable: true}}, units)
	for i := range x.Len() {
		e := x.Entry(i)
		if b, off, n := x.Location(i); b != e.Batch || off != e.BatchOffset || n != e.RowCount {
			t.Errorf("Location(%d) = %d, %d, %d; Entry says %d, %d, %d", i, b, off, n, e.Batch, e.BatchOffset, e.RowCount)
		}
	}
}

// TestWriterCodeBudget: the values of all code columns together stay
// within MaxCodeValueBytes (what a reader copies at open): of two columns
// whose values would pass it together, the first is written as codes and
// the second stays plain.
func TestWriterCodeBudget(t *testing.T) {
	var vals []string
	for range 3 {
		for i := range 20_000 {
			vals = append(vals, fmt.Sprintf("value-%05d", i))
		}
	}
	a := strs(memory.DefaultAllocator, vals...)
	defer a.Release()
	fields := []arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.BinaryTypes.String}}
	x := writeIndex(t, fields, a, a)
	sc := x.Record().Schema()
	if got := sc.Field(firstAttr).Type; got.ID() != arrow.INT16 {
		t.Errorf("first column written as %s, want int16 codes", got)
	}
	if got := sc.Field(firstAttr + 1).Type; got.ID() != arrow.STRING {
		t.Errorf("second column written as %s, want utf8: its values would pass MaxCodeValueBytes", got)
	}
	if m := len(sc.Field(firstAttr).Metadata.Values()[0]); m > MaxCodeValueBytes || 2*m <= MaxCodeValueBytes {
		t.Fatalf("the first column's values are %d bytes; the test wants two to pass %d and one not", m, MaxCodeValueBytes)
	}
	_, cols := x.Attributes()
	for _, i := range []int{0, 59_999} {
		if cols[0].GetOneForMarshal(i) != vals[i] || cols[1].GetOneForMarshal(i) != vals[i] {
			t.Errorf("row %d = %v, %v; want %s", i, cols[0].GetOneForMarshal(i), cols[1].GetOneForMarshal(i), vals[i])
		}
	}
}

// TestWriterIgnoresCallersCodeMetadata: a caller's field that carries the
// servingsnap.dictionary key (an input's own metadata) does not make a
// plain column look like a code column: the writer decides alone.
func TestWriterIgnoresCallersCodeMetadata(t *testing.T) {
	a := strs(memory.DefaultAllocator, "alpha", "beta", "gamma")
	defer a.Release()
	md := arrow.NewMetadata([]string{MetaDictionary, "other"}, []string{`["x"]`, "kept"})
	x := writeIndex(t, []arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String, Metadata: md}}, a)
	f := x.Record().Schema().Field(firstAttr)
	if f.Type.ID() != arrow.STRING || f.Metadata.FindKey(MetaDictionary) >= 0 || f.Metadata.FindKey("other") < 0 {
		t.Fatalf("column written as %s with metadata %v, want utf8 with only the caller's other key", f.Type, f.Metadata)
	}
	if _, c := x.Attributes(); c[0].GetOneForMarshal(2) != "gamma" {
		t.Fatalf("row 2 = %v", c[0].GetOneForMarshal(2))
	}
}
