package vortexio

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// PType is a Vortex primitive type; the numbering is the on-disk enum.
type PType uint8

const (
	U8 PType = iota
	U16
	U32
	U64
	I8
	I16
	I32
	I64
	F16
	F32
	F64
)

func (p PType) valid() bool { return p <= F64 }

// Width is the size of one value in bytes.
func (p PType) Width() int {
	switch p {
	case U8, I8:
		return 1
	case U16, I16, F16:
		return 2
	case U32, I32, F32:
		return 4
	default:
		return 8
	}
}

func (p PType) isInt() bool      { return p <= I64 }
func (p PType) isSigned() bool   { return p >= I8 && p <= I64 }
func (p PType) isUnsigned() bool { return p <= U64 }
func (p PType) isFloat() bool    { return p >= F16 && p <= F64 }

// unsigned returns the unsigned type of the same width (identity for unsigned).
func (p PType) unsigned() PType {
	switch p.Width() {
	case 1:
		return U8
	case 2:
		return U16
	case 4:
		return U32
	}
	return U64
}

func (p PType) String() string {
	names := [...]string{"u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "f32", "f64"}
	if p.valid() {
		return names[p]
	}
	return fmt.Sprintf("ptype(%d)", uint8(p))
}

// Kind is the logical type family of a DType (the flatbuffer union tag).
type Kind uint8

const (
	KindNull      Kind = 1
	KindBool      Kind = 2
	KindPrimitive Kind = 3
	KindDecimal   Kind = 4
	KindUtf8      Kind = 5
	KindBinary    Kind = 6
	KindStruct    Kind = 7
	KindList      Kind = 8
	KindExtension Kind = 9
	KindFSL       Kind = 10
)

// DType is a Vortex logical type.
type DType struct {
	Kind     Kind
	Nullable bool
	PType    PType    // KindPrimitive
	Names    []string // KindStruct
	Fields   []*DType // KindStruct
	ExtID    string   // KindExtension
	ExtMeta  []byte   // KindExtension
	Storage  *DType   // KindExtension
}

func (d *DType) String() string {
	var s string
	switch d.Kind {
	case KindNull:
		return "null"
	case KindBool:
		s = "bool"
	case KindPrimitive:
		s = d.PType.String()
	case KindUtf8:
		s = "utf8"
	case KindBinary:
		s = "binary"
	case KindStruct:
		parts := make([]string, len(d.Fields))
		for i, f := range d.Fields {
			parts[i] = d.Names[i] + "=" + f.String()
		}
		s = "{" + strings.Join(parts, ", ") + "}"
	case KindExtension:
		return d.ExtID + "(" + d.Storage.String() + ")"
	default:
		s = fmt.Sprintf("kind(%d)", d.Kind)
	}
	if d.Nullable {
		s += "?"
	}
	return s
}

func (d *DType) withNullable(n bool) *DType {
	if d.Nullable == n && (d.Kind != KindExtension || d.Storage.Nullable == n) {
		return d // dtypes are never modified in place: share it
	}
	c := *d
	c.Nullable = n
	if c.Kind == KindExtension {
		st := *c.Storage
		st.Nullable = n
		c.Storage = &st
	}
	return &c
}

func (d *DType) nullable() bool {
	if d.Kind == KindExtension {
		return d.Storage.Nullable
	}
	return d.Kind == KindNull || d.Nullable
}

func primDType(p PType, nullable bool) *DType {
	return &DType{Kind: KindPrimitive, PType: p, Nullable: nullable}
}

var boolNonNull = &DType{Kind: KindBool}

const maxDTypeDepth = 64

// parseDType reads a flatbuffer DType table.
func parseDType(t fbTable, depth int) (*DType, error) {
	if depth > maxDTypeDepth {
		return nil, corruptf("dtype nested deeper than %d", maxDTypeDepth)
	}
	tag, err := t.u8(0, 0)
	if err != nil {
		return nil, err
	}
	body, ok, err := t.table(1)
	if err != nil {
		return nil, err
	}
	if !ok && tag != uint8(KindNull) {
		return nil, corruptf("dtype union %d without body", tag)
	}
	d := &DType{Kind: Kind(tag)}
	switch d.Kind {
	case KindNull:
		d.Nullable = true
	case KindBool, KindUtf8, KindBinary:
		d.Nullable, err = body.boolean(0)
	case KindPrimitive:
		var p uint8
		if p, err = body.u8(0, 0); err == nil {
			d.PType = PType(p)
			if !d.PType.valid() {
				return nil, corruptf("unknown ptype %d", p)
			}
			d.Nullable, err = body.boolean(1)
		}
	case KindStruct:
		if d.Names, err = body.strings(0); err != nil {
			return nil, err
		}
		fts, err := body.tables(1)
		if err != nil {
			return nil, err
		}
		if len(fts) != len(d.Names) {
			return nil, corruptf("struct dtype has %d names and %d types", len(d.Names), len(fts))
		}
		for _, ft := range fts {
			fd, err := parseDType(ft, depth+1)
			if err != nil {
				return nil, err
			}
			d.Fields = append(d.Fields, fd)
		}
		if d.Nullable, err = body.boolean(2); err != nil {
			return nil, err
		}
	case KindExtension:
		if d.ExtID, err = body.str(0); err != nil {
			return nil, err
		}
		st, ok, err := body.table(1)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, corruptf("extension dtype %q without storage dtype", d.ExtID)
		}
		if d.Storage, err = parseDType(st, depth+1); err != nil {
			return nil, err
		}
		if d.ExtMeta, err = body.bytes(2); err != nil {
			return nil, err
		}
		d.Nullable = d.Storage.Nullable
	case KindDecimal:
		return nil, unsupportedf("dtype decimal")
	case KindList, KindFSL:
		return nil, unsupportedf("dtype list (kind %d)", tag)
	default:
		return nil, unsupportedf("dtype kind %d", tag)
	}
	return d, err
}

// Vortex time units (metadata byte of the temporal extension types).
const (
	unitNs   = 0
	unitUs   = 1
	unitMs   = 2
	unitS    = 3
	unitDays = 4
)

// ArrowType maps a Vortex dtype to the Arrow type this package reads it as.
// Strings become Arrow String/Binary (32-bit offsets), which every Arrow
// consumer handles; ranges larger than 2 GiB of string bytes are refused.
func (d *DType) ArrowType() (arrow.DataType, error) {
	switch d.Kind {
	case KindNull:
		return arrow.Null, nil
	case KindBool:
		return arrow.FixedWidthTypes.Boolean, nil
	case KindPrimitive:
		return ptypeArrow(d.PType), nil
	case KindUtf8:
		return arrow.BinaryTypes.String, nil
	case KindBinary:
		return arrow.BinaryTypes.Binary, nil
	case KindStruct:
		fields := make([]arrow.Field, len(d.Fields))
		for i, f := range d.Fields {
			t, err := f.ArrowType()
			if err != nil {
				return nil, err
			}
			fields[i] = arrow.Field{Name: d.Names[i], Type: t, Nullable: f.nullable()}
		}
		return arrow.StructOf(fields...), nil
	case KindExtension:
		return extArrowType(d)
	}
	return nil, unsupportedf("dtype %s", d)
}

func ptypeArrow(p PType) arrow.DataType {
	return [...]arrow.DataType{arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32,
		arrow.PrimitiveTypes.Uint64, arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32,
		arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64}[p]
}

func extArrowType(d *DType) (arrow.DataType, error) {
	st := d.Storage
	if st.Kind != KindPrimitive || len(d.ExtMeta) < 1 {
		return nil, unsupportedf("extension dtype %q over %s", d.ExtID, st)
	}
	unit := d.ExtMeta[0]
	switch d.ExtID {
	case "vortex.date":
		if unit == unitDays && st.PType == I32 {
			return arrow.FixedWidthTypes.Date32, nil
		}
		if unit == unitMs && st.PType == I64 {
			return arrow.FixedWidthTypes.Date64, nil
		}
	case "vortex.time":
		switch {
		case unit == unitS && st.PType == I32:
			return arrow.FixedWidthTypes.Time32s, nil
		case unit == unitMs && st.PType == I32:
			return arrow.FixedWidthTypes.Time32ms, nil
		case unit == unitUs && st.PType == I64:
			return arrow.FixedWidthTypes.Time64us, nil
		case unit == unitNs && st.PType == I64:
			return arrow.FixedWidthTypes.Time64ns, nil
		}
	case "vortex.timestamp":
		if st.PType != I64 || unit > unitS {
			break
		}
		tz := ""
		if len(d.ExtMeta) >= 3 {
			n := int(binary.LittleEndian.Uint16(d.ExtMeta[1:]))
			if 3+n > len(d.ExtMeta) {
				return nil, corruptf("timestamp metadata truncated")
			}
			tz = string(d.ExtMeta[3 : 3+n])
		}
		u := [...]arrow.TimeUnit{arrow.Nanosecond, arrow.Microsecond, arrow.Millisecond, arrow.Second}[unit]
		return &arrow.TimestampType{Unit: u, TimeZone: tz}, nil
	}
	return nil, unsupportedf("extension dtype %q (unit %d, storage %s)", d.ExtID, unit, st)
}

// dtypeFromArrow maps an Arrow type to the Vortex dtype the writer stores.
func dtypeFromArrow(t arrow.DataType, nullable bool) (*DType, error) {
	switch t.ID() {
	case arrow.NULL:
		return &DType{Kind: KindNull, Nullable: true}, nil
	case arrow.BOOL:
		return &DType{Kind: KindBool, Nullable: nullable}, nil
	case arrow.UINT8:
		return primDType(U8, nullable), nil
	case arrow.UINT16:
		return primDType(U16, nullable), nil
	case arrow.UINT32:
		return primDType(U32, nullable), nil
	case arrow.UINT64:
		return primDType(U64, nullable), nil
	case arrow.INT8:
		return primDType(I8, nullable), nil
	case arrow.INT16:
		return primDType(I16, nullable), nil
	case arrow.INT32:
		return primDType(I32, nullable), nil
	case arrow.INT64:
		return primDType(I64, nullable), nil
	case arrow.FLOAT16:
		return primDType(F16, nullable), nil
	case arrow.FLOAT32:
		return primDType(F32, nullable), nil
	case arrow.FLOAT64:
		return primDType(F64, nullable), nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return &DType{Kind: KindUtf8, Nullable: nullable}, nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return &DType{Kind: KindBinary, Nullable: nullable}, nil
	case arrow.DATE32:
		return extDType("vortex.date", I32, []byte{unitDays}, nullable), nil
	case arrow.DATE64:
		return extDType("vortex.date", I64, []byte{unitMs}, nullable), nil
	case arrow.TIME32:
		u := byte(unitS)
		if t.(*arrow.Time32Type).Unit == arrow.Millisecond {
			u = unitMs
		}
		return extDType("vortex.time", I32, []byte{u}, nullable), nil
	case arrow.TIME64:
		u := byte(unitUs)
		if t.(*arrow.Time64Type).Unit == arrow.Nanosecond {
			u = unitNs
		}
		return extDType("vortex.time", I64, []byte{u}, nullable), nil
	case arrow.TIMESTAMP:
		ts := t.(*arrow.TimestampType)
		u := map[arrow.TimeUnit]byte{arrow.Nanosecond: unitNs, arrow.Microsecond: unitUs, arrow.Millisecond: unitMs, arrow.Second: unitS}[ts.Unit]
		meta := []byte{u, 0, 0}
		if ts.TimeZone != "" {
			if len(ts.TimeZone) > math.MaxUint16 {
				return nil, fmt.Errorf("vortexio: time zone name too long")
			}
			binary.LittleEndian.PutUint16(meta[1:], uint16(len(ts.TimeZone)))
			meta = append(meta, ts.TimeZone...)
		}
		return extDType("vortex.timestamp", I64, meta, nullable), nil
	case arrow.STRUCT:
		st := t.(*arrow.StructType)
		d := &DType{Kind: KindStruct, Nullable: nullable}
		for _, f := range st.Fields() {
			fd, err := dtypeFromArrow(f.Type, f.Nullable)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			d.Names = append(d.Names, f.Name)
			d.Fields = append(d.Fields, fd)
		}
		return d, nil
	}
	return nil, fmt.Errorf("%w: arrow type %s for writing", ErrUnsupported, t)
}

func extDType(id string, p PType, meta []byte, nullable bool) *DType {
	return &DType{Kind: KindExtension, ExtID: id, ExtMeta: meta, Storage: primDType(p, nullable), Nullable: nullable}
}
