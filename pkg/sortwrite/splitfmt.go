package sortwrite

import (
	"encoding/binary"
	"errors"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// A split piece's runs are the external sort's spill records (see
// spillHeader) cut into blocks, each compressed on its own:
//
//	records     uint32  records in the block
//	compressed  uint32  bytes that follow
//	zstd of the block's records, byte-shuffled: byte j of every record,
//	then byte j+1 of every record, ... (a column of a run changes
//	slowly, so its bytes side by side compress like a columnar file),
//	the header's three words (input row, series code, period) first
//	replaced by their difference from the record before's (mod 2^32)
//
// A run starts at a block boundary; the piece's manifest gives each run's
// offset and length (splitpiece.go).
const blockHeader = 8

// blockBytes is the most a block's records take before compression; a
// split of many shards under a small budget cuts smaller blocks (see
// blockSize).
const blockBytes = 1 << 20

// blockSize is the block size of a split into shards pieces under budget:
// the pieces' blocks being filled take at most a 32nd of the budget, and
// a block at least 64 KiB.
func blockSize(budget int64, shards int) int {
	return int(min(blockBytes, max(64<<10, budget/32/int64(max(shards, 1)))))
}

// blockWriter cuts records into compressed blocks.
type blockWriter struct {
	w     io.Writer
	size  int
	bytes int    // most bytes a block's records take
	max   int    // records per block
	buf   []byte // the block's records
	s     *blockScratch
	enc   *zstd.Encoder
	n     int64 // bytes written
}

// blockScratch is what blockWriters on one goroutine share: the shuffled
// records and the compressed block.
type blockScratch struct {
	shuf, out []byte
}

func newBlockWriter(w io.Writer, size, bytes int, enc *zstd.Encoder, s *blockScratch) *blockWriter {
	return &blockWriter{w: w, size: size, bytes: bytes, max: max(bytes/size, 1), enc: enc, s: s}
}

// setSize makes the next blocks' records size bytes each (a run's own
// record layout); the block being filled must have been flushed.
func (b *blockWriter) setSize(size int) {
	b.size, b.max = size, max(b.bytes/size, 1)
}

// write adds whole records.
func (b *blockWriter) write(recs []byte) error {
	for len(recs) > 0 {
		room := (b.max*b.size - len(b.buf))
		k := min(room, len(recs))
		b.buf = append(b.buf, recs[:k]...)
		recs = recs[k:]
		if len(b.buf) == b.max*b.size {
			if err := b.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush writes the records held as a block (nothing when none).
func (b *blockWriter) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	n := len(b.buf) / b.size
	s := b.s
	s.shuf = resizeSlice(s.shuf, len(b.buf))
	deltaHeader(b.buf, n, b.size)
	shuffle(s.shuf, b.buf, n, b.size)
	s.out = append(s.out[:0], make([]byte, blockHeader)...)
	s.out = b.enc.EncodeAll(s.shuf, s.out)
	binary.LittleEndian.PutUint32(s.out[0:], uint32(n))
	binary.LittleEndian.PutUint32(s.out[4:], uint32(len(s.out)-blockHeader))
	if _, err := b.w.Write(s.out); err != nil {
		return err
	}
	b.n += int64(len(s.out))
	b.buf = b.buf[:0]
	return nil
}

// deltaHeader replaces, from the last record back, each header word by
// its difference from the record before's.
func deltaHeader(recs []byte, n, size int) {
	le := binary.LittleEndian
	for k := n - 1; k > 0; k-- {
		cur, prev := recs[k*size:], recs[(k-1)*size:]
		for o := 8; o < spillHeader; o += 4 {
			le.PutUint32(cur[o:], le.Uint32(cur[o:])-le.Uint32(prev[o:]))
		}
	}
}

// undeltaHeader undoes deltaHeader.
func undeltaHeader(recs []byte, n, size int) {
	le := binary.LittleEndian
	for k := 1; k < n; k++ {
		cur, prev := recs[k*size:], recs[(k-1)*size:]
		for o := 8; o < spillHeader; o += 4 {
			le.PutUint32(cur[o:], le.Uint32(cur[o:])+le.Uint32(prev[o:]))
		}
	}
}

// shuffle writes byte j of record k of src at dst[j*n+k].
func shuffle(dst, src []byte, n, size int) {
	for k := range n {
		rec := src[k*size : (k+1)*size]
		for j, c := range rec {
			dst[j*n+k] = c
		}
	}
}

// unshuffle undoes shuffle.
func unshuffle(dst, src []byte, n, size int) {
	for j := range size {
		col := src[j*n : (j+1)*n]
		for k, c := range col {
			dst[k*size+j] = c
		}
	}
}

// splitDecoder decodes every piece's blocks (DecodeAll is safe for
// concurrent use).
var splitDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))

// blockReader reads the records of consecutive blocks.
type blockReader struct {
	r    io.Reader
	size int
	name string
	hdr  [blockHeader]byte
	comp []byte
	raw  []byte
	out  []byte
	at   int
}

func newBlockReader(r io.Reader, size int, name string) *blockReader {
	return &blockReader{r: r, size: size, name: name}
}

// errBlock says a piece's block is damaged.
var errBlock = errors.New("damaged block")

func (b *blockReader) Read(p []byte) (int, error) {
	for b.at == len(b.out) {
		if err := b.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, b.out[b.at:])
	b.at += n
	return n, nil
}

func (b *blockReader) next() error {
	if _, err := io.ReadFull(b.r, b.hdr[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return corrupt.Errorf("%w: header: %w", errBlock, err)
	}
	n := int(binary.LittleEndian.Uint32(b.hdr[0:]))
	c := int(binary.LittleEndian.Uint32(b.hdr[4:]))
	if n == 0 || n*b.size > 4*blockBytes || c > 8*blockBytes {
		return corrupt.Errorf("%w: %d records in %d bytes", errBlock, n, c)
	}
	b.comp = resizeSlice(b.comp, c)
	if _, err := io.ReadFull(b.r, b.comp); err != nil {
		return corrupt.Errorf("%w: %w", errBlock, err)
	}
	raw, err := splitDecoder.DecodeAll(b.comp, b.raw[:0])
	if err != nil {
		return corrupt.Errorf("%w: %w", errBlock, err)
	}
	b.raw = raw
	if len(raw) != n*b.size {
		return corrupt.Errorf("%w: %d bytes for %d records of %d", errBlock, len(raw), n, b.size)
	}
	b.out = resizeSlice(b.out, len(raw))
	unshuffle(b.out, raw, n, b.size)
	undeltaHeader(b.out, n, b.size)
	b.at = 0
	return nil
}

// codeRemap maps the dictionary codes of a piece's records (its part's
// dictionaries) to the build's.
type codeRemap struct {
	series  []uint32   // part series code -> build code (noRow: not this shard's)
	offsets []int      // record offsets of the string columns
	strings [][]uint32 // per string column: part code -> build code
}

// apply rewrites rec's codes in place.
func (m *codeRemap) apply(rec []byte) error {
	le := binary.LittleEndian
	c := le.Uint32(rec[4:])
	if int(c) >= len(m.series) || m.series[c] == noRow {
		return corrupt.Errorf("series code %d is not one of this shard's series", c)
	}
	le.PutUint32(rec[4:], m.series[c])
	for i, o := range m.offsets {
		v := le.Uint32(rec[o:])
		if v == nullCode {
			continue
		}
		if int(v) >= len(m.strings[i]) {
			return corrupt.Errorf("string code %d out of range", v)
		}
		le.PutUint32(rec[o:], m.strings[i][v])
	}
	return nil
}
