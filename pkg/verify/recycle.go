package verify

import (
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/energyscope/servingsnap/internal/bufpool"
)

// lakeBuffers is the allocator of the lake's Parquet readers: the buffers
// one row group is decoded and decompressed into are freed when it is
// done, and the next row group takes them back instead of allocating (and
// the collector sweeping) a few MB per column chunk.
var lakeBuffers bufpool.Recycler

// lakeReadProps are the reader properties of the lake's files: recycled
// buffers, and column chunks streamed through a small buffer rather than
// copied whole into a fresh one.
func lakeReadProps() *parquet.ReaderProperties {
	p := parquet.NewReaderProperties(&lakeBuffers)
	p.BufferedStreamEnabled = true
	p.BufferSize = 64 << 10
	return p
}
