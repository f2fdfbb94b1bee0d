package flightenc

import (
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// encodedSchema is what a stream of one schema needs, computed once per
// schema: its schema message and which fields are dictionaries.
type encodedSchema struct {
	flat       bool
	why        string // when not flat: the first field that is not
	header     []byte // the schema's flatbuffer Message
	dictFields []int  // positions of the dictionary fields; the dictionary id is the index here
}

// The cache holds the encodings of the schemas streamed lately, keyed by
// the schema's pointer: answers of the default columns share their view's
// schema objects, so a stream finds its schema's encoding without hashing
// anything. Each entry keeps its schema alive, so a key's address cannot be
// reused by another schema while it is cached. Schemas built per request
// (a column list) fill it too; when it holds maxCached entries it starts
// over. One mutex: an entry is found in a few nanoseconds, far below what
// a stream costs.
const maxCached = 256

var cache struct {
	mu sync.Mutex
	m  map[*arrow.Schema]*encodedSchema
}

// Flat reports whether Writer can encode streams of schema; when it cannot,
// use arrow-go's ipc.Writer.
func Flat(schema *arrow.Schema) bool {
	enc, err := encode(schema)
	return err == nil && enc.flat
}

// encode returns schema's cached encoding, computing it on a miss.
func encode(schema *arrow.Schema) (*encodedSchema, error) {
	if schema == nil {
		return nil, fmt.Errorf("flightenc: no schema")
	}
	cache.mu.Lock()
	enc, ok := cache.m[schema]
	cache.mu.Unlock()
	if ok {
		return enc, nil
	}
	enc = encodeSchema(schema)
	cache.mu.Lock()
	if cache.m == nil || len(cache.m) >= maxCached {
		cache.m = make(map[*arrow.Schema]*encodedSchema, maxCached)
	}
	cache.m[schema] = enc
	cache.mu.Unlock()
	return enc, nil
}

func encodeSchema(schema *arrow.Schema) *encodedSchema {
	enc := &encodedSchema{flat: true}
	for i, f := range schema.Fields() {
		t := f.Type
		if d, ok := t.(*arrow.DictionaryType); ok {
			if !isInteger(d.IndexType) {
				enc.flat, enc.why = false, fmt.Sprintf("field %q: dictionary index type %s", f.Name, d.IndexType)
				break
			}
			enc.dictFields = append(enc.dictFields, i)
			t = d.ValueType
		}
		if !flatType(t) {
			enc.flat, enc.why = false, fmt.Sprintf("field %q: type %s", f.Name, t)
			break
		}
	}
	if !enc.flat {
		return enc
	}
	p := ipc.GetSchemaPayload(schema, memory.DefaultAllocator)
	meta := p.Meta()
	enc.header = append([]byte(nil), meta.Bytes()...)
	meta.Release()
	p.Release()
	return enc
}

func isInteger(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// flatType reports whether a (non-dictionary) type is laid out as a
// validity bitmap and one values buffer (or offsets and data).
func flatType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.BOOL, arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return true
	case arrow.NULL, arrow.DICTIONARY, arrow.EXTENSION, arrow.STRING_VIEW, arrow.BINARY_VIEW,
		arrow.RUN_END_ENCODED, arrow.LIST, arrow.LARGE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW,
		arrow.FIXED_SIZE_LIST, arrow.STRUCT, arrow.MAP, arrow.SPARSE_UNION, arrow.DENSE_UNION:
		return false
	}
	fw, ok := t.(arrow.FixedWidthDataType)
	return ok && fw.BitWidth() > 0 && fw.BitWidth()%8 == 0
}
