package export

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// The portable copy encodes its row groups in parallel, each as a Parquet
// file of its own (arrow-go's writer encodes one row group at a time, and
// a group's value column alone is more than half of its work), and joins
// those one-group files here into the file it writes, with the chunks of
// the columns that are runs per series (runchunk.go): each column chunk is
// copied as it is, and the footer and the page index are rewritten with
// the offsets shifted to where the chunks now lie. The
// footer's Thrift structures are parquet-go's format package (arrow-go
// keeps its own internal).

// parquetMagic opens and closes every Parquet file.
const parquetMagic = "PAR1"

var compact thrift.CompactProtocol

// footerOf decodes the footer of the Parquet file in b.
func footerOf(b []byte) (*format.FileMetaData, error) {
	n := len(b)
	if n < 2*len(parquetMagic)+4 || string(b[:4]) != parquetMagic || string(b[n-4:]) != parquetMagic {
		return nil, fmt.Errorf("not a Parquet file (%d bytes)", n)
	}
	size := int(binary.LittleEndian.Uint32(b[n-8:]))
	if size > n-12 {
		return nil, fmt.Errorf("footer of %d bytes in a file of %d", size, n)
	}
	md := new(format.FileMetaData)
	if err := thrift.Unmarshal(&compact, b[n-8-size:n-8], md); err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	return md, nil
}

// chunk is one column chunk of a row group, ready to be placed in the
// file: its pages, its metadata with every offset counted from the
// chunk's first byte, and its page index (the column index as encoded,
// the offset index with page offsets from the chunk's first byte).
type chunk struct {
	pages    []byte
	meta     format.ColumnChunk
	hasDict  bool // meta's dictionary page offset is set (it may be 0 here)
	colIndex []byte
	offIndex format.OffsetIndex
}

// chunksOf splits the one-row-group Parquet file b into its column chunks
// (which alias b).
func chunksOf(b []byte) ([]chunk, error) {
	md, err := footerOf(b)
	if err != nil {
		return nil, err
	}
	if len(md.RowGroups) != 1 {
		return nil, fmt.Errorf("a row group's file holds %d row groups", len(md.RowGroups))
	}
	rg := md.RowGroups[0]
	out := make([]chunk, len(rg.Columns))
	for i := range rg.Columns {
		cc := rg.Columns[i]
		cm := &cc.MetaData
		if cm.BloomFilterOffset != 0 {
			return nil, fmt.Errorf("column %d: a bloom filter, which the join does not copy", i)
		}
		start := chunkStart(cm)
		if start < int64(len(parquetMagic)) || cm.TotalCompressedSize < 0 || start+cm.TotalCompressedSize > int64(len(b)) {
			return nil, fmt.Errorf("column %d: chunk of %d bytes at %d outside the file", i, cm.TotalCompressedSize, start)
		}
		c := chunk{pages: b[start : start+cm.TotalCompressedSize], hasDict: cm.DictionaryPageOffset != 0}
		if cc.ColumnIndexLength > 0 {
			lo := cc.ColumnIndexOffset
			if lo < 0 || lo+int64(cc.ColumnIndexLength) > int64(len(b)) {
				return nil, fmt.Errorf("column %d: column index at %d outside the file", i, lo)
			}
			c.colIndex = bytes.Clone(b[lo : lo+int64(cc.ColumnIndexLength)])
		}
		if cc.OffsetIndexLength > 0 {
			lo := cc.OffsetIndexOffset
			if lo < 0 || lo+int64(cc.OffsetIndexLength) > int64(len(b)) {
				return nil, fmt.Errorf("column %d: offset index at %d outside the file", i, lo)
			}
			if err := thrift.Unmarshal(&compact, b[lo:lo+int64(cc.OffsetIndexLength)], &c.offIndex); err != nil {
				return nil, fmt.Errorf("column %d: offset index: %w", i, err)
			}
			for k := range c.offIndex.PageLocations {
				c.offIndex.PageLocations[k].Offset -= start
			}
		}
		cc.ColumnIndexOffset, cc.ColumnIndexLength = 0, 0 // set when the file's page index is written
		cc.OffsetIndexOffset, cc.OffsetIndexLength = 0, 0
		cc.FileOffset -= start
		cm.DataPageOffset -= start
		if c.hasDict {
			cm.DictionaryPageOffset -= start
		}
		if cm.IndexPageOffset != 0 {
			cm.IndexPageOffset -= start
		}
		c.meta = cc
		out[i] = c
	}
	return out, nil
}

// groupJoiner writes a Parquet file from row groups given as column
// chunks, in order. Its footer is the template's (schema, key-value
// metadata, column orders, writer) with the groups.
type groupJoiner struct {
	w        io.Writer
	pos      int64 // bytes written to w
	template *format.FileMetaData
	sorting  []format.SortingColumn
	groups   []format.RowGroup
	// Per group, per column: the column index as encoded (it holds no
	// offsets) and the offset index, in file offsets.
	colIndex [][][]byte
	offIndex [][]format.OffsetIndex
	err      error
}

// newGroupJoiner writes the file's opening magic to w; template is the
// footer of a file of no row groups written with the file's schema and
// properties, sorting each row group's sorting columns.
func newGroupJoiner(w io.Writer, template *format.FileMetaData, sorting []format.SortingColumn) *groupJoiner {
	j := &groupJoiner{w: w, template: template, sorting: sorting}
	j.write([]byte(parquetMagic))
	return j
}

func (j *groupJoiner) write(b []byte) {
	if j.err != nil {
		return
	}
	n, err := j.w.Write(b)
	j.pos += int64(n)
	j.err = err
}

// chunkStart is where a column chunk's pages begin: its dictionary page
// when it has one, else its first data page.
func chunkStart(md *format.ColumnMetaData) int64 {
	if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < md.DataPageOffset {
		return md.DictionaryPageOffset
	}
	return md.DataPageOffset
}

// append writes a row group of rows rows whose column chunks are cols, in
// the schema's column order, after the groups appended before it (it
// shifts their offset indexes in place: a chunk is appended once). The
// row group's metadata is what arrow-go's writer records: its offset is
// its first chunk's, its sizes the sums of its chunks'.
func (j *groupJoiner) append(cols []chunk, rows int64) error {
	if j.err != nil {
		return j.err
	}
	rg := format.RowGroup{NumRows: rows, SortingColumns: j.sorting, Ordinal: int16(len(j.groups))} // wraps past 32767 groups, as other writers' do; only encryption reads it
	colIndex := make([][]byte, len(cols))
	offIndex := make([]format.OffsetIndex, len(cols))
	for i, c := range cols {
		shift := j.pos
		cc := c.meta
		cm := &cc.MetaData
		cc.FileOffset += shift
		cm.DataPageOffset += shift
		if c.hasDict {
			cm.DictionaryPageOffset += shift
		}
		if cm.IndexPageOffset != 0 {
			cm.IndexPageOffset += shift
		}
		if i == 0 {
			rg.FileOffset = cc.FileOffset
		}
		rg.TotalByteSize += cm.TotalUncompressedSize
		rg.TotalCompressedSize += cm.TotalCompressedSize
		colIndex[i] = c.colIndex
		offIndex[i] = c.offIndex // the chunk's own: shifted in place
		for k := range offIndex[i].PageLocations {
			offIndex[i].PageLocations[k].Offset += shift
		}
		rg.Columns = append(rg.Columns, cc)
		j.write(c.pages)
	}
	j.groups = append(j.groups, rg)
	j.colIndex = append(j.colIndex, colIndex)
	j.offIndex = append(j.offIndex, offIndex)
	return j.err
}

// close writes the page index (every column index, then every offset
// index) and the footer.
func (j *groupJoiner) close() error {
	for g := range j.groups {
		for i := range j.groups[g].Columns {
			if ci := j.colIndex[g][i]; ci != nil {
				j.groups[g].Columns[i].ColumnIndexOffset, j.groups[g].Columns[i].ColumnIndexLength = j.pos, int32(len(ci))
				j.write(ci)
			}
		}
	}
	for g := range j.groups {
		for i := range j.groups[g].Columns {
			oi := &j.offIndex[g][i]
			if len(oi.PageLocations) == 0 {
				continue
			}
			b, err := thrift.Marshal(&compact, oi)
			if err != nil {
				return err
			}
			j.groups[g].Columns[i].OffsetIndexOffset, j.groups[g].Columns[i].OffsetIndexLength = j.pos, int32(len(b))
			j.write(b)
		}
	}
	md := *j.template
	md.RowGroups = j.groups
	md.NumRows = 0
	for _, rg := range j.groups {
		md.NumRows += rg.NumRows
	}
	b, err := thrift.Marshal(&compact, &md)
	if err != nil {
		return err
	}
	j.write(b)
	j.write(binary.LittleEndian.AppendUint32(nil, uint32(len(b))))
	j.write([]byte(parquetMagic))
	return j.err
}
