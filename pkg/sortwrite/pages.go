package sortwrite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/energyscope/servingsnap/pkg/period"
)

// The page reader decodes the common shapes of a column chunk straight
// from its pages into the stores: fixed-width values (PLAIN or dictionary
// encoded) and dictionary-encoded strings, flat columns whose nulls are
// at most one definition level. It replaces, for those columns, pqarrow's
// path of building Arrow arrays (a dictionary builder that re-hashes every
// dictionary value, index and value buffers grown and zeroed per chunk)
// that the stores then copy: on a 15M-row lake that path was most of the
// read phase's CPU time and of the build's 4.7 GB of allocation.
//
// Anything else (another encoding, type or nesting, a null or unparsable
// period, a page it cannot make sense of) makes it give the column back
// with errSlow, and readUnit reads that column through pqarrow as before,
// so every message about bad input stays the general reader's. Whatever it
// wrote to the column's rows is overwritten then.

// Test hooks: pageReaderOff sends every column through pqarrow (the
// reference the page reader is compared with); onPaged is told each column
// chunk the page reader took.
var (
	pageReaderOff bool
	onPaged       func(column string)
)

// errSlow says the page reader does not take this column chunk.
var errSlow = errors.New("column chunk not for the page reader")

// pageTarget is where a column chunk's rows go: the period column or a
// store, from row lo of the table.
type pageTarget struct {
	period  bool    // the period column, into periods; else store
	periods []int32 // the period column's rows of the unit
	store   *store
	lo      int
	// perSeries: a string column checked for an attribute while read
	// (store.att): its codes are checked per series of the unit (by the
	// series column's local indices, kept in pageScratch) instead of
	// stored per row. keepSeries: the series column, whose local indices
	// are kept for that.
	perSeries  bool
	keepSeries bool
}

// pageScratch is per-call scratch for the decoded levels and indices.
type pageScratch struct {
	defs []uint32
	idx  []uint32
	// For checking columns per series (attrRead): the unit's series
	// column as local dictionary indices per row (seriesIdx), that
	// dictionary's global codes (seriesRemap; seriesOK once all of it is
	// kept, no null, no value twice), and tab, one entry per local
	// series (value code+1 or nullCode; 0: none yet), zero between
	// chunks. seen marks global codes while a dictionary is checked for
	// repeats (entries == seenGen).
	seriesIdx   []uint32
	seriesRemap []uint32
	seriesOK    bool
	tab         []uint32
	seen        []uint32
	seenGen     uint32
}

// keepSeries notes the series column's dictionary (global codes of its
// local indices): checking other columns by local index needs each
// series to have one index, so a dictionary that holds a value twice
// (Parquet does not forbid it) turns the per-series check off.
func (sc *pageScratch) keepSeries(remap []uint32, rows int) {
	sc.seriesOK = false
	sc.seenGen++
	if sc.seenGen == 0 { // wrapped: old marks could match
		clear(sc.seen)
		sc.seenGen = 1
	}
	for _, g := range remap {
		if int(g) >= len(sc.seen) {
			sc.seen = append(sc.seen, make([]uint32, int(g)+1-len(sc.seen)+len(sc.seen)/4)...)
		}
		if sc.seen[g] == sc.seenGen {
			return
		}
		sc.seen[g] = sc.seenGen
	}
	sc.seriesRemap = remap
	if cap(sc.seriesIdx) < rows {
		sc.seriesIdx = make([]uint32, rows)
	}
	sc.seriesIdx = sc.seriesIdx[:rows]
	if len(sc.tab) < len(remap) {
		sc.tab = make([]uint32, len(remap))
	}
	sc.seriesOK = true
}

func (sc *pageScratch) grow(n int) {
	if cap(sc.defs) < n {
		sc.defs = make([]uint32, n)
		sc.idx = make([]uint32, n)
	}
	sc.defs, sc.idx = sc.defs[:n], sc.idx[:n]
}

// pageWidth says whether the page reader takes a column of arrow type ft
// (as pqarrow reads it from this file) stored as col into dst, and the
// width in bytes of its values (0 for byte arrays).
func pageWidth(ft arrow.DataType, col *schema.Column, dst pageTarget) (int, bool) {
	if col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 {
		return 0, false
	}
	pt := col.PhysicalType()
	if dst.period {
		switch {
		case ft.ID() == arrow.DATE32 && pt == parquet.Types.Int32:
			return 4, true
		case ft.ID() == arrow.STRING && pt == parquet.Types.ByteArray:
			return 0, true
		}
		return 0, false
	}
	s := dst.store
	switch s.kind {
	case kindString:
		id := ft.ID()
		return 0, (id == arrow.STRING || id == arrow.BINARY) && pt == parquet.Types.ByteArray
	case kindFixed:
		if !arrow.TypeEqual(ft, s.col.Type) {
			return 0, false
		}
		// Only types whose Parquet values are the Arrow values bit for bit.
		switch {
		case ft.ID() == arrow.FLOAT64 && pt == parquet.Types.Double,
			ft.ID() == arrow.INT64 && pt == parquet.Types.Int64:
			return 8, s.width == 8
		case ft.ID() == arrow.FLOAT32 && pt == parquet.Types.Float,
			(ft.ID() == arrow.INT32 || ft.ID() == arrow.DATE32) && pt == parquet.Types.Int32:
			return 4, s.width == 4
		}
	}
	return 0, false
}

// columnChunk is one column chunk being decoded into a target.
type columnChunk struct {
	dst    pageTarget
	width  int // bytes per value; 0: byte array
	maxDef int16
	rows   int // rows of the chunk (the row group's)
	done   int // rows decoded so far
	sc     *pageScratch

	// The dictionary, once its page is read: remap (strings: global
	// codes), days (text periods: parsed, bad[i] if entry i is not a
	// period) or raw (fixed width: the values' bytes).
	haveDict bool
	dictN    int
	remap    []uint32
	days     []int32
	bad      []bool
	raw      []byte
}

// readChunkPages decodes column leaf of row group rg (rows rows) into dst.
func readChunkPages(rg *file.RowGroupReader, leaf int, width int, rows int, dst pageTarget, sc *pageScratch) error {
	pr, err := rg.GetColumnPageReader(leaf)
	if err != nil {
		return errSlow
	}
	defer pr.Close()
	c := &columnChunk{dst: dst, width: width, maxDef: rg.MetaData().Schema.Column(leaf).MaxDefinitionLevel(), rows: rows, sc: sc}
	if dst.perSeries {
		defer clear(sc.tab[:len(sc.seriesRemap)]) // zeros for the next chunk
	}
	if dst.keepSeries {
		sc.seriesOK = false // until its dictionary is read
	}
	for pr.Next() {
		if err := c.page(pr.Page()); err != nil {
			return err
		}
	}
	if pr.Err() != nil || c.done != rows {
		return errSlow
	}
	if dst.perSeries {
		dst.store.att.merge(dst.lo, dst.lo+rows, sc.tab[:len(sc.seriesRemap)], sc.seriesRemap)
	}
	return nil
}

func (c *columnChunk) page(p file.Page) error {
	switch p := p.(type) {
	case *file.DictionaryPage:
		return c.dictionary(p)
	case *file.DataPageV1:
		if len(p.Data()) != int(p.UncompressedSize()) { // a streamed page holds only its levels
			return errSlow
		}
		b := p.Data()
		var defs []byte
		if c.maxDef > 0 {
			if p.DefinitionLevelEncoding() != parquet.Encodings.RLE || len(b) < 4 {
				return errSlow
			}
			n := binary.LittleEndian.Uint32(b)
			if uint64(n) > uint64(len(b)-4) {
				return errSlow
			}
			defs, b = b[4:4+n], b[4+n:]
		}
		return c.data(int(p.NumValues()), defs, parquet.Encoding(p.Encoding()), b)
	case *file.DataPageV2:
		b := p.Data()
		if len(b) != int(p.UncompressedSize()) || p.RepetitionLevelByteLen() != 0 {
			return errSlow
		}
		n := int(p.DefinitionLevelByteLen())
		if n < 0 || n > len(b) || (c.maxDef == 0 && n != 0) {
			return errSlow
		}
		var defs []byte
		if c.maxDef > 0 {
			defs = b[:n]
		}
		return c.data(int(p.NumValues()), defs, parquet.Encoding(p.Encoding()), b[n:])
	}
	return nil // index pages and the like hold no rows
}

// dictionary reads a dictionary page (PLAIN values).
func (c *columnChunk) dictionary(p *file.DictionaryPage) error {
	enc := parquet.Encoding(p.Encoding())
	if c.haveDict || (enc != parquet.Encodings.Plain && enc != parquet.Encodings.PlainDict) {
		return errSlow
	}
	n := int(p.NumValues())
	b := p.Data()
	if n < 0 {
		return errSlow
	}
	c.haveDict, c.dictN = true, n
	if c.width > 0 {
		if len(b) < n*c.width {
			return errSlow
		}
		c.raw = append(c.raw[:0], b[:n*c.width]...)
		return nil
	}
	// Byte arrays: a 4-byte little-endian length before each value. The
	// strings alias the page buffer, reused by the next page: they are
	// interned (copied) or parsed here.
	if n > len(b)/4 { // a count the page cannot hold: do not allocate it
		return errSlow
	}
	local := make([]string, n)
	for i := range local {
		if len(b) < 4 {
			return errSlow
		}
		l := binary.LittleEndian.Uint32(b)
		if uint64(l) > uint64(len(b)-4) {
			return errSlow
		}
		local[i] = unsafeString(b[4 : 4+l])
		b = b[4+l:]
	}
	if c.dst.period {
		c.days, c.bad = make([]int32, n), make([]bool, n)
		for i, v := range local {
			d, err := period.Parse(v)
			c.days[i], c.bad[i] = d, err != nil
		}
		return nil
	}
	c.remap = make([]uint32, n)
	if err := c.dst.store.dict.internLocal(local, c.remap); err != nil {
		return err // too many values: the general reader says the same
	}
	if c.dst.keepSeries {
		c.sc.keepSeries(c.remap, c.rows)
	}
	return nil
}

// data decodes one data page of n rows: defs are its RLE definition
// levels (nil for a required column), vals its values.
func (c *columnChunk) data(n int, defs []byte, enc parquet.Encoding, vals []byte) error {
	if n < 0 || n > c.rows-c.done {
		return errSlow
	}
	c.sc.grow(n)
	valid := c.sc.defs // 1 = a value, 0 = null
	nonNull := n
	if c.maxDef > 0 {
		if decodeHybrid(defs, bits.Len16(uint16(c.maxDef)), valid) != nil {
			return errSlow
		}
		nonNull = 0
		for _, d := range valid {
			if d > 1 {
				return errSlow
			}
			nonNull += int(d)
		}
	}
	hasNulls := nonNull < n
	row := c.dst.lo + c.done
	switch enc {
	case parquet.Encodings.Plain:
		if c.width == 0 || len(vals) < nonNull*c.width {
			return errSlow // plain byte arrays: the general reader
		}
		if c.dst.period {
			if hasNulls {
				return errSlow
			}
			copy(int32Bytes(c.dst.periods[c.done:c.done+n]), vals[:n*4])
		} else {
			c.dst.store.putFixed(row, n, valid, hasNulls, vals)
		}
	case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
		idx := c.sc.idx[:nonNull]
		if nonNull > 0 { // a page of nulls may omit even the bit width
			if !c.haveDict || len(vals) < 1 || decodeHybrid(vals[1:], int(vals[0]), idx) != nil {
				return errSlow
			}
		}
		for _, k := range idx {
			if int(k) >= c.dictN {
				return errSlow
			}
		}
		if err := c.putIndices(row, n, valid, hasNulls, idx); err != nil {
			return err
		}
	default:
		return errSlow
	}
	c.done += n
	return nil
}

// putIndices stores n rows from dictionary indices (one per valid row).
func (c *columnChunk) putIndices(row, n int, valid []uint32, hasNulls bool, idx []uint32) error {
	switch {
	case c.dst.period:
		if hasNulls {
			return errSlow
		}
		out := c.dst.periods[c.done : c.done+n]
		if c.days == nil { // date32 dictionary
			raw := asSlice[int32](c.raw)
			for i, k := range idx {
				out[i] = raw[k]
			}
			return nil
		}
		days, bad := c.days, c.bad // locals: the loop keeps them in registers
		for i, k := range idx {
			if bad[k] {
				return errSlow
			}
			out[i] = days[k]
		}
		return nil
	case c.width == 0 && c.dst.perSeries:
		if !checkRows(c.sc.tab, c.sc.seriesIdx[c.done:c.done+n], c.remap, valid, hasNulls, idx) {
			// A series with two values: not an attribute, and this
			// chunk's rows go to the store (through pqarrow).
			c.dst.store.att.conflict.Store(true)
			return errSlow
		}
		return nil
	case c.width == 0:
		c.dst.store.att.notePerRow()
		mapCodes(c.dst.store.codes[row:row+n], c.remap, valid, hasNulls, idx)
		if c.dst.keepSeries {
			if hasNulls || !c.sc.seriesOK {
				c.sc.seriesOK = false
			} else {
				copy(c.sc.seriesIdx[c.done:c.done+n], idx)
			}
		}
		return nil
	}
	s := c.dst.store
	w := s.width
	fill(s.valid[row:row+n], valid, hasNulls)
	switch w {
	case 8:
		scatterDict(asSlice[uint64](s.data[row*8:(row+n)*8]), asSlice[uint64](c.raw), valid, hasNulls, idx)
	case 4:
		scatterDict(asSlice[uint32](s.data[row*4:(row+n)*4]), asSlice[uint32](c.raw), valid, hasNulls, idx)
	default:
		return errSlow
	}
	return nil
}

// mapCodes stores the global codes of a page's rows: remap of each index,
// nullCode for a null row.
func mapCodes(out, remap, valid []uint32, hasNulls bool, idx []uint32) {
	if !hasNulls {
		out = out[:len(idx)]
		for i, k := range idx {
			out[i] = remap[k]
		}
		return
	}
	j := 0
	for i, v := range valid {
		if v == 0 {
			out[i] = nullCode
			continue
		}
		out[i] = remap[idx[j]]
		j++
	}
}

// fill sets the validity bytes of a page's rows.
func fill(dst []byte, valid []uint32, hasNulls bool) {
	if !hasNulls {
		for i := range dst {
			dst[i] = 1
		}
		return
	}
	for i, v := range valid {
		dst[i] = byte(v)
	}
}

// scatterDict writes dictionary values to the valid rows and zero to null
// ones (null slots compare equal as raw bytes: see store.fill).
func scatterDict[T uint32 | uint64](out, dict []T, valid []uint32, hasNulls bool, idx []uint32) {
	if !hasNulls {
		for i, k := range idx {
			out[i] = dict[k]
		}
		return
	}
	j := 0
	for i, v := range valid {
		if v == 0 {
			out[i] = 0
			continue
		}
		out[i] = dict[idx[j]]
		j++
	}
}

// putFixed stores n rows of PLAIN fixed-width values (one per valid row).
func (s *store) putFixed(row, n int, valid []uint32, hasNulls bool, vals []byte) {
	w := s.width
	fill(s.valid[row:row+n], valid, hasNulls)
	dst := s.data[row*w : (row+n)*w]
	if !hasNulls {
		copy(dst, vals[:n*w])
		return
	}
	j := 0
	for i, v := range valid {
		if v == 0 {
			clear(dst[i*w : (i+1)*w])
			continue
		}
		copy(dst[i*w:(i+1)*w], vals[j*w:(j+1)*w])
		j++
	}
}

// int32Bytes views int32s as bytes.
func int32Bytes(v []int32) []byte { return arrow.Int32Traits.CastToBytes(v) }

// readPages reads what it can of unit u (a row group read whole, no rows
// deleted) with the page reader: the period column into t.periods and the
// stores' columns, rows [lo, lo+u.rows). It returns the fields it read;
// readUnit reads the others through pqarrow.
func (t *table) readPages(ctx context.Context, u unit, lo int, pField int, stores []*store) (map[int]bool, error) {
	in := u.in
	if pageReaderOff || in.records != nil || u.group >= len(in.rawRows) {
		return nil, nil
	}
	first, raw := in.rawFirst[u.group], in.rawRows[u.group]
	if raw != u.rows || len(in.deletedIn(first, first+raw)) > 0 {
		return nil, nil
	}
	type job struct {
		x    int
		dst  pageTarget
		name string
	}
	var jobs []job
	if pField >= 0 {
		jobs = append(jobs, job{pField, pageTarget{period: true, periods: t.periods[lo : lo+int(raw)]}, t.periodName()})
	}
	for _, s := range stores {
		if x := s.col.In[u.fileIdx]; x >= 0 && s.kind != kindNull {
			jobs = append(jobs, job{x, pageTarget{store: s, lo: lo}, s.col.Name})
		}
	}
	seriesX := t.series.col.In[u.fileIdx]
	checkAttrs := false
	for _, s := range t.others {
		checkAttrs = checkAttrs || s.att.perSeries()
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	pf, err := in.open(ctx, true, file.WithReadProps(pageReadProps()))
	if err != nil {
		return nil, nil // the general reader reports it
	}
	defer pf.Close()
	if u.group >= pf.NumRowGroups() {
		return nil, nil
	}
	rg := pf.RowGroup(u.group)
	if rg.NumRows() != raw {
		return nil, nil
	}
	sch := pf.MetaData().Schema
	done := map[int]bool{}
	sc := scratchPool.Get().(*pageScratch)
	defer scratchPool.Put(sc)
	sc.seriesOK = false
	for _, j := range jobs {
		leaf := in.proj.Leaf[j.x]
		if leaf < 0 || leaf >= sch.NumColumns() {
			continue
		}
		w, ok := pageWidth(in.Schema.Fields[j.x].Type, sch.Column(leaf), j.dst)
		if !ok {
			continue
		}
		if s := j.dst.store; s == t.series {
			j.dst.keepSeries = checkAttrs
		} else if s != nil && s.att.perSeries() && seriesX >= 0 && done[seriesX] && sc.seriesOK {
			// The unit's series column is read (its job comes first)
			// and kept: check this column per series.
			j.dst.perSeries = true
		}
		err := readChunkPages(rg, leaf, w, int(raw), j.dst, sc)
		if errors.Is(err, errSlow) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s row group %d: column %q: %w", in.Rel, u.group, j.name, err)
		}
		done[j.x] = true
		if onPaged != nil {
			onPaged(j.name)
		}
	}
	return done, nil
}
