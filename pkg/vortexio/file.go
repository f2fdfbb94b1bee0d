package vortexio

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
)

const (
	magic         = "VTXF"
	trailerLen    = 8
	maxPostscript = 65535 - trailerLen
	fileVersion   = 1
)

// Options bound what an untrusted file may make the reader allocate.
type Options struct {
	// MaxSegmentBytes caps one segment (metadata or data). Default 256 MiB.
	MaxSegmentBytes int64
	// MaxChunkRows caps the row count of one decoded flat layout, which is
	// what a single decode allocates for. Default 16 Mi rows (the reference
	// writer produces chunks of at most ~512 Ki rows).
	MaxChunkRows uint64
}

func (o *Options) fill() {
	if o.MaxSegmentBytes <= 0 {
		o.MaxSegmentBytes = 256 << 20
	}
	if o.MaxChunkRows == 0 {
		o.MaxChunkRows = 16 << 20
	}
}

type segmentSpec struct {
	offset   uint64
	length   uint32
	alignExp uint8
}

// File is an open Vortex file. It is safe for concurrent reads.
type File struct {
	r        io.ReaderAt
	size     int64
	opts     Options
	closer   io.Closer
	dtype    *DType
	schema   *arrow.Schema
	root     *Layout
	arrayIDs []string
	layIDs   []string
	segs     []segmentSpec
}

// Layout is one node of the file's layout tree.
type Layout struct {
	ID       string
	RowCount uint64
	Metadata []byte
	Children []*Layout
	Segments []uint32
	DType    *DType
}

// OpenFile opens a Vortex file on disk.
func OpenFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	vf, err := Open(f, st.Size(), Options{})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	vf.closer = f
	return vf, nil
}

// Close releases the underlying file when opened with OpenFile.
func (f *File) Close() error {
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}

// Open validates the trailer, postscript and footer of a Vortex file of the
// given size and parses its dtype and layout tree. Array data is decoded
// lazily by the read methods.
func Open(r io.ReaderAt, size int64, opts Options) (*File, error) {
	opts.fill()
	if size < int64(len(magic)+trailerLen) {
		return nil, corruptf("file of %d bytes is too small", size)
	}
	var tr [trailerLen]byte
	if _, err := r.ReadAt(tr[:], size-trailerLen); err != nil {
		return nil, fmt.Errorf("vortexio: read trailer: %w", err)
	}
	if string(tr[4:]) != magic {
		return nil, corruptf("missing trailing magic")
	}
	if v := binary.LittleEndian.Uint16(tr[0:]); v != fileVersion {
		return nil, unsupportedf("file format version %d", v)
	}
	psLen := int64(binary.LittleEndian.Uint16(tr[2:]))
	if psLen > maxPostscript || psLen+trailerLen+int64(len(magic)) > size {
		return nil, corruptf("postscript length %d invalid", psLen)
	}
	var head [4]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("vortexio: read magic: %w", err)
	}
	if string(head[:]) != magic {
		return nil, corruptf("missing leading magic")
	}
	ps := make([]byte, psLen)
	if _, err := r.ReadAt(ps, size-trailerLen-psLen); err != nil {
		return nil, fmt.Errorf("vortexio: read postscript: %w", err)
	}
	f := &File{r: r, size: size, opts: opts}
	psEnd := uint64(size - trailerLen - psLen)
	pst, err := fbRoot(ps)
	if err != nil {
		return nil, fmt.Errorf("postscript: %w", err)
	}
	readPS := func(slot int, required bool) ([]byte, error) {
		t, ok, err := pst.table(slot)
		if err != nil {
			return nil, err
		}
		if !ok {
			if required {
				return nil, corruptf("postscript lacks segment %d", slot)
			}
			return nil, nil
		}
		if t.has(3) || t.has(4) {
			return nil, unsupportedf("compressed or encrypted metadata segment")
		}
		off, err := t.u64(0, 0)
		if err != nil {
			return nil, err
		}
		ln, err := t.u32(1, 0)
		if err != nil {
			return nil, err
		}
		if off < uint64(len(magic)) || off > psEnd || uint64(ln) > psEnd-off {
			return nil, corruptf("metadata segment [%d,+%d) outside the file", off, ln)
		}
		return f.readBytes(off, uint64(ln))
	}
	dtBytes, err := readPS(0, false)
	if err != nil {
		return nil, fmt.Errorf("dtype segment: %w", err)
	}
	layBytes, err := readPS(1, true)
	if err != nil {
		return nil, fmt.Errorf("layout segment: %w", err)
	}
	footBytes, err := readPS(3, true)
	if err != nil {
		return nil, fmt.Errorf("footer segment: %w", err)
	}
	if dtBytes == nil {
		return nil, unsupportedf("file without embedded dtype")
	}
	if err := f.parseFooter(footBytes, psEnd); err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	dtt, err := fbRoot(dtBytes)
	if err != nil {
		return nil, fmt.Errorf("dtype: %w", err)
	}
	if f.dtype, err = parseDType(dtt, 0); err != nil {
		return nil, fmt.Errorf("dtype: %w", err)
	}
	lt, err := fbRoot(layBytes)
	if err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	budget := 1_000_000
	if f.root, err = f.parseLayout(lt, f.dtype, 0, &budget); err != nil {
		return nil, fmt.Errorf("layout: %w", err)
	}
	at, err := f.dtype.ArrowType()
	if err != nil {
		return nil, err
	}
	if st, ok := at.(*arrow.StructType); ok && f.dtype.Kind == KindStruct {
		f.schema = arrow.NewSchema(st.Fields(), nil)
	} else {
		f.schema = arrow.NewSchema([]arrow.Field{{Name: "value", Type: at, Nullable: f.dtype.nullable()}}, nil)
	}
	return f, nil
}

func (f *File) readBytes(off, n uint64) ([]byte, error) {
	if n > uint64(f.opts.MaxSegmentBytes) {
		return nil, corruptf("segment of %d bytes exceeds the limit", n)
	}
	if off > uint64(f.size) || n > uint64(f.size)-off {
		return nil, corruptf("segment [%d,+%d) outside the file", off, n)
	}
	buf := alignedBytes(int(n))
	if _, err := f.r.ReadAt(buf, int64(off)); err != nil && !(err == io.EOF && n == 0) {
		return nil, fmt.Errorf("vortexio: read [%d,+%d): %w", off, n, err)
	}
	return buf, nil
}

func (f *File) parseFooter(b []byte, dataEnd uint64) error {
	t, err := fbRoot(b)
	if err != nil {
		return err
	}
	for slot, dst := range []*[]string{&f.arrayIDs, &f.layIDs} {
		specs, err := t.tables(slot)
		if err != nil {
			return err
		}
		for _, s := range specs {
			id, err := s.str(0)
			if err != nil {
				return err
			}
			*dst = append(*dst, id)
		}
	}
	if !t.has(2) {
		return corruptf("footer has no segment map")
	}
	n, start, err := t.vector(2, 16)
	if err != nil {
		return err
	}
	f.segs = make([]segmentSpec, n)
	prev := uint64(0)
	for i := 0; i < n; i++ {
		p := start + 16*i
		s := segmentSpec{
			offset:   binary.LittleEndian.Uint64(b[p:]),
			length:   binary.LittleEndian.Uint32(b[p+8:]),
			alignExp: b[p+12],
		}
		if b[p+13] != 0 || b[p+14] != 0 || b[p+15] != 0 {
			return unsupportedf("compressed or encrypted data segment %d", i)
		}
		if s.offset < prev {
			return corruptf("segment offsets are not ordered")
		}
		if s.offset > dataEnd || uint64(s.length) > dataEnd-s.offset {
			return corruptf("segment %d [%d,+%d) outside the data area", i, s.offset, s.length)
		}
		prev = s.offset
		f.segs[i] = s
	}
	return nil
}

const maxLayoutDepth = 64

func (f *File) parseLayout(t fbTable, dt *DType, depth int, budget *int) (*Layout, error) {
	if depth > maxLayoutDepth {
		return nil, corruptf("layout nested deeper than %d", maxLayoutDepth)
	}
	if *budget--; *budget < 0 {
		return nil, corruptf("too many layouts")
	}
	enc, err := t.u16(0, 0)
	if err != nil {
		return nil, err
	}
	if int(enc) >= len(f.layIDs) {
		return nil, corruptf("layout encoding index %d out of range", enc)
	}
	l := &Layout{ID: f.layIDs[enc], DType: dt}
	if l.RowCount, err = t.u64(1, 0); err != nil {
		return nil, err
	}
	if l.Metadata, err = t.bytes(2); err != nil {
		return nil, err
	}
	n, s, err := t.vector(4, 4)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		seg := binary.LittleEndian.Uint32(t.buf[s+4*i:])
		if int(seg) >= len(f.segs) {
			return nil, corruptf("layout references segment %d of %d", seg, len(f.segs))
		}
		l.Segments = append(l.Segments, seg)
	}
	kids, err := t.tables(3)
	if err != nil {
		return nil, err
	}
	kidTypes, err := f.childDTypes(l, dt, len(kids))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.ID, err)
	}
	for i, kt := range kids {
		k, err := f.parseLayout(kt, kidTypes[i], depth+1, budget)
		if err != nil {
			return nil, err
		}
		l.Children = append(l.Children, k)
	}
	return l, f.checkLayout(l)
}

// childDTypes derives the dtypes of a layout's children (they are not stored).
func (f *File) childDTypes(l *Layout, dt *DType, n int) ([]*DType, error) {
	out := make([]*DType, n)
	switch l.ID {
	case "vortex.flat":
		if n != 0 {
			return nil, corruptf("flat layout with children")
		}
	case "vortex.chunked":
		for i := range out {
			out[i] = dt
		}
	case "vortex.struct":
		if dt.Kind != KindStruct {
			return nil, corruptf("struct layout for dtype %s", dt)
		}
		k := 0
		if dt.Nullable {
			if n != len(dt.Fields)+1 {
				return nil, corruptf("nullable struct layout has %d children for %d fields", n, len(dt.Fields))
			}
			out[0] = boolNonNull
			k = 1
		} else if n != len(dt.Fields) {
			return nil, corruptf("struct layout has %d children for %d fields", n, len(dt.Fields))
		}
		copy(out[k:], dt.Fields)
	case "vortex.zoned", "vortex.stats":
		if n != 2 {
			return nil, corruptf("zoned layout with %d children", n)
		}
		// The zone table's dtype is not needed: zone maps are not read.
		out[0], out[1] = dt, &DType{Kind: KindNull, Nullable: true}
	case "vortex.dict":
		if n != 2 {
			return nil, corruptf("dict layout with %d children", n)
		}
		m, err := pbDecode(l.Metadata)
		if err != nil {
			return nil, err
		}
		cp := PType(m.uint(1))
		if !cp.valid() || !cp.isUnsigned() {
			return nil, corruptf("dict codes ptype %d", cp)
		}
		nullable := dt.nullable()
		if m.has(2) {
			nullable = m.uint(2) != 0
		}
		out[0], out[1] = dt, primDType(cp, nullable)
	default:
		return nil, unsupportedf("layout %q", l.ID)
	}
	return out, nil
}

func (f *File) checkLayout(l *Layout) error {
	switch l.ID {
	case "vortex.flat":
		if len(l.Segments) != 1 {
			return corruptf("flat layout with %d segments", len(l.Segments))
		}
	case "vortex.chunked":
		var sum uint64
		for _, c := range l.Children {
			sum += c.RowCount
			if sum < c.RowCount {
				return corruptf("chunk row counts overflow")
			}
		}
		if sum != l.RowCount {
			return corruptf("chunked layout rows %d != sum of chunks %d", l.RowCount, sum)
		}
	case "vortex.struct":
		for _, c := range l.Children {
			if c.RowCount != l.RowCount {
				return corruptf("struct field has %d rows, struct %d", c.RowCount, l.RowCount)
			}
		}
	case "vortex.zoned", "vortex.stats":
		if l.Children[0].RowCount != l.RowCount {
			return corruptf("zoned data has %d rows, layout %d", l.Children[0].RowCount, l.RowCount)
		}
	case "vortex.dict":
		if l.Children[1].RowCount != l.RowCount {
			return corruptf("dict codes have %d rows, layout %d", l.Children[1].RowCount, l.RowCount)
		}
	}
	return nil
}

// Schema is the file's dtype as an Arrow schema. A non-struct root becomes a
// single field named "value".
func (f *File) Schema() *arrow.Schema { return f.schema }

// DType is the file's Vortex dtype.
func (f *File) DType() *DType { return f.dtype }

// NumRows is the number of rows in the file.
func (f *File) NumRows() int64 { return int64(f.root.RowCount) }

// Root is the root of the layout tree.
func (f *File) Root() *Layout { return f.root }

// segment reads data segment i.
func (f *File) segment(i uint32) ([]byte, error) {
	s := f.segs[i]
	return f.readBytes(s.offset, uint64(s.length))
}
