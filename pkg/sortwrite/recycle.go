package sortwrite

import (
	"sync"

	"github.com/apache/arrow-go/v18/parquet"

	"github.com/energyscope/servingsnap/internal/bufpool"
)

// pageBuffers is the allocator of the page reader's Parquet readers: the
// buffers a column chunk's page reader decompresses into are freed when
// it closes, and the next chunk's reader takes them back instead of
// allocating (and the collector sweeping) a few MB per column chunk.
var pageBuffers bufpool.Recycler

// pageReadProps are the reader properties of the page reader's files:
// recycled buffers, and column chunks streamed through a small buffer
// rather than copied whole into a fresh one (the pages are copied into
// the decompression buffer anyway).
func pageReadProps() *parquet.ReaderProperties {
	p := parquet.NewReaderProperties(&pageBuffers)
	p.BufferedStreamEnabled = true
	p.BufferSize = 64 << 10
	return p
}

// scratchPool recycles the page reader's level and index scratch.
var scratchPool = sync.Pool{New: func() any { return new(pageScratch) }}
