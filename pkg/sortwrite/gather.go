package sortwrite

import (
	"fmt"
	"math"
	"math/bits"

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
func (s *store) gather(rows []uint32) (arrow.Array, error) {
	n := len(rows)
	switch s.kind {
	case kindNull:
		return array.NewNull(n), nil
	case kindString:
		return s.gatherStrings(rows)
	}
	valid, nulls := s.gatherValidity(rows)
	var data []byte
	if s.kind == kindBool {
		data = make([]byte, bitutil.BytesForBits(int64(n)))
		for i, r := range rows {
			if r != noRow && s.data[r] != 0 {
				bitutil.SetBit(data, i)
			}
		}
	} else {
		data = make([]byte, n*s.width)
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
func (s *store) gatherValidity(rows []uint32) (*memory.Buffer, int) {
	n := len(rows)
	words := make([]uint64, (n+63)/64)
	var nulls int
	switch {
	case s.noNull:
		nulls = presentBits(words, rows)
	case s.kind == kindFixed || s.kind == kindBool:
		nulls = validityBits(words, s.valid, rows)
	default:
		nulls = bitsWhere(words, rows, func(r uint32) bool { return r != noRow && !s.isNull(int(r)) })
	}
	if nulls == 0 {
		return nil, 0
	}
	bm := arrow.Uint64Traits.CastToBytes(words)[:bitutil.BytesForBits(int64(n))]
	return memory.NewBufferBytes(bm), nulls
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

// bitsWhere is validityBits for any test of a row (string columns).
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

func (s *store) gatherStrings(rows []uint32) (arrow.Array, error) {
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
	valid, nulls := s.gatherValidity(rows)
	offsets := make([]int32, n+1)
	data := make([]byte, 0, total)
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
