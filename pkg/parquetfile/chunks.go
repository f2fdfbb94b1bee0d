// Package parquetfile holds the checks every reader of Parquet files from
// outside (lake inputs, Delta checkpoints, convert's sources, verify's lake
// side, the portable copy) runs on a file's footer before it reads a page.
//
// arrow-go trusts the footer's column-chunk offsets and lengths: a negative
// length panics in makeslice and an absurd one allocates gigabytes, and for
// struct columns pqarrow opens the readers on goroutines of its own, where
// no recover of ours reaches. Checking every chunk's byte range first, on
// the caller's goroutine, turns such a file into an error that names the
// row group and column.
package parquetfile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// CheckChunks returns an error for the first column chunk whose byte range
// does not lie inside the file. A chunk starts at its data page, or at its
// dictionary page when that comes first, and spans its total compressed
// size.
func CheckChunks(pf *file.Reader) error {
	md := pf.MetaData()
	size := md.GetSourceFileSize()
	for g := 0; g < pf.NumRowGroups(); g++ {
		rg := md.RowGroup(g)
		for c := 0; c < rg.NumColumns(); c++ {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d column %d: %w", g, c, err)
			}
			start := cc.DataPageOffset()
			if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && cc.DictionaryPageOffset() < start {
				start = cc.DictionaryPageOffset()
			}
			n := cc.TotalCompressedSize()
			if start < 0 || n < 0 || start > size || n > size-start {
				return fmt.Errorf("row group %d column %d (%s): chunk at offset %d of %d bytes is outside the file (%d bytes)",
					g, c, cc.PathInSchema().String(), start, n, size)
			}
		}
	}
	return nil
}
