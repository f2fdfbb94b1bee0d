package sortwrite

import (
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func fields(kv ...any) []arrow.Field {
	var fs []arrow.Field
	for i := 0; i < len(kv); i += 2 {
		fs = append(fs, arrow.Field{Name: kv[i].(string), Type: kv[i+1].(arrow.DataType), Nullable: true})
	}
	return fs
}

var (
	utf8  = arrow.BinaryTypes.String
	f64   = arrow.PrimitiveTypes.Float64
	i64   = arrow.PrimitiveTypes.Int64
	date  = arrow.FixedWidthTypes.Date32
	dictS = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.LargeString}
)

func TestUnify(t *testing.T) {
	cases := []struct {
		name  string
		files []FileSchema
		want  string // "name:type:in0,in1;..." or an error substring prefixed with "!"
	}{
		{"same", []FileSchema{
			{"a", fields("s", utf8, "v", f64)}, {"b", fields("s", utf8, "v", f64)},
		}, "s:utf8:0,0;v:float64:1,1"},
		{"different order and missing column", []FileSchema{
			{"a", fields("s", utf8, "v", f64, "u", utf8)}, {"b", fields("v", f64, "s", utf8)},
		}, "s:utf8:0,1;v:float64:1,0;u:utf8:2,-1"},
		{"string flavours unify", []FileSchema{
			{"a", fields("s", utf8)}, {"b", fields("s", arrow.BinaryTypes.LargeString)}, {"c", fields("s", dictS)},
		}, "s:utf8:0,0,0"},
		{"null type takes the other", []FileSchema{
			{"a", fields("x", arrow.Null)}, {"b", fields("x", i64)},
		}, "x:int64:0,0"},
		{"period flavours may differ", []FileSchema{
			{"a", fields("period", utf8)}, {"b", fields("period", dictS)}, {"c", fields("period", arrow.BinaryTypes.LargeString)},
		}, "period:utf8:0,0,0"},
		{"period dates and timestamps mix", []FileSchema{
			{"a", fields("period", date)}, {"b", fields("period", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"})},
		}, "period:date32:0,0"},
		{"period integer widths mix", []FileSchema{
			{"a", fields("period", arrow.PrimitiveTypes.Int32)}, {"b", fields("period", i64)},
		}, "period:int32:0,0"},
		{"period text and integer conflict", []FileSchema{
			{"a", fields("period", utf8)}, {"b", fields("period", i64)},
		}, `!column "period" has type utf8 (text) in a but int64 (integer) in b`},
		{"period text and date mix", []FileSchema{
			{"a", fields("period", utf8)}, {"b", fields("period", date)},
		}, "period:utf8:0,0"},
		{"period date and integer conflict", []FileSchema{
			{"a", fields("period", date)}, {"b", fields("period", arrow.PrimitiveTypes.Uint32)},
		}, `!column "period" has type date32 (date) in a but uint32 (integer) in b`},
		{"period null takes any kind", []FileSchema{
			{"a", fields("period", arrow.Null)}, {"b", fields("period", i64)}, {"c", fields("period", arrow.Null)},
		}, "period:int64:0,0,0"},
		{"period kinds mix when asked", []FileSchema{
			{"a", fields("period", utf8)}, {"b", fields("period", i64)}, {"c", fields("period", date)},
		}, "mixed:period:utf8:0,0,0"},
		{"case collision in one file", []FileSchema{
			{"a", fields("value", f64, "Value", f64)},
		}, `!columns "value" and "Value" differ only in case (both in a)`},
		{"case collision across files", []FileSchema{
			{"a", fields("units", utf8)}, {"b", fields("UNITS", utf8)},
		}, `!columns "units" and "UNITS" differ only in case (in a and b)`},
		{"conflict names both files", []FileSchema{
			{"y=1/a.parquet", fields("v", f64)}, {"y=2/b.parquet", fields("v", i64)},
		}, `!column "v" has type float64 in y=1/a.parquet but int64 in y=2/b.parquet`},
		{"duplicate column", []FileSchema{
			{"a", fields("v", f64, "v", f64)},
		}, `!a: column "v" appears twice`},
		{"nested refused", []FileSchema{
			{"a", fields("l", arrow.ListOf(i64))},
		}, `!a: column "l": type list`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			unify, want := Unify, tc.want
			if w, ok := strings.CutPrefix(want, "mixed:"); ok {
				unify, tc.want = UnifyMixedPeriods, w
			}
			u, err := unify(tc.files, map[string]bool{"period": true})
			if strings.HasPrefix(tc.want, "!") {
				if err == nil || !strings.Contains(err.Error(), tc.want[1:]) {
					t.Fatalf("err = %v, want %q", err, tc.want[1:])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(u); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func describe(u *Unified) string {
	var parts []string
	for _, c := range u.Columns {
		var in []string
		for _, x := range c.In {
			in = append(in, strconv.Itoa(x))
		}
		parts = append(parts, c.Name+":"+c.Type.String()+":"+strings.Join(in, ","))
	}
	return strings.Join(parts, ";")
}

// FuzzUnify feeds schemas described by bytes (pairs of name and type
// selectors over a few files) and checks Unify's contract: no panic, every
// column's In has one entry per file, In points at a field of that name, and
// any success is reproducible.
func FuzzUnify(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 255, 1, 0, 2, 2})
	f.Add([]byte{0, 0, 0, 0, 255, 0, 1})
	f.Add([]byte{4, 5, 6, 7, 8, 9, 255, 255, 1, 1})
	types := []arrow.DataType{utf8, f64, i64, date, arrow.Null, dictS, arrow.ListOf(i64), arrow.FixedWidthTypes.Boolean, arrow.BinaryTypes.Binary}
	names := []string{"series_id", "period", "value", "units", "x"}
	f.Fuzz(func(t *testing.T, b []byte) {
		var files []FileSchema
		cur := FileSchema{Path: "f0"}
		for i := 0; i+1 < len(b) && len(files) < 8; i += 2 {
			if b[i] == 255 {
				files = append(files, cur)
				cur = FileSchema{Path: "f" + strconv.Itoa(len(files))}
				i--
				continue
			}
			cur.Fields = append(cur.Fields, arrow.Field{Name: names[int(b[i])%len(names)], Type: types[int(b[i+1])%len(types)]})
		}
		files = append(files, cur)
		u, err := Unify(files, map[string]bool{"period": true})
		if err != nil {
			return
		}
		for _, c := range u.Columns {
			if len(c.In) != len(files) {
				t.Fatalf("column %s: In has %d entries for %d files", c.Name, len(c.In), len(files))
			}
			for fi, x := range c.In {
				if x >= 0 && files[fi].Fields[x].Name != c.Name {
					t.Fatalf("column %s: In[%d]=%d names %s", c.Name, fi, x, files[fi].Fields[x].Name)
				}
			}
		}
		u2, err := Unify(files, map[string]bool{"period": true})
		if err != nil || describe(u2) != describe(u) {
			t.Fatalf("not reproducible: %v", err)
		}
	})
}
