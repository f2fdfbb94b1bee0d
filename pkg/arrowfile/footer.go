package arrowfile

import (
	"encoding/binary"
	"fmt"
	"io"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// CheckFooter validates the flatbuffer footer of an Arrow IPC file before
// arrow-go parses it. arrow-go trusts the vector lengths it finds there and
// allocates slices of that size: one flipped byte in a schema can ask for
// hundreds of GB, which is not a recoverable panic but a fatal
// out-of-memory. So every vector and string the schema reader will walk is
// checked to lie inside the footer, nesting is bounded, and only then is
// the file handed over. (Panics on smaller inconsistencies are recovered
// by the callers.) Malformed bytes are corruption errors (package corrupt);
// a failing read is returned as it is.
func CheckFooter(r io.ReaderAt, size int64) error {
	const tail = 10 // int32 footer length + "ARROW1"
	if size < int64(len(magic))+tail {
		return corrupt.Errorf("%d bytes is too small for an Arrow IPC file", size)
	}
	var end [tail]byte
	if _, err := r.ReadAt(end[:], size-tail); err != nil {
		return err
	}
	n, err := footerLength(end[:], size)
	if err != nil {
		return err
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, size-tail-n); err != nil {
		return err
	}
	return checkFooterBytes(buf, size-tail-n)
}

const magic = "ARROW1"

// footerLength reads the footer's length from end, the file's last 10
// bytes (int32 length, "ARROW1"), and checks that it fits a size-byte file.
func footerLength(end []byte, size int64) (int64, error) {
	if string(end[4:]) != magic {
		return 0, corrupt.Errorf("no Arrow IPC file magic at the end")
	}
	n := int64(int32(binary.LittleEndian.Uint32(end[:4])))
	if n < 4 || n > size-int64(len(end))-int64(len(magic)) {
		return 0, corrupt.Errorf("footer length %d does not fit a %d-byte file", n, size)
	}
	return n, nil
}

// fbCheck walks one flatbuffer with bounds checks.
type fbCheck struct {
	buf   []byte
	nodes int // tables visited, bounded by the buffer size
}

// checkFooterBytes checks a footer; body is where the footer starts, so
// every block (a message and its body) must lie in [len(magic), body).
func checkFooterBytes(buf []byte, body int64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed footer: %v", r)
		}
		err = corrupt.Mark(err) // whatever fails in here is the bytes' fault
	}()
	c := &fbCheck{buf: buf}
	root, err := c.table(0, "footer")
	if err != nil {
		return err
	}
	// Footer: 1 schema, 2 dictionaries [Block], 3 recordBatches [Block].
	// A Block is {offset int64, metaDataLength int32, pad, bodyLength
	// int64}: arrow-go allocates what it claims before reading, so a block
	// reaching past the file would cost a huge allocation, not an error.
	for _, slot := range []int{2, 3} {
		start, n, err := c.vector(root, slot, 24, "footer blocks")
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			b := buf[start+24*i:]
			off := int64(binary.LittleEndian.Uint64(b))
			meta := int64(int32(binary.LittleEndian.Uint32(b[8:])))
			bodyLen := int64(binary.LittleEndian.Uint64(b[16:]))
			if off < int64(len(magic)) || meta < 0 || bodyLen < 0 || off > body || meta > body-off || bodyLen > body-off-meta {
				return fmt.Errorf("footer block %d (offset %d, metadata %d, body %d bytes) lies outside the file's %d bytes of messages", i, off, meta, bodyLen, body)
			}
		}
	}
	schema, ok, err := c.child(root, 1, "schema")
	if err != nil || !ok {
		return err
	}
	return c.schema(schema)
}

func (c *fbCheck) schema(t flatbuffers.Table) error {
	// Schema: 1 fields [Field], 2 custom_metadata [KeyValue], 3 features [long].
	if err := c.tables(t, 1, "schema fields", func(f flatbuffers.Table) error { return c.field(f, 0) }); err != nil {
		return err
	}
	if err := c.keyValues(t, 2); err != nil {
		return err
	}
	_, _, err := c.vector(t, 3, 8, "schema features")
	return err
}

// maxTypeTag is the last value of the format's Type union (LargeListView
// in Schema.fbs); arrow-go panics on a tag past it.
const maxTypeTag = 26

// maxDepth bounds field nesting (arrow-go recurses once per level).
const maxDepth = 64

func (c *fbCheck) field(t flatbuffers.Table, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("fields nested deeper than %d", maxDepth)
	}
	// Field: 0 name, 3 type (union table), 4 dictionary, 5 children, 6 custom_metadata.
	if err := c.str(t, 0, "field name"); err != nil {
		return err
	}
	if tt := c.u8(t, 2); tt > maxTypeTag {
		return fmt.Errorf("field type tag %d is not an Arrow type (0–%d)", tt, maxTypeTag)
	}
	if typ, ok, err := c.child(t, 3, "field type"); err != nil {
		return err
	} else if ok && c.u8(t, 2) == 14 { // Union: 1 typeIds [int]
		if _, _, err := c.vector(typ, 1, 4, "union type ids"); err != nil {
			return err
		}
	}
	if dict, ok, err := c.child(t, 4, "dictionary encoding"); err != nil {
		return err
	} else if ok {
		if _, _, err := c.child(dict, 1, "dictionary index type"); err != nil {
			return err
		}
	}
	if err := c.tables(t, 5, "field children", func(f flatbuffers.Table) error { return c.field(f, depth+1) }); err != nil {
		return err
	}
	return c.keyValues(t, 6)
}

func (c *fbCheck) keyValues(t flatbuffers.Table, slot int) error {
	return c.tables(t, slot, "custom metadata", func(kv flatbuffers.Table) error {
		if err := c.str(kv, 0, "metadata key"); err != nil {
			return err
		}
		return c.str(kv, 1, "metadata value")
	})
}

// table checks the table whose uoffset is at pos and returns it.
func (c *fbCheck) table(pos int, what string) (flatbuffers.Table, error) {
	if pos < 0 || pos+4 > len(c.buf) {
		return flatbuffers.Table{}, fmt.Errorf("%s: offset outside the footer", what)
	}
	at := pos + int(flatbuffers.GetUOffsetT(c.buf[pos:]))
	if at < 0 || at+4 > len(c.buf) {
		return flatbuffers.Table{}, fmt.Errorf("%s: table outside the footer", what)
	}
	vt := at - int(flatbuffers.GetSOffsetT(c.buf[at:]))
	if vt < 0 || vt+4 > len(c.buf) {
		return flatbuffers.Table{}, fmt.Errorf("%s: vtable outside the footer", what)
	}
	vlen := int(flatbuffers.GetVOffsetT(c.buf[vt:]))
	if vlen < 4 || vt+vlen > len(c.buf) {
		return flatbuffers.Table{}, fmt.Errorf("%s: vtable outside the footer", what)
	}
	// The table's inline object (its scalars and offsets) must lie in the
	// buffer and every field the vtable names inside that object: arrow-go
	// reads scalars such as an Int's bit width without a bounds check.
	size := int(flatbuffers.GetVOffsetT(c.buf[vt+2:]))
	if size < 4 || at+size > len(c.buf) {
		return flatbuffers.Table{}, fmt.Errorf("%s: table of %d bytes outside the footer", what, size)
	}
	for e := vt + 4; e+2 <= vt+vlen; e += 2 {
		if o := int(flatbuffers.GetVOffsetT(c.buf[e:])); o != 0 && (o < 4 || o >= size) {
			return flatbuffers.Table{}, fmt.Errorf("%s: field at %d outside its %d-byte table", what, o, size)
		}
	}
	if c.nodes++; c.nodes > len(c.buf) {
		return flatbuffers.Table{}, fmt.Errorf("%s: too many tables", what)
	}
	return flatbuffers.Table{Bytes: c.buf, Pos: flatbuffers.UOffsetT(at)}, nil
}

// slotPos is the absolute position of a field slot, or 0 when absent.
func (c *fbCheck) slotPos(t flatbuffers.Table, slot int) int {
	o := t.Offset(flatbuffers.VOffsetT(4 + 2*slot))
	if o == 0 {
		return 0
	}
	return int(t.Pos) + int(o)
}

func (c *fbCheck) child(t flatbuffers.Table, slot int, what string) (flatbuffers.Table, bool, error) {
	p := c.slotPos(t, slot)
	if p == 0 {
		return flatbuffers.Table{}, false, nil
	}
	ct, err := c.table(p, what)
	return ct, err == nil, err
}

func (c *fbCheck) u8(t flatbuffers.Table, slot int) byte {
	p := c.slotPos(t, slot)
	if p == 0 || p >= len(c.buf) {
		return 0
	}
	return c.buf[p]
}

// vector checks that the vector at slot, of elem-byte elements, lies inside
// the footer, and returns its start and length.
func (c *fbCheck) vector(t flatbuffers.Table, slot, elem int, what string) (start, n int, err error) {
	p := c.slotPos(t, slot)
	if p == 0 {
		return 0, 0, nil
	}
	if p+4 > len(c.buf) {
		return 0, 0, fmt.Errorf("%s: offset outside the footer", what)
	}
	at := p + int(flatbuffers.GetUOffsetT(c.buf[p:]))
	if at < 0 || at+4 > len(c.buf) {
		return 0, 0, fmt.Errorf("%s: vector outside the footer", what)
	}
	n = int(flatbuffers.GetUOffsetT(c.buf[at:]))
	start = at + 4
	if n < 0 || n > (len(c.buf)-start)/elem {
		return 0, 0, fmt.Errorf("%s: %d elements do not fit in the footer", what, n)
	}
	return start, n, nil
}

func (c *fbCheck) str(t flatbuffers.Table, slot int, what string) error {
	_, _, err := c.vector(t, slot, 1, what)
	return err
}

// tables checks a vector of tables and visits each.
func (c *fbCheck) tables(t flatbuffers.Table, slot int, what string, visit func(flatbuffers.Table) error) error {
	start, n, err := c.vector(t, slot, 4, what)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		et, err := c.table(start+4*i, what)
		if err != nil {
			return err
		}
		if err := visit(et); err != nil {
			return err
		}
	}
	return nil
}

// CheckStreamHead validates the schema message at the start of an Arrow
// IPC stream, for the same reason as CheckFooter: arrow-go would trust its
// vector lengths. Malformed bytes are corruption errors (package corrupt),
// as for CheckFooter.
func CheckStreamHead(r io.ReaderAt, size int64) error {
	var head [8]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return corrupt.Errorf("too short for an Arrow IPC stream: %w", err)
	}
	off, n := int64(8), int64(int32(binary.LittleEndian.Uint32(head[4:])))
	if binary.LittleEndian.Uint32(head[:4]) != 0xFFFFFFFF { // pre-1.0 streams: no continuation marker
		off, n = 4, int64(int32(binary.LittleEndian.Uint32(head[:4])))
	}
	if n < 4 || n > size-off {
		return corrupt.Errorf("schema message length %d does not fit a %d-byte stream", n, size)
	}
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, off); err != nil {
		return err
	}
	return checkMessageBytes(buf)
}

func checkMessageBytes(buf []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed schema message: %v", r)
		}
		err = corrupt.Mark(err) // whatever fails in here is the bytes' fault
	}()
	c := &fbCheck{buf: buf}
	msg, err := c.table(0, "message")
	if err != nil {
		return err
	}
	// Message: 1 header_type (1 = Schema), 2 header, 4 custom_metadata.
	if c.u8(msg, 1) != 1 {
		return fmt.Errorf("the first message of the stream is not a schema")
	}
	if err := c.keyValues(msg, 4); err != nil {
		return err
	}
	schema, ok, err := c.child(msg, 2, "schema")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("schema message has no schema")
	}
	return c.schema(schema)
}
