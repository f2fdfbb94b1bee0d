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
// those one-group files here into the file it writes: each group's column
// chunks are copied as they are, and the footer and the page index are
// rewritten with the offsets shifted to where the chunks now lie. The
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

// groupJoiner writes a Parquet file from one-row-group files appended in
// order. Its footer is the template's (schema, key-value metadata, column
// orders, writer) with the appended groups.
type groupJoiner struct {
	w        io.Writer
	pos      int64 // bytes written to w
	template *format.FileMetaData
	groups   []format.RowGroup
	// Per group, per column: the column index as the group's file holds
	// it (it has no offsets), and the offset index, shifted.
	colIndex [][][]byte
	offIndex [][]format.OffsetIndex
	err      error
}

// newGroupJoiner writes the file's opening magic to w; template is the
// footer of a file of no row groups written with the file's schema and
// properties.
func newGroupJoiner(w io.Writer, template *format.FileMetaData) *groupJoiner {
	j := &groupJoiner{w: w, template: template}
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

// append copies the row group of the one-group Parquet file b after those
// appended before it.
func (j *groupJoiner) append(b []byte) error {
	if j.err != nil {
		return j.err
	}
	md, err := footerOf(b)
	if err != nil {
		return err
	}
	if len(md.RowGroups) != 1 {
		return fmt.Errorf("a row group's file holds %d row groups", len(md.RowGroups))
	}
	rg := md.RowGroups[0]
	// The group's chunks lie end to end after the magic; the page index
	// and the footer follow them.
	end := int64(len(parquetMagic))
	for i := range rg.Columns {
		cm := &rg.Columns[i].MetaData
		if cm.BloomFilterOffset != 0 {
			return fmt.Errorf("column %d: a bloom filter, which the join does not copy", i)
		}
		start := chunkStart(cm)
		if start != end || cm.TotalCompressedSize < 0 || start+cm.TotalCompressedSize > int64(len(b)) {
			return fmt.Errorf("column %d: chunk of %d bytes at %d, want it at %d", i, cm.TotalCompressedSize, start, end)
		}
		end = start + cm.TotalCompressedSize
	}
	shift := j.pos - int64(len(parquetMagic))
	colIndex := make([][]byte, len(rg.Columns))
	offIndex := make([]format.OffsetIndex, len(rg.Columns))
	for i := range rg.Columns {
		cc := &rg.Columns[i]
		if cc.ColumnIndexLength > 0 {
			lo := cc.ColumnIndexOffset
			if lo < end || lo+int64(cc.ColumnIndexLength) > int64(len(b)) {
				return fmt.Errorf("column %d: column index at %d outside the file", i, lo)
			}
			colIndex[i] = bytes.Clone(b[lo : lo+int64(cc.ColumnIndexLength)])
		}
		if cc.OffsetIndexLength > 0 {
			lo := cc.OffsetIndexOffset
			if lo < end || lo+int64(cc.OffsetIndexLength) > int64(len(b)) {
				return fmt.Errorf("column %d: offset index at %d outside the file", i, lo)
			}
			if err := thrift.Unmarshal(&compact, b[lo:lo+int64(cc.OffsetIndexLength)], &offIndex[i]); err != nil {
				return fmt.Errorf("column %d: offset index: %w", i, err)
			}
			for k := range offIndex[i].PageLocations {
				offIndex[i].PageLocations[k].Offset += shift
			}
		}
		cc.ColumnIndexOffset, cc.ColumnIndexLength = 0, 0 // set by close
		cc.OffsetIndexOffset, cc.OffsetIndexLength = 0, 0
		cc.FileOffset += shift
		cm := &cc.MetaData
		cm.DataPageOffset += shift
		if cm.DictionaryPageOffset != 0 {
			cm.DictionaryPageOffset += shift
		}
		if cm.IndexPageOffset != 0 {
			cm.IndexPageOffset += shift
		}
	}
	rg.FileOffset += shift
	rg.Ordinal = int16(len(j.groups)) // wraps past 32767 groups, as other writers' do; only encryption reads it
	j.write(b[len(parquetMagic):end])
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
