package export

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// A row group's series_id and attribute columns hold one value per series,
// repeated over the series' rows. Handed to arrow-go's writer they cost a
// dictionary index per row, checked, copied and run-length encoded again
// (a fifth of the copy's CPU). Their column chunks are written here
// instead, from the runs themselves: a dictionary page of the group's
// distinct values and one data page whose definition levels and indices
// are RLE runs, one per series (or per stretch of series sharing a
// value), with the statistics and page index arrow-go would write.

// runColumn is a column constant over each series' rows: its distinct
// values (dict, in order of first use) and, for each series of the group,
// the position of its value in dict, -1 for a null.
type runColumn struct {
	dict  arrow.Array
	codes []int32
}

func (c *runColumn) release() { c.dict.Release() }

// runsOf is perSeries (a value per series) as a runColumn.
func runsOf(mem memory.Allocator, perSeries arrow.Array) (*runColumn, error) {
	n := perSeries.Len()
	codes := make([]int32, n)
	var keep []int
	// Each value once, keyed by its text (a string attribute's own bytes;
	// other types' text form: a group has few series).
	keyOf := perSeries.ValueStr
	if s, ok := perSeries.(*array.String); ok {
		keyOf = s.Value
	}
	seen := make(map[string]int32, n)
	for i := 0; i < n; i++ {
		if perSeries.IsNull(i) {
			codes[i] = -1
			continue
		}
		key := keyOf(i)
		k, ok := seen[key]
		if !ok {
			k = int32(len(keep))
			seen[key] = k
			keep = append(keep, i)
		}
		codes[i] = k
	}
	dict, err := takeRows(mem, perSeries, keep)
	if err != nil {
		return nil, err
	}
	return &runColumn{dict: dict, codes: codes}, nil
}

// runEncodable says whether a column of this type is written by
// encodeRunChunk (a Parquet BYTE_ARRAY); others go through arrow-go.
func runEncodable(t arrow.DataType) bool {
	return t.ID() == arrow.STRING || t.ID() == arrow.BINARY
}

// byteValues is the i-th value of a utf8 or binary array, as bytes.
func byteValues(a arrow.Array) (func(i int) []byte, error) {
	switch a := a.(type) {
	case *array.String:
		return func(i int) []byte { return []byte(a.Value(i)) }, nil
	case *array.Binary:
		return a.Value, nil
	}
	return nil, fmt.Errorf("values of type %s, not utf8 or binary", a.DataType())
}

// chunkWriter is what encodeRunChunk needs of the file's properties.
type chunkWriter struct {
	codec    compress.Codec
	level    int
	maxStats int
}

// encodeRunChunk writes c, series i of the group covering counts[i] rows,
// as a column chunk named name: a zstd-compressed dictionary page (PLAIN)
// and data page (RLE definition levels when nullable, then the RLE_DICTIONARY
// indices, one run per stretch of equal codes). Statistics and the column
// index hold the dictionary's smallest and largest values (bytewise, as
// for utf8) unless one is longer than the statistics limit.
func (cw *chunkWriter) encodeRunChunk(c *runColumn, counts []int, name string, nullable bool) (chunk, error) {
	if len(counts) != len(c.codes) {
		return chunk{}, fmt.Errorf("column %s: %d codes for %d series", name, len(c.codes), len(counts))
	}
	value, err := byteValues(c.dict)
	if err != nil {
		return chunk{}, fmt.Errorf("column %s: %w", name, err)
	}
	ndict := c.dict.Len()
	var plain []byte
	var lo, hi []byte
	for i := 0; i < ndict; i++ {
		v := value(i)
		plain = binary.LittleEndian.AppendUint32(plain, uint32(len(v)))
		plain = append(plain, v...)
		if i == 0 || bytes.Compare(v, lo) < 0 {
			lo = v
		}
		if i == 0 || bytes.Compare(v, hi) > 0 {
			hi = v
		}
	}
	width := 0 // arrow-go's: 1 for a single value
	switch {
	case ndict == 1:
		width = 1
	case ndict > 1:
		width = bits.Len32(uint32(ndict - 1))
	}
	var rows, nulls int64
	var defs, idx rleRuns
	for i, k := range c.codes {
		n := int64(counts[i])
		rows += n
		if k < 0 {
			nulls += n
			defs.add(0, n)
			continue
		}
		defs.add(1, n)
		idx.add(uint64(k), n)
	}
	var page []byte
	if nullable {
		levels := defs.encode(nil, 1)
		page = binary.LittleEndian.AppendUint32(page, uint32(len(levels)))
		page = append(page, levels...)
	}
	page = append(page, byte(width))
	page = idx.encode(page, width)

	out := chunk{hasDict: true} // the dictionary page at the chunk's start
	dictHeader := format.PageHeader{Type: format.DictionaryPage,
		DictionaryPageHeader: thrift.New(format.DictionaryPageHeader{NumValues: int32(ndict), Encoding: format.Plain})}
	_, dictRaw, err := cw.appendPage(&out.pages, &dictHeader, plain)
	if err != nil {
		return chunk{}, fmt.Errorf("column %s: %w", name, err)
	}
	dataOffset := int64(len(out.pages))
	dataHeader := format.PageHeader{Type: format.DataPage,
		DataPageHeader: thrift.New(format.DataPageHeader{NumValues: int32(rows), Encoding: format.RLEDictionary,
			DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE})}
	dataLen, dataRaw, err := cw.appendPage(&out.pages, &dataHeader, page)
	if err != nil {
		return chunk{}, fmt.Errorf("column %s: %w", name, err)
	}
	// As arrow-go: a bound longer than the statistics limit is left out,
	// each on its own, and a page's column index needs both.
	stats := format.Statistics{NullCount: nulls}
	if ndict > 0 && len(lo) <= cw.maxStats {
		stats.MinValue = bytes.Clone(lo)
	}
	if ndict > 0 && len(hi) <= cw.maxStats {
		stats.MaxValue = bytes.Clone(hi)
	}
	out.meta = format.ColumnChunk{
		FileOffset: 0,
		MetaData: format.ColumnMetaData{
			Type:                  format.ByteArray,
			Encoding:              []format.Encoding{format.RLEDictionary, format.Plain, format.RLE},
			PathInSchema:          []string{name},
			Codec:                 format.Zstd,
			NumValues:             rows,
			TotalUncompressedSize: dictRaw + dataRaw,
			TotalCompressedSize:   int64(len(out.pages)),
			DataPageOffset:        dataOffset,
			DictionaryPageOffset:  0,
			Statistics:            stats,
			EncodingStats: []format.PageEncodingStats{
				{PageType: format.DictionaryPage, Encoding: format.Plain, Count: 1},
				{PageType: format.DataPage, Encoding: format.RLEDictionary, Count: 1},
			},
		},
	}
	ci := format.ColumnIndex{NullPages: []bool{ndict == 0}, MinValues: [][]byte{{}}, MaxValues: [][]byte{{}},
		BoundaryOrder: format.Unordered, NullCounts: []int64{nulls}}
	if ndict > 0 {
		ci.MinValues[0], ci.MaxValues[0], ci.BoundaryOrder = stats.MinValue, stats.MaxValue, format.Ascending
	}
	if ndict == 0 || (stats.MinValue != nil && stats.MaxValue != nil) {
		if out.colIndex, err = thrift.Marshal(&compact, &ci); err != nil {
			return chunk{}, fmt.Errorf("column %s: column index: %w", name, err)
		}
	}
	out.offIndex = format.OffsetIndex{PageLocations: []format.PageLocation{{Offset: dataOffset, CompressedPageSize: int32(dataLen)}}}
	return out, nil
}

// appendPage appends header and body, compressed, to *pages; it returns
// the page's length there and its length uncompressed (each with the
// header).
func (cw *chunkWriter) appendPage(pages *[]byte, header *format.PageHeader, body []byte) (int, int64, error) {
	if len(body) > math.MaxInt32 {
		return 0, 0, fmt.Errorf("a page of %d bytes, past Parquet's limit of 2 GiB (lower --portable-row-group-rows)", len(body))
	}
	zipped := cw.codec.EncodeLevel(nil, body, cw.level)
	header.UncompressedPageSize, header.CompressedPageSize = int32(len(body)), int32(len(zipped))
	h, err := thrift.Marshal(&compact, header)
	if err != nil {
		return 0, 0, err
	}
	*pages = append(append(*pages, h...), zipped...)
	return len(h) + len(zipped), int64(len(h) + len(body)), nil
}

// rleRuns collects (value, count) runs, merging a run into the last one
// when it repeats its value.
type rleRuns struct {
	vals   []uint64
	counts []int64
}

func (r *rleRuns) add(v uint64, n int64) {
	if n == 0 {
		return
	}
	if k := len(r.vals) - 1; k >= 0 && r.vals[k] == v {
		r.counts[k] += n
		return
	}
	r.vals = append(r.vals, v)
	r.counts = append(r.counts, n)
}

// encode appends the runs to b in the RLE/bit-packed hybrid encoding, as
// RLE runs only: a ULEB128 header (count << 1) and the value in
// ceil(width/8) little-endian bytes.
func (r *rleRuns) encode(b []byte, width int) []byte {
	size := (width + 7) / 8
	for i, v := range r.vals {
		b = binary.AppendUvarint(b, uint64(r.counts[i])<<1)
		for k := 0; k < size; k++ {
			b = append(b, byte(v>>(8*k)))
		}
	}
	return b
}
