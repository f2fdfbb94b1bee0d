package index

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/mapbuf"
)

// Code columns (index version 4, FORMAT.md §4). A string attribute with
// few distinct values (units, frequency, category) costs its bytes again
// on every series when stored plain. Version 4 stores such a column as a
// code per series, int8 or int16, plain and nullable, mapped like every
// other column; its distinct values are a JSON array in the field's
// metadata (MetaDictionary), sorted bytewise without repeats, read from
// the schema that arrow-go parses at open anyway. Arrow's own dictionary
// encoding is not used because arrow-go's mapped reader cannot open it.
//
// A reader decodes the values on the column's first use (Attribute), in
// time proportional to their number (at most MaxCodes), and hands the
// column out as an Arrow dictionary array over the mapped codes: the form
// a version-1 dictionary column had, which every consumer reads.

// MaxCodes is the most distinct values a code column holds (int16 codes):
// what bounds a reader's work to decode one, whatever the series count.
const MaxCodes = 1 << 15

// MaxCodeValueBytes bounds the JSON of all code columns' values of one
// index together. The values are in the schema, which every reader copies
// at open (arrow-go and our footer check read the whole footer), so they
// are what open costs beyond O(1): about a millisecond per MiB. A column
// whose values would pass the bound stays plain.
const MaxCodeValueBytes = 512 << 10

// maxInt8Codes is the most distinct values int8 codes index.
const maxInt8Codes = 1 << 7

// attributeFields are the attribute fields as Reader hands them out: in a
// version-4 index (v4) a field with MetaDictionary becomes a dictionary of
// utf8 indexed by its code type, which must be int8 or int16. Other fields
// are as the file has them.
func attributeFields(fs []arrow.Field, v4 bool) ([]arrow.Field, error) {
	out := make([]arrow.Field, len(fs))
	for i, f := range fs {
		out[i] = f
		if !v4 || !f.HasMetadata() || f.Metadata.FindKey(MetaDictionary) < 0 {
			continue
		}
		switch f.Type.ID() {
		case arrow.INT8, arrow.INT16:
		default:
			return nil, fmt.Errorf("index column %q has %s metadata but type %s; codes are int8 or int16", f.Name, MetaDictionary, f.Type)
		}
		out[i] = arrow.Field{Name: f.Name, Nullable: f.Nullable,
			Type: &arrow.DictionaryType{IndexType: f.Type, ValueType: arrow.BinaryTypes.String}}
	}
	return out, nil
}

// coded reports whether attribute i is a code column (version 4 and
// later).
func (x *Reader) coded(i int) bool {
	return (x.version == Version || x.version == VersionV4) && x.attrFields[i].Type.ID() == arrow.DICTIONARY
}

// Coded reports whether attribute i is stored as a code column (FORMAT.md
// §4, version 4 and later) rather than as its values.
func (x *Reader) Coded(i int) bool { return i >= 0 && i < len(x.attrs) && x.coded(i) }

// decodeColumn makes a code column (f as the file has it, codes its
// mapped array) the dictionary array Attribute hands out: the values
// parsed from f's metadata, every valid code checked to index one. The
// codes are not copied.
func decodeColumn(f arrow.Field, codes arrow.Array) (arrow.Array, error) {
	raw, _ := f.Metadata.GetValue(MetaDictionary)
	var vals []string
	if err := json.Unmarshal([]byte(raw), &vals); err != nil {
		return nil, fmt.Errorf("%s metadata: not a JSON array of strings: %w", MetaDictionary, err)
	}
	limit := MaxCodes
	if f.Type.ID() == arrow.INT8 {
		limit = maxInt8Codes
	}
	if len(vals) > limit {
		return nil, fmt.Errorf("%s metadata holds %d values; %s codes index at most %d", MetaDictionary, len(vals), f.Type, limit)
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(vals, nil)
	dict := b.NewArray()
	defer dict.Release()
	d := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: f.Type, ValueType: arrow.BinaryTypes.String}, codes, dict)
	if err := checkIndices(d, len(vals)); err != nil {
		d.Release()
		return nil, err
	}
	d.Dictionary() // built lazily without a lock by arrow-go: build it before it is shared
	return d, nil
}

// encodeCodes is the version-4 form of a finished utf8 attribute column c
// of n rows: its codes and the field that carries its values, when the
// column has at most MaxCodes distinct values, all valid UTF-8 (JSON
// carries nothing else unchanged), whose JSON fits in budget bytes, and
// coding makes the file smaller; ok false keeps it plain. The codes are
// in buffers of a.
func encodeCodes(a *mapbuf.Arena, f arrow.Field, c *column, budget int) (arrow.Array, arrow.Field, bool, error) {
	if c.typ.ID() != arrow.STRING || c.n == 0 {
		return nil, f, false, nil
	}
	offs := arrow.Int32Traits.CastFromBytes(c.offsets.Bytes())
	data := c.data.Bytes()
	// First pass: a provisional code per row, in order of first sight,
	// written as int16 where the codes go (the arena's: no heap per row).
	seen := map[string]uint16{}
	var order []string
	buf := a.New()
	out := buf.AppendZeros(2 * c.n)
	if err := a.Err(); err != nil {
		return nil, f, false, err
	}
	var prev []byte // the last valid row's value and code: neighbours in id order often share one
	var prevK uint16
	for i := 0; i < c.n; i++ {
		if c.isNull(i) {
			continue
		}
		v := data[offs[i]:offs[i+1]]
		if prev != nil && bytes.Equal(v, prev) {
			binary.NativeEndian.PutUint16(out[2*i:], prevK)
			continue
		}
		k, ok := seen[string(v)]
		if !ok {
			if len(order) == MaxCodes || !utf8.Valid(v) {
				return nil, f, false, nil
			}
			s := string(v)
			k = uint16(len(order))
			seen[s] = k
			order = append(order, s)
		}
		binary.NativeEndian.PutUint16(out[2*i:], k)
		prev, prevK = v, k
	}
	sorted := slices.Clone(order)
	slices.Sort(sorted)
	width, typ := 2, arrow.DataType(arrow.PrimitiveTypes.Int16)
	if len(sorted) <= maxInt8Codes {
		width, typ = 1, arrow.PrimitiveTypes.Int8
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sorted); err != nil {
		return nil, f, false, err
	}
	meta := bytes.TrimSuffix(js.Bytes(), []byte("\n"))
	if len(meta) > budget {
		return nil, f, false, nil
	}
	// The values are written twice (the schema opens the stream and ends
	// the file, in the footer); the plain column is offsets and bytes.
	if plain, coded := 4*(c.n+1)+len(data), width*c.n+2*len(meta); coded >= plain {
		return nil, f, false, nil
	}
	final := make([]uint16, len(order))
	for k, s := range order {
		j, _ := slices.BinarySearch(sorted, s)
		final[k] = uint16(j)
	}
	// Second pass, in place: the final codes (an int8 code i is written
	// at or before the int16 it comes from, which is read first).
	for i := 0; i < c.n; i++ {
		k := uint16(0)
		if !c.isNull(i) {
			k = final[binary.NativeEndian.Uint16(out[2*i:])]
		}
		if width == 1 {
			out[i] = byte(k)
		} else {
			binary.NativeEndian.PutUint16(out[2*i:], k)
		}
	}
	md := arrow.NewMetadata([]string{MetaDictionary}, []string{string(meta)})
	field := arrow.Field{Name: f.Name, Type: typ, Nullable: f.Nullable, Metadata: md}
	return makeArray(typ, c.n, []*memory.Buffer{c.validity(), memory.NewBufferBytes(out[:width*c.n])}, c.nulls), field, true, nil
}
