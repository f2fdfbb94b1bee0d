package vortexio

import (
	"encoding/binary"
	"strings"
	"testing"
)

// structDTypeBuf hand-writes the flatbuffer of a DType table holding an
// empty Struct_ body whose nullable field (slot 2) is at nullableOff from the
// body table (0: absent). The body table is 8 bytes; its byte 4 holds 1.
func structDTypeBuf(nullableOff uint16) []byte {
	b := make([]byte, 44)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 12) // root: the DType table at 12
	// DType vtable at 4: 8 bytes long, table 12 bytes, tag at +4, body at +8.
	le.PutUint16(b[4:], 8)
	le.PutUint16(b[6:], 12)
	le.PutUint16(b[8:], 4)
	le.PutUint16(b[10:], 8)
	le.PutUint32(b[12:], 12-4) // soffset to the vtable
	b[16] = byte(KindStruct)
	le.PutUint32(b[20:], 36-20) // uoffset to the body table at 36
	// Struct_ vtable at 24: names and dtypes absent, nullable at nullableOff.
	le.PutUint16(b[24:], 10)
	le.PutUint16(b[26:], 8)
	le.PutUint16(b[32:], nullableOff)
	le.PutUint32(b[36:], 36-24) // soffset to the vtable
	b[40] = 1
	return b
}

// TestParseStructDTypeNullable: a struct dtype's nullable flag is read, and
// a flag outside the buffer is reported as corruption, not dropped.
func TestParseStructDTypeNullable(t *testing.T) {
	cases := []struct {
		name     string
		off      uint16
		nullable bool
		err      string
	}{
		{"absent", 0, false, ""},
		{"set", 4, true, ""},
		{"out of range", 200, false, "flatbuffer field 2 out of range"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, err := fbRoot(structDTypeBuf(c.off))
			if err != nil {
				t.Fatal(err)
			}
			d, err := parseDType(root, 0)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("parseDType = %+v, %v; want an error containing %q", d, err, c.err)
				}
				return
			}
			if err != nil || d.Kind != KindStruct || d.Nullable != c.nullable || len(d.Fields) != 0 {
				t.Fatalf("parseDType = %+v, %v; want an empty struct, nullable %v", d, err, c.nullable)
			}
		})
	}
}
