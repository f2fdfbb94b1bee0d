package sortwrite

import (
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// noRow in a gather list yields a null (a series without a non-null value
// has no latest value).
const noRow = math.MaxUint32

// gather builds an Arrow array of the store's type from the given input
// rows, in that order. Gathering by hand is about twice as fast as
// compute.Take and needs no intermediate Arrow array of the whole input.
func (s *store) gather(rows []uint32) (arrow.Array, error) { return s.gatherFrom(rows, nil) }

// gatherFrom is gather with the array's buffers taken from p (nil: new
// ones).
func (s *store) gatherFrom(rows []uint32, p *slab) (arrow.Array, error) {
	n := len(rows)
	switch s.kind {
	case kindNull:
		return array.NewNull(n), nil
	case kindString:
		if s.att != nil && s.att.decided {
			v, at := s.perSeriesView(rows)
			return v.gatherStrings(at, p)
		}
		return s.gatherStrings(rows, p)
	}
	if s.kind == kindFixed && s.nullsZero && !s.noNull {
		switch s.width {
		case 1:
			return s.gatherValid(rows, p, func(dst []byte, w []uint64) int {
				return gatherValid(asSlice[uint8](dst), asSlice[uint8](s.data), s.valid, rows, w)
			})
		case 2:
			return s.gatherValid(rows, p, func(dst []byte, w []uint64) int {
				return gatherValid(asSlice[uint16](dst), asSlice[uint16](s.data), s.valid, rows, w)
			})
		case 4:
			return s.gatherValid(rows, p, func(dst []byte, w []uint64) int {
				return gatherValid(asSlice[uint32](dst), asSlice[uint32](s.data), s.valid, rows, w)
			})
		case 8:
			return s.gatherValid(rows, p, func(dst []byte, w []uint64) int {
				return gatherValid(asSlice[uint64](dst), asSlice[uint64](s.data), s.valid, rows, w)
			})
		}
	}
	valid, nulls := s.gatherValidity(rows, p)
	var data []byte
	if s.kind == kindBool {
		data = p.get(int(bitutil.BytesForBits(int64(n))))
		for i, r := range rows {
			if r != noRow && s.data[r] != 0 {
				bitutil.SetBit(data, i)
			}
		}
	} else {
		data = p.get(n * s.width)
		switch s.width {
		case 1:
			gatherT(asSlice[uint8](data), asSlice[uint8](s.data), rows)
		case 2:
			gatherT(asSlice[uint16](data), asSlice[uint16](s.data), rows)
		case 4:
			gatherT(asSlice[uint32](data), asSlice[uint32](s.data), rows)
		case 8:
			gatherT(asSlice[uint64](data), asSlice[uint64](s.data), rows)
		default:
			w := s.width
			for i, r := range rows {
				if r != noRow {
					copy(data[i*w:(i+1)*w], s.data[int(r)*w:int(r+1)*w])
				}
			}
		}
	}
	ad := array.NewData(s.col.Type, n, []*memory.Buffer{valid, memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer ad.Release()
	return array.MakeFromData(ad), nil
}

func gatherT[T any](dst, src []T, rows []uint32) {
	for i, r := range rows {
		if r != noRow {
			dst[i] = src[r]
		}
	}
}

// gatherValidity returns a validity bitmap (nil when nothing is null) and
// the null count, in one pass over the rows.
func (s *store) gatherValidity(rows []uint32, p *slab) (*memory.Buffer, int) {
	n := len(rows)
	wb := p.get((n + 63) / 64 * 8)
	words := asSlice[uint64](wb)
	var nulls int
	switch {
	case s.noNull:
		nulls = presentBits(words, rows)
	case s.kind == kindFixed || s.kind == kindBool:
		nulls = validityBits(words, s.valid, rows)
	case s.kind == kindString:
		nulls = codeBits(words, s.codes, rows)
	default:
		nulls = bitsWhere(words, rows, func(r uint32) bool { return r != noRow && !s.isNull(int(r)) })
	}
	if nulls == 0 {
		p.put(wb)
		return nil, 0
	}
	bm := wb[:bitutil.BytesForBits(int64(n))]
	return memory.NewBufferBytes(bm), nulls
}

// gatherValid builds the array of a fixed-width column with nulls whose
// null slots hold zero (nullsZero): fill gathers the values and the
// validity bits in one pass, returning the nulls.
func (s *store) gatherValid(rows []uint32, p *slab, fill func(dst []byte, words []uint64) int) (arrow.Array, error) {
	n := len(rows)
	data := p.get(n * s.width)
	wb := p.get((n + 63) / 64 * 8)
	nulls := fill(data, asSlice[uint64](wb))
	var valid *memory.Buffer
	if nulls == 0 {
		p.put(wb)
	} else {
		valid = memory.NewBufferBytes(wb[:bitutil.BytesForBits(int64(n))])
	}
	ad := array.NewData(s.col.Type, n, []*memory.Buffer{valid, memory.NewBufferBytes(data)}, nil, nulls, 0)
	defer ad.Release()
	return array.MakeFromData(ad), nil
}

// gatherValid copies src[rows[i]] to dst[i] and sets validity bit i (as
// validityBits does) when the row is valid. A null row's value is zero, so
// the validity byte is read only for a zero value: the values are read
// anyway, and skipping the second random read per row (into valid, as
// large as the input) halved the gather of a nullable value column.
func gatherValid[T uint8 | uint16 | uint32 | uint64](dst, src []T, valid []byte, rows []uint32, words []uint64) int {
	set := 0
	for w := range words {
		chunk := rows[w*64 : min(w*64+64, len(rows))]
		out := dst[w*64 : w*64+len(chunk)]
		var word uint64
		for i, r := range chunk {
			var v T
			var ok uint64
			if r != noRow {
				v = src[r]
				if v != 0 || valid[r] != 0 {
					ok = 1
				}
			}
			out[i] = v
			word |= ok << uint(i)
		}
		words[w] = word
		set += bits.OnesCount64(word)
	}
	return len(rows) - set
}

// validityBits sets bit i of words (LSB first, which is Arrow's bit order
// on a little-endian machine) when rows[i] is a valid row of valid (0 per
// null) and returns the nulls. Bits are collected 64 rows at a time in a
// register and stored once per word: setting them in the bitmap byte by
// byte made every row wait for the previous row's store to that byte, so
// the random loads of valid could not overlap. No branch on the value
// either (nulls are scattered, a branch would mispredict).
func validityBits(words []uint64, valid []byte, rows []uint32) int {
	set := 0
	for w := range words {
		chunk := rows[w*64 : min(w*64+64, len(rows))]
		var word uint64
		for i, r := range chunk {
			var v uint64
			if r != noRow && valid[r] != 0 { // a SETcc, not a jump
				v = 1
			}
			word |= v << uint(i)
		}
		words[w] = word
		set += bits.OnesCount64(word)
	}
	return len(rows) - set
}

// presentBits is validityBits for a column without nulls: only the
// gather's noRow entries are null.
func presentBits(words []uint64, rows []uint32) int {
	set := 0
	for w := range words {
		chunk := rows[w*64 : min(w*64+64, len(rows))]
		var word uint64
		for i, r := range chunk {
			var v uint64
			if r != noRow {
				v = 1
			}
			word |= v << uint(i)
		}
		words[w] = word
		set += bits.OnesCount64(word)
	}
	return len(rows) - set
}

// codeBits is validityBits for a string column's codes (nullCode: null).
func codeBits(words []uint64, codes []uint32, rows []uint32) int {
	set := 0
	for w := range words {
		chunk := rows[w*64 : min(w*64+64, len(rows))]
		var word uint64
		for i, r := range chunk {
			var v uint64
			if r != noRow && codes[r] != nullCode {
				v = 1
			}
			word |= v << uint(i)
		}
		words[w] = word
		set += bits.OnesCount64(word)
	}
	return len(rows) - set
}

// bitsWhere is validityBits for any test of a row (the kinds without a
// loop of their own).
func bitsWhere(words []uint64, rows []uint32, valid func(uint32) bool) int {
	set := 0
	for w := range words {
		chunk := rows[w*64 : min(w*64+64, len(rows))]
		var word uint64
		for i, r := range chunk {
			if valid(r) {
				word |= 1 << uint(i)
			}
		}
		words[w] = word
		set += bits.OnesCount64(word)
	}
	return len(rows) - set
}

func (s *store) gatherStrings(rows []uint32, p *slab) (arrow.Array, error) {
	n := len(rows)
	total := 0
	for _, r := range rows {
		if r != noRow && s.codes[r] != nullCode {
			total += len(s.dict.values[s.codes[r]])
		}
	}
	if total > math.MaxInt32 {
		return nil, fmt.Errorf("column %q: %d bytes of strings in one batch exceed the 2 GiB utf8 limit; use a smaller --batch-rows", s.col.Name, total)
	}
	valid, nulls := s.gatherValidity(rows, p)
	offsets := asSlice[int32](p.get((n + 1) * 4))
	data := p.get(total)[:0]
	for i, r := range rows {
		if r != noRow && s.codes[r] != nullCode {
			data = append(data, s.dict.values[s.codes[r]]...)
		}
		offsets[i+1] = int32(len(data))
	}
	ad := array.NewData(s.col.Type, n, []*memory.Buffer{
		valid,
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets)),
		memory.NewBufferBytes(data),
	}, nil, nulls, 0)
	defer ad.Release()
	return array.MakeFromData(ad), nil
}

// slab recycles the buffers of gathered batches within one build's data
// write: a batch's columns (about 20 MB a million rows) are written and
// released before the batches a few places later are gathered, so the
// write needs only the buffers of the batches in flight instead of new
// ones per batch, and the collector runs far less often (on a 15M-row
// build the gathers were half of the bytes allocated). The nil slab
// allocates. get returns zeroed bytes, as make does.
type slab struct {
	mu   sync.Mutex
	free [][]byte
}

// slabKeep bounds the buffers a slab holds (more are left to the
// collector).
const slabKeep = 64

func (p *slab) get(n int) []byte {
	if p == nil || n == 0 {
		return make([]byte, n)
	}
	p.mu.Lock()
	for i, b := range p.free {
		// A buffer at most twice the size asked for: a small request
		// must not pin a large buffer a later large request needs.
		if c := cap(b); c >= n && c <= 2*n {
			last := len(p.free) - 1
			p.free[i], p.free[last] = p.free[last], nil
			p.free = p.free[:last]
			p.mu.Unlock()
			b = b[:n]
			clear(b)
			return b
		}
	}
	p.mu.Unlock()
	return make([]byte, n, slabClass(n))
}

// slabClass rounds a buffer size up to its first 3 significant bits, so
// that batches a little longer than the ones before still reuse their
// buffers (at most 1/8 of a buffer is slack).
func slabClass(n int) int {
	shift := max(bits.Len(uint(n))-3, 0)
	return (n + 1<<shift - 1) >> shift << shift
}

// put gives buffers back; nothing may use them afterwards.
func (p *slab) put(bufs ...[]byte) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range bufs {
		if cap(b) > 0 && len(p.free) < slabKeep {
			p.free = append(p.free, b[:0])
		}
	}
}

// buffersOf lists the buffers of a batch that gatherBatch built from p,
// to put back once the batch is released and nothing holds them.
func (p *slab) buffersOf(rec arrow.RecordBatch) [][]byte {
	if p == nil {
		return nil
	}
	var bufs [][]byte
	for _, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b != nil {
				bufs = append(bufs, b.Buf())
			}
		}
	}
	return bufs
}
