package vortexio

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// anode is one parsed ArrayNode of a flat segment, with its buffers resolved.
type anode struct {
	enc  string
	meta []byte
	kids []*anode
	bufs [][]byte
}

const (
	maxArrayDepth = 64
	maxArrayNodes = 1 << 16
)

// parseFlat splits a flat segment into buffers and the array node tree.
func (f *File) parseFlat(seg []byte) (*anode, error) {
	if len(seg) < 4 {
		return nil, corruptf("flat segment of %d bytes", len(seg))
	}
	fbLen := uint64(binary.LittleEndian.Uint32(seg[len(seg)-4:]))
	if fbLen > uint64(len(seg)-4) {
		return nil, corruptf("array flatbuffer length %d exceeds segment", fbLen)
	}
	fbStart := len(seg) - 4 - int(fbLen)
	t, err := fbRoot(seg[fbStart : len(seg)-4])
	if err != nil {
		return nil, fmt.Errorf("array flatbuffer: %w", err)
	}
	nb, bs, err := t.vector(1, 8)
	if err != nil {
		return nil, err
	}
	bufs := make([][]byte, nb)
	pos := 0
	for i := 0; i < nb; i++ {
		e := t.buf[bs+8*i:]
		pad := int(binary.LittleEndian.Uint16(e))
		ln := int(binary.LittleEndian.Uint32(e[4:]))
		if e[3] != 0 {
			return nil, unsupportedf("compressed array buffer")
		}
		pos += pad
		if pos > fbStart || ln > fbStart-pos {
			return nil, corruptf("array buffer %d overruns segment", i)
		}
		bufs[i] = seg[pos : pos+ln : pos+ln]
		pos += ln
	}
	root, ok, err := t.table(0)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, corruptf("array without root node")
	}
	budget := maxArrayNodes
	return f.parseNode(root, bufs, 0, &budget)
}

func (f *File) parseNode(t fbTable, bufs [][]byte, depth int, budget *int) (*anode, error) {
	if depth > maxArrayDepth {
		return nil, corruptf("array nested deeper than %d", maxArrayDepth)
	}
	if *budget--; *budget < 0 {
		return nil, corruptf("too many array nodes")
	}
	enc, err := t.u16(0, 0)
	if err != nil {
		return nil, err
	}
	if int(enc) >= len(f.arrayIDs) {
		return nil, corruptf("array encoding index %d out of range", enc)
	}
	n := &anode{enc: f.arrayIDs[enc]}
	if n.meta, err = t.bytes(1); err != nil {
		return nil, err
	}
	cnt, s, err := t.vector(3, 2)
	if err != nil {
		return nil, err
	}
	if cnt > 0 {
		n.bufs = make([][]byte, 0, min(cnt, len(bufs)))
	}
	for i := 0; i < cnt; i++ {
		bi := int(binary.LittleEndian.Uint16(t.buf[s+2*i:]))
		if bi >= len(bufs) {
			return nil, corruptf("array node references buffer %d of %d", bi, len(bufs))
		}
		n.bufs = append(n.bufs, bufs[bi])
	}
	kids, err := t.tables(2)
	if err != nil {
		return nil, err
	}
	if len(kids) > 0 {
		n.kids = make([]*anode, 0, len(kids))
	}
	for _, kt := range kids {
		k, err := f.parseNode(kt, bufs, depth+1, budget)
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, k)
	}
	return n, nil
}

// decoder decodes array nodes into vecs.
type decoder struct {
	maxRows uint64
	ar      *arena // scratch of the read (ReadRange); nil: Go's heap
}

func (d *decoder) checkLen(n uint64, what string) (int, error) {
	if n > d.maxRows {
		return 0, corruptf("%s length %d exceeds the limit %d", what, n, d.maxRows)
	}
	return int(n), nil
}

func (d *decoder) validity(nd *anode, dt *DType, n int, k int) ([]byte, bool, error) {
	if k >= len(nd.kids) {
		return nil, false, nil
	}
	if !dt.nullable() {
		return nil, false, corruptf("%s: validity child on non-nullable %s", nd.enc, dt)
	}
	v, err := d.decode(nd.kids[k], boolNonNull, n)
	if err != nil {
		return nil, false, fmt.Errorf("validity: %w", err)
	}
	if v.nulls {
		return nil, false, corruptf("null validity")
	}
	return v.data, true, nil
}

func (d *decoder) expectKids(nd *anode, lo, hi int) error {
	if len(nd.kids) < lo || len(nd.kids) > hi {
		return corruptf("%s: %d children, want %d..%d", nd.enc, len(nd.kids), lo, hi)
	}
	return nil
}

func (d *decoder) expectBufs(nd *anode, want int) error {
	if len(nd.bufs) != want {
		return corruptf("%s: %d buffers, want %d", nd.enc, len(nd.bufs), want)
	}
	return nil
}

// decode decodes node nd as an array of dtype dt with n rows.
func (d *decoder) decode(nd *anode, dt *DType, n int) (*vec, error) {
	if uint64(n) > d.maxRows {
		return nil, corruptf("array of %d rows exceeds the limit", n)
	}
	v, err := d.decode1(nd, dt, n)
	if err != nil {
		return nil, err
	}
	if v.n != n {
		return nil, corruptf("%s decoded %d rows, want %d", nd.enc, v.n, n)
	}
	v.dt = dt
	return v, nil
}

func (d *decoder) decode1(nd *anode, dt *DType, n int) (*vec, error) {
	if v, ok, err := d.ranged(nd, dt, n, 0, n); ok {
		return v, err
	}
	sd := storage(dt)
	switch nd.enc {
	case "vortex.null":
		if sd.Kind != KindNull && !dt.nullable() {
			return nil, corruptf("vortex.null for non-nullable %s", dt)
		}
		return allNull(dt, n), nil
	case "vortex.primitive":
		return d.decodePrimitive(nd, dt, n)
	case "vortex.varbinview":
		return d.decodeVarBinView(nd, dt, n)
	case "vortex.varbin":
		return d.decodeVarBin(nd, dt, n)
	case "vortex.struct":
		return d.decodeStruct(nd, dt, n)
	case "vortex.chunked":
		return d.decodeChunked(nd, dt, n)
	case "fastlanes.rle":
		return d.decodeRLE(nd, dt, n)
	case "vortex.zigzag":
		return d.decodeZigZag(nd, dt, n)
	case "vortex.sparse":
		return d.decodeSparse(nd, dt, n)
	case "vortex.alprd":
		return d.decodeALPRD(nd, dt, n)
	case "vortex.fsst":
		return d.decodeFSST(nd, dt, n)
	case "vortex.datetimeparts":
		return d.decodeDateTimeParts(nd, dt, n)
	case "vortex.onpair":
		return d.decodeOnPair(nd, dt, n)
	case "vortex.zstd":
		return d.decodeZstd(nd, dt, n)
	case "vortex.pco":
		return d.decodePco(nd, dt, n)
	}
	return nil, unsupportedf("array encoding %q", nd.enc)
}

func (d *decoder) decodePrimitive(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive {
		return nil, corruptf("vortex.primitive for %s", dt)
	}
	if err := d.expectBufs(nd, 1); err != nil {
		return nil, err
	}
	if err := d.expectKids(nd, 0, 1); err != nil {
		return nil, err
	}
	w := sd.PType.Width()
	if len(nd.bufs[0]) != n*w {
		return nil, corruptf("vortex.primitive buffer of %d bytes for %d × %s", len(nd.bufs[0]), n, sd.PType)
	}
	v := &vec{dt: dt, n: n, data: ensureAligned(nd.bufs[0], 8)}
	var err error
	v.valid, _, err = d.validity(nd, dt, n, 0)
	return v, err
}

func (d *decoder) decodeVarBinView(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindUtf8 && sd.Kind != KindBinary {
		return nil, corruptf("vortex.varbinview for %s", dt)
	}
	if len(nd.bufs) < 1 {
		return nil, corruptf("vortex.varbinview without views")
	}
	if err := d.expectKids(nd, 0, 1); err != nil {
		return nil, err
	}
	views := nd.bufs[len(nd.bufs)-1]
	data := nd.bufs[:len(nd.bufs)-1]
	if len(views) != 16*n {
		return nil, corruptf("vortex.varbinview views of %d bytes for %d rows", len(views), n)
	}
	v := &vec{dt: dt, n: n}
	var err error
	if v.valid, _, err = d.validity(nd, dt, n, 0); err != nil {
		return nil, err
	}
	total := uint64(0)
	for i := 0; i < n; i++ {
		if v.valid == nil || bitGet(v.valid, i) {
			total += uint64(binary.LittleEndian.Uint32(views[16*i:]))
		}
	}
	if total > math.MaxInt32 {
		return nil, unsupportedf("string chunk larger than 2 GiB")
	}
	out := make([]byte, 0, total)
	v.offs = make([]int32, n+1)
	for i := 0; i < n; i++ {
		vw := views[16*i : 16*i+16]
		if v.valid == nil || bitGet(v.valid, i) {
			size := binary.LittleEndian.Uint32(vw)
			if size <= 12 {
				out = append(out, vw[4:4+size]...)
			} else {
				bi := binary.LittleEndian.Uint32(vw[8:])
				off := uint64(binary.LittleEndian.Uint32(vw[12:]))
				if int(bi) >= len(data) || off+uint64(size) > uint64(len(data[bi])) {
					return nil, corruptf("vortex.varbinview view %d points outside its buffer", i)
				}
				out = append(out, data[bi][off:off+uint64(size)]...)
			}
		}
		v.offs[i+1] = int32(len(out))
	}
	v.data = out
	if sd.Kind == KindUtf8 && !utf8.Valid(out) {
		return nil, corruptf("vortex.varbinview: invalid UTF-8")
	}
	return v, nil
}

func (d *decoder) decodeVarBin(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindUtf8 && sd.Kind != KindBinary {
		return nil, corruptf("vortex.varbin for %s", dt)
	}
	if err := d.expectBufs(nd, 1); err != nil {
		return nil, err
	}
	if err := d.expectKids(nd, 1, 2); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	op := PType(m.uint(1))
	if !op.valid() || !op.isInt() {
		return nil, corruptf("vortex.varbin offsets ptype %d", op)
	}
	ov, err := d.decode(nd.kids[0], primDType(op, false), n+1)
	if err != nil {
		return nil, err
	}
	offs, err := ov.indices(int64(len(nd.bufs[0]))+1, false)
	if err != nil {
		return nil, err
	}
	return d.fromOffsets(nd, dt, n, nd.bufs[0], offs, 1)
}

// fromOffsets builds a string vec from offsets into data, validity at kid k.
func (d *decoder) fromOffsets(nd *anode, dt *DType, n int, data []byte, offs []int64, k int) (*vec, error) {
	v := &vec{dt: dt, n: n, offs: make([]int32, n+1)}
	var err error
	if v.valid, _, err = d.validity(nd, dt, n, k); err != nil {
		return nil, err
	}
	base := offs[0]
	if offs[n]-base > math.MaxInt32 {
		return nil, unsupportedf("string chunk larger than 2 GiB")
	}
	for i := 1; i <= n; i++ {
		if offs[i] < offs[i-1] {
			return nil, corruptf("%s: decreasing offsets", nd.enc)
		}
		v.offs[i] = int32(offs[i] - base)
	}
	v.data = data[base:offs[n]]
	if storage(dt).Kind == KindUtf8 && !utf8.Valid(v.data) {
		return nil, corruptf("%s: invalid UTF-8", nd.enc)
	}
	return v, nil
}

func (d *decoder) decodeStruct(nd *anode, dt *DType, n int) (*vec, error) {
	if dt.Kind != KindStruct {
		return nil, corruptf("vortex.struct for %s", dt)
	}
	nf := len(dt.Fields)
	v := &vec{dt: dt, n: n}
	kids := nd.kids
	switch len(kids) {
	case nf:
	case nf + 1:
		valid, _, err := d.validity(&anode{enc: nd.enc, kids: kids[:1]}, dt, n, 0)
		if err != nil {
			return nil, err
		}
		v.valid = valid
		kids = kids[1:]
	default:
		return nil, corruptf("vortex.struct with %d children for %d fields", len(kids), nf)
	}
	for i, f := range dt.Fields {
		k, err := d.decode(kids[i], f, n)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", dt.Names[i], err)
		}
		v.kids = append(v.kids, k)
	}
	return v, nil
}

func (d *decoder) decodeConstant(nd *anode, dt *DType, n int) (*vec, error) {
	if err := d.expectBufs(nd, 1); err != nil {
		return nil, err
	}
	s, err := parseScalar(nd.bufs[0])
	if err != nil {
		return nil, err
	}
	return scalarRepeat(s, dt, n)
}

// takeCodes gathers values by code; null codes give null rows.
func takeCodes(values, codes *vec, dt *DType) (*vec, error) {
	idx, err := codes.indices(int64(values.n), true)
	if err != nil {
		return nil, err
	}
	return take(values, idx, dt)
}

func (d *decoder) decodeChunked(nd *anode, dt *DType, n int) (*vec, error) {
	if len(nd.kids) < 1 {
		return nil, corruptf("vortex.chunked without offsets")
	}
	nc := len(nd.kids) - 1
	ov, err := d.decode(nd.kids[0], primDType(U64, false), nc+1)
	if err != nil {
		return nil, err
	}
	offs, err := ov.indices(int64(n)+1, false)
	if err != nil {
		return nil, err
	}
	if offs[0] != 0 || offs[nc] != int64(n) {
		return nil, corruptf("vortex.chunked offsets do not cover %d rows", n)
	}
	var parts []*vec
	for i := 0; i < nc; i++ {
		if offs[i+1] < offs[i] {
			return nil, corruptf("vortex.chunked decreasing offsets")
		}
		p, err := d.decode(nd.kids[i+1], dt, int(offs[i+1]-offs[i]))
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	if nc == 0 {
		return allNull(dt, 0).materialize(), nil
	}
	return concat(dt, parts)
}
