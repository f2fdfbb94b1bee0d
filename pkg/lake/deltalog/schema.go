package deltalog

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Column is one top-level column of the table schema.
type Column struct {
	Name     string // logical (display) name
	Type     string // Delta primitive type name: string, long, decimal(10,2), ...
	Nullable bool
	// Physical is the column's name in data files: Name, or the
	// delta.columnMapping.physicalName in name and id mode.
	Physical string
	// FieldID is delta.columnMapping.id (0: none); in id mode data files
	// are matched by Parquet field id.
	FieldID int
	// Arrow is the Arrow type the column is read as.
	Arrow arrow.DataType
}

// Column mapping modes (delta.columnMapping.mode).
const (
	MappingNone = "none"
	MappingName = "name"
	MappingID   = "id"
)

type schemaJSON struct {
	Type   string      `json:"type"`
	Fields []fieldJSON `json:"fields"`
}

type fieldJSON struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
	Metadata map[string]any  `json:"metadata"`
}

// ParseSchema decodes a metaData schemaString. Nested columns (struct,
// array, map, variant) are refused: a serving snapshot holds flat columns.
func ParseSchema(s string, mode string) ([]Column, error) {
	var sj schemaJSON
	if err := json.Unmarshal([]byte(s), &sj); err != nil {
		return nil, fmt.Errorf("schemaString is not a JSON schema: %w", err)
	}
	if sj.Type != "struct" {
		return nil, fmt.Errorf("schemaString has type %q, want struct", sj.Type)
	}
	var out []Column
	seen := map[string]bool{}
	for _, f := range sj.Fields {
		var typ string
		if err := json.Unmarshal(f.Type, &typ); err != nil {
			return nil, fmt.Errorf("column %q has a nested type (%s); only flat columns can be built", f.Name, strings.Join(strings.Fields(string(f.Type)), " "))
		}
		if f.Name == "" || seen[strings.ToLower(f.Name)] {
			return nil, fmt.Errorf("column name %q is empty or repeated", f.Name)
		}
		seen[strings.ToLower(f.Name)] = true
		at, err := arrowType(typ)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		c := Column{Name: f.Name, Type: typ, Nullable: f.Nullable, Physical: f.Name, Arrow: at}
		if mode == MappingName || mode == MappingID {
			pn, _ := f.Metadata["delta.columnMapping.physicalName"].(string)
			id, _ := f.Metadata["delta.columnMapping.id"].(float64)
			if pn == "" || id <= 0 || id != math.Trunc(id) || id > math.MaxInt32 {
				return nil, fmt.Errorf("column %q: column mapping mode %s but no valid physicalName and id in its metadata", f.Name, mode)
			}
			c.Physical, c.FieldID = pn, int(id)
		}
		out = append(out, c)
	}
	return out, nil
}

// arrowType maps a Delta primitive type to the Arrow type it is read as
// (the types delta-rs and Spark write to Parquet).
func arrowType(t string) (arrow.DataType, error) {
	switch t {
	case "string":
		return arrow.BinaryTypes.String, nil
	case "long":
		return arrow.PrimitiveTypes.Int64, nil
	case "integer":
		return arrow.PrimitiveTypes.Int32, nil
	case "short":
		return arrow.PrimitiveTypes.Int16, nil
	case "byte":
		return arrow.PrimitiveTypes.Int8, nil
	case "float":
		return arrow.PrimitiveTypes.Float32, nil
	case "double":
		return arrow.PrimitiveTypes.Float64, nil
	case "boolean":
		return arrow.FixedWidthTypes.Boolean, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "date":
		return arrow.FixedWidthTypes.Date32, nil
	case "timestamp":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case "timestamp_ntz":
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	case "void":
		return arrow.Null, nil
	}
	if rest, ok := strings.CutPrefix(t, "decimal("); ok && strings.HasSuffix(rest, ")") {
		ps, ss, ok := strings.Cut(strings.TrimSuffix(rest, ")"), ",")
		p, err1 := strconv.Atoi(strings.TrimSpace(ps))
		s, err2 := strconv.Atoi(strings.TrimSpace(ss))
		if ok && err1 == nil && err2 == nil && p >= 1 && p <= 38 && s >= 0 && s <= p {
			return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(s)}, nil
		}
	}
	return nil, fmt.Errorf("type %q is not supported", t)
}

// PartitionArray returns a column of n copies of a partition value as the
// log serializes it (PROTOCOL.md, "Partition Value Serialization"); a nil
// or empty value is null (for strings, an empty value is null too, as the
// protocol says).
func PartitionArray(c Column, value *string, n int, mem memory.Allocator) (arrow.Array, error) {
	if value == nil || *value == "" || c.Arrow.ID() == arrow.NULL {
		return array.MakeArrayOfNull(mem, c.Arrow, n), nil
	}
	v := *value
	bad := func(err error) error {
		return fmt.Errorf("partition column %q: value %q is not a %s: %v", c.Name, v, c.Type, err)
	}
	switch c.Arrow.ID() {
	case arrow.STRING, arrow.BINARY:
		// One dictionary entry and n zero codes: the builder interns it once.
		var dict arrow.Array
		if c.Arrow.ID() == arrow.STRING {
			b := array.NewStringBuilder(mem)
			b.Append(v)
			dict = b.NewArray()
			b.Release()
		} else {
			b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
			b.Append([]byte(v))
			dict = b.NewArray()
			b.Release()
		}
		defer dict.Release()
		idx := array.NewInt32Builder(mem)
		defer idx.Release()
		idx.AppendValues(make([]int32, n), nil)
		ia := idx.NewArray()
		defer ia.Release()
		return array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: c.Arrow}, ia, dict), nil
	}
	b := array.NewBuilder(mem, c.Arrow)
	defer b.Release()
	for i := 0; i < n; i++ {
		var err error
		switch bb := b.(type) {
		case *array.Int64Builder:
			var x int64
			x, err = strconv.ParseInt(v, 10, 64)
			bb.Append(x)
		case *array.Int32Builder:
			var x int64
			x, err = strconv.ParseInt(v, 10, 32)
			bb.Append(int32(x))
		case *array.Int16Builder:
			var x int64
			x, err = strconv.ParseInt(v, 10, 16)
			bb.Append(int16(x))
		case *array.Int8Builder:
			var x int64
			x, err = strconv.ParseInt(v, 10, 8)
			bb.Append(int8(x))
		case *array.Float64Builder:
			var x float64
			x, err = strconv.ParseFloat(v, 64)
			bb.Append(x)
		case *array.Float32Builder:
			var x float64
			x, err = strconv.ParseFloat(v, 32)
			bb.Append(float32(x))
		case *array.BooleanBuilder:
			var x bool
			x, err = strconv.ParseBool(v)
			bb.Append(x)
		case *array.Date32Builder:
			var t time.Time
			t, err = time.Parse("2006-01-02", v)
			bb.Append(arrow.Date32FromTime(t))
		case *array.TimestampBuilder:
			var t time.Time
			t, err = parseTimestamp(v)
			bb.Append(arrow.Timestamp(t.UnixMicro()))
		case *array.Decimal128Builder:
			var x decimal128.Num
			dt := c.Arrow.(*arrow.Decimal128Type)
			x, err = decimal128.FromString(v, dt.Precision, dt.Scale)
			bb.Append(x)
		default:
			return nil, fmt.Errorf("partition column %q: type %s cannot be a partition value here", c.Name, c.Type)
		}
		if err != nil {
			return nil, bad(err)
		}
	}
	return b.NewArray(), nil
}

// parseTimestamp reads the partition timestamp forms: "2006-01-02
// 15:04:05[.ffffff]" (UTC) or ISO 8601 with a zone.
func parseTimestamp(v string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not a timestamp")
}
