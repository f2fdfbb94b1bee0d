package index

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/datafile"
)

// withColumn returns rec with column i replaced by a (and its field's
// type by a's), under index format version version: rec is a version-5
// index without tiers, whose lookup columns are dropped for earlier
// versions (and i counts columns without them).
func withColumn(rec arrow.RecordBatch, i int, a arrow.Array, version string) arrow.RecordBatch {
	fields := rec.Schema().Fields()
	cols := append([]arrow.Array(nil), rec.Columns()...)
	if version != Version {
		fields = append(fields[:NumFixed:NumFixed], fields[NumFixed+NumLookup:]...)
		cols = append(cols[:NumFixed:NumFixed], cols[NumFixed+NumLookup:]...)
	}
	if i >= 0 {
		fields[i].Type = a.DataType()
		cols[i] = a
	}
	md := arrow.NewMetadata([]string{datafile.MetaFile, datafile.MetaVersion}, []string{FileIndex, version})
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows())
}

// stringWithOffsets is a copy of a utf8 array with offset row set to v.
func stringWithOffsets(a *array.String, row int, v int32) arrow.Array {
	offs := append([]int32(nil), a.ValueOffsets()...)
	offs[row] = v
	d := a.Data()
	nd := array.NewData(a.DataType(), a.Len(), []*memory.Buffer{d.Buffers()[0], int32Buffer(offs), d.Buffers()[2]}, nil, a.NullN(), 0)
	defer nd.Release()
	return array.MakeFromData(nd)
}

// dictOf is a dictionary array of the given int8 indices (validity by
// valid, nil for all valid) over dict.
func dictOf(indices []int8, valid []bool, dict arrow.Array) arrow.Array {
	b := array.NewInt8Builder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(indices, valid)
	ind := b.NewArray()
	defer ind.Release()
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	return array.NewDictionaryArray(dt, ind, dict)
}

// TestNewValidates: New (O(1) checks) or the first use of the column
// (IDs, Attribute: the pass over its offsets or indices) refuses, with an error naming the column, every column arrow-go
// would slice out of bounds: utf8 offsets that decrease,
// start below 0, or run past the values; dictionary indices outside the
// dictionary (version 1), a dictionary whose own offsets are bad, and any
// dictionary in a version-2 index. A null row may hold any index.
func TestNewValidates(t *testing.T) {
	units := strs(memory.DefaultAllocator, "a", "bb", "<null>", "ccc", "a", "dd", "e", "ff")
	defer units.Release()
	x := writeIndex(t, []arrow.Field{{Name: "units", Type: arrow.BinaryTypes.String, Nullable: true}}, units)
	base := x.Record()
	ids := base.Column(ColumnSeriesID).(*array.String)
	attr := base.Column(firstAttr).(*array.String)
	n := base.NumRows()
	good := strs(memory.DefaultAllocator, "x", "y", "z")
	defer good.Release()

	for _, tc := range []struct {
		name    string
		col     int // -1: no change
		version string
		make    func() arrow.Array
		want    string // "" for accepted
	}{
		{"intact v2", -1, Version, nil, ""},
		{"id offset decreases", ColumnSeriesID, Version, func() arrow.Array { return stringWithOffsets(ids, 3, int32(ids.ValueOffset(2))-1) }, `"series_id": offset of row 3`},
		{"id first offset negative", ColumnSeriesID, Version, func() arrow.Array { return stringWithOffsets(ids, 0, -1) }, `"series_id": offset -1 of row 0 is negative`},
		{"attribute offset past the next", firstAttr, Version, func() arrow.Array { return stringWithOffsets(attr, 4, 1<<20) }, `"units": offset of row 5`},
		{"dictionary in a v2 index", firstAttr, Version, func() arrow.Array { return dictOf(make([]int8, n), nil, good) }, `"units" is dictionary-encoded`},
		{"v1 dictionary", NumFixed, VersionV1, func() arrow.Array { return dictOf([]int8{0, 1, 2, 0, 1, 2, 0, 1}, nil, good) }, ""},
		{"v1 index past the dictionary", NumFixed, VersionV1, func() arrow.Array { return dictOf([]int8{0, 1, 2, 3, 1, 2, 0, 1}, nil, good) }, `"units": row 3 has dictionary index 3, outside [0,3)`},
		{"v1 negative index", NumFixed, VersionV1, func() arrow.Array { return dictOf([]int8{0, 1, 2, 0, 1, 2, 0, -128}, nil, good) }, `row 7 has dictionary index -128`},
		{"v1 bad index under a null", NumFixed, VersionV1, func() arrow.Array {
			return dictOf([]int8{0, 1, 99, 0, 1, 2, 0, 1}, []bool{true, true, false, true, true, true, true, true}, good)
		}, ""},
		{"v1 dictionary with a bad offset", NumFixed, VersionV1, func() arrow.Array {
			bad := stringWithOffsets(good.(*array.String), 1, 5)
			defer bad.Release()
			return dictOf([]int8{0, 1, 2, 0, 1, 2, 0, 1}, nil, bad)
		}, `"units": dictionary: offset of row 2`},
		{"v1 dictionary of int64", NumFixed, VersionV1, func() arrow.Array {
			b := array.NewInt64Builder(memory.DefaultAllocator)
			defer b.Release()
			b.AppendValues([]int64{1, 2, 3}, nil)
			d := b.NewArray()
			defer d.Release()
			ib := array.NewInt8Builder(memory.DefaultAllocator)
			defer ib.Release()
			ib.AppendValues(make([]int8, n), nil)
			ind := ib.NewArray()
			defer ind.Release()
			return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.PrimitiveTypes.Int64}, ind, d)
		}, "dictionaries of utf8 only"},
		{"unknown version", -1, "6", nil, `version "6" is not supported`},
		{"intact v2 (no codes)", -1, VersionV2, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a arrow.Array
			if tc.make != nil {
				a = tc.make()
				defer a.Release()
			}
			rec := withColumn(base, tc.col, a, tc.version)
			defer rec.Release()
			x, err := New(rec)
			if err == nil && tc.col == ColumnSeriesID {
				// Checked on first use too; lookups bounds-check each probe.
				x.Lookup("S000003")
				x.Prefix("S")
				_ = x.Entry(3).SeriesID
				if _, err = x.IDs(); err != nil && !errors.Is(err, corrupt.ErrCorrupt) {
					t.Errorf("IDs: %v is not marked corrupt", err)
				}
			}
			if err == nil && tc.col >= NumFixed {
				// Attribute columns are checked on first use; until then
				// nothing of them is handed out.
				_, err = x.Attribute(tc.col - x.attrStart)
				if !errors.Is(err, corrupt.ErrCorrupt) && err != nil {
					t.Errorf("Attribute: %v is not marked corrupt", err)
				}
				if again, _ := x.Attribute(tc.col - x.attrStart); (again == nil) != (err != nil) {
					t.Errorf("a second Attribute disagrees with the first (%v)", err)
				}
				if _, cols := x.Attributes(); err != nil && cols[0].NullN() != cols[0].Len() {
					t.Errorf("Attributes hands out the damaged column (%d nulls of %d)", cols[0].NullN(), cols[0].Len())
				}
				if cerr := x.CheckAttributes(); (cerr != nil) != (err != nil) {
					t.Errorf("CheckAttributes = %v, Attribute = %v", cerr, err)
				}
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New = %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New = %v, want an error saying %s", err, tc.want)
			}
		})
	}
}

// BenchmarkCheckOffsets: the pass New makes over one utf8 column's
// offsets, at the 2.8M series of the seed profile.
func BenchmarkCheckOffsets(b *testing.B) {
	offs := make([]int32, 2_800_001)
	for i := range offs {
		offs[i] = int32(i * 10)
	}
	b.SetBytes(int64(4 * len(offs)))
	for b.Loop() {
		if err := checkOffsets(offs, 28_000_010, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func int32Buffer(v []int32) *memory.Buffer {
	return memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(v))
}

// TestCodeColumnChecks: a version-4 code column is refused, naming it,
// when its codes have a type the format does not write (at New), or on
// its first use when its values are not a JSON array of strings or a
// valid code lies outside them; a null row may hold any code. A tiered
// mark other than "true" is refused at New.
func TestCodeColumnChecks(t *testing.T) {
	units := strs(memory.DefaultAllocator, "a", "b", "<null>", "a", "b", "a")
	defer units.Release()
	x := writeIndex(t, []arrow.Field{{Name: "units", Type: arrow.BinaryTypes.String, Nullable: true}}, units)
	base := x.Record()
	if base.Schema().Field(firstAttr).Type.ID() != arrow.INT8 {
		t.Fatalf("units written as %s, want int8 codes", base.Schema().Field(firstAttr).Type)
	}
	int8s := func(v []int8, valid []bool) arrow.Array {
		b := array.NewInt8Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues(v, valid)
		return b.NewArray()
	}
	someNull := []bool{true, true, false, true, true, true}
	for _, tc := range []struct {
		name   string
		typ    arrow.DataType
		values string
		codes  func() arrow.Array
		schema map[string]string // extra schema metadata
		atNew  bool
		want   string
	}{
		{"intact", nil, `["a","b"]`, func() arrow.Array { return int8s([]int8{0, 1, 0, 0, 1, 0}, someNull) }, nil, false, ""},
		{"any code under a null", nil, `["a","b"]`, func() arrow.Array { return int8s([]int8{0, 1, 99, 0, 1, 0}, someNull) }, nil, false, ""},
		{"code past the values", nil, `["a","b"]`, func() arrow.Array { return int8s([]int8{0, 2, 0, 0, 1, 0}, someNull) }, nil, false, `"units": row 1 has dictionary index 2, outside [0,2)`},
		{"negative code", nil, `["a","b"]`, func() arrow.Array { return int8s([]int8{0, 1, 0, -1, 1, 0}, someNull) }, nil, false, `row 3 has dictionary index -1`},
		{"values not JSON", nil, `["a",`, func() arrow.Array { return int8s([]int8{0, 1, 0, 0, 1, 0}, someNull) }, nil, false, `"units": servingsnap.dictionary metadata: not a JSON array of strings`},
		{"values not strings", nil, `[1,2]`, func() arrow.Array { return int8s([]int8{0, 1, 0, 0, 1, 0}, someNull) }, nil, false, `not a JSON array of strings`},
		{"int32 codes", arrow.PrimitiveTypes.Int32, `["a","b"]`, func() arrow.Array {
			b := array.NewInt32Builder(memory.DefaultAllocator)
			defer b.Release()
			b.AppendValues([]int32{0, 1, 0, 0, 1, 0}, someNull)
			return b.NewArray()
		}, nil, true, `"units" has servingsnap.dictionary metadata but type int32; codes are int8 or int16`},
		{"tiered mark not true", nil, `["a","b"]`, func() arrow.Array { return int8s([]int8{0, 1, 0, 0, 1, 0}, someNull) }, map[string]string{MetaTiered: "yes"}, true, `servingsnap.tiered="yes"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			codes := tc.codes()
			defer codes.Release()
			fields := base.Schema().Fields()
			fields[firstAttr] = arrow.Field{Name: "units", Type: codes.DataType(), Nullable: true,
				Metadata: arrow.NewMetadata([]string{MetaDictionary}, []string{tc.values})}
			keys, vals := []string{datafile.MetaFile, datafile.MetaVersion}, []string{FileIndex, Version}
			for k, v := range tc.schema {
				keys, vals = append(keys, k), append(vals, v)
			}
			md := arrow.NewMetadata(keys, vals)
			cols := append([]arrow.Array(nil), base.Columns()...)
			cols[firstAttr] = codes
			rec := array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, base.NumRows())
			defer rec.Release()
			x, err := New(rec)
			if (err != nil) != tc.atNew {
				t.Fatalf("New = %v, want an error there: %v", err, tc.atNew)
			}
			if err == nil {
				var a arrow.Array
				a, err = x.Attribute(0)
				if err != nil && !errors.Is(err, corrupt.ErrCorrupt) {
					t.Errorf("Attribute: %v is not marked corrupt", err)
				}
				if err == nil && a.(*array.Dictionary).Dictionary().Len() != 2 {
					t.Errorf("dictionary of %d values, want 2", a.(*array.Dictionary).Dictionary().Len())
				}
				if _, cols := x.Attributes(); err != nil && cols[0].NullN() != cols[0].Len() {
					t.Errorf("Attributes hands out the damaged column (%d nulls of %d)", cols[0].NullN(), cols[0].Len())
				}
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
