// Package roaring decodes serialized Roaring bitmaps: the portable 32-bit
// format of the RoaringFormatSpec, its 64-bit extension (buckets of 32-bit
// bitmaps keyed by the high 32 bits), and Delta Lake's RoaringBitmapArray,
// which is that 64-bit format behind a 4-byte magic number. Delta's
// deletion vectors are stored this way.
//
// Only decoding is implemented, into a sorted slice of values: a deletion
// vector is read once per data file and walked in order. Every length,
// key and count read from the input is checked before it is used, the
// output is bounded by a caller-given limit (a run container of 4 bytes can
// stand for 65,536 values), and the decoder never panics.
package roaring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// DeltaMagic starts a Delta RoaringBitmapArray in the portable format
// (PROTOCOL.md, "Deletion Vector Format"), little-endian; DeltaNativeMagic
// the older native format Delta readers also accept: a 4-byte bitmap
// count, then per bitmap (bitmap i holds the values with high 32 bits i)
// its 4-byte size and a portable 32-bit bitmap.
const (
	DeltaMagic       = 1681511377
	DeltaNativeMagic = 1681511376
)

const (
	serialCookieNoRun = 12346 // 32-bit header without run containers
	serialCookie      = 12347 // low 16 bits of a header with run containers
	noOffsetThreshold = 4     // with runs, fewer containers than this have no offset header
	arrayMaxCard      = 4096  // an array container holds at most this many values
	bitmapBytes       = 8192  // a bitmap container is 1024 little-endian uint64 words
)

// ErrLimit is returned when a bitmap holds more values than the caller's
// limit allows.
var ErrLimit = errors.New("roaring: more values than allowed")

// DecodeDelta decodes a Delta RoaringBitmapArray (magic, then a portable
// 64-bit bitmap) into its values in ascending order. It refuses more than
// limit values, trailing bytes, and keys with the top bit set (Delta
// requires it clear).
func DecodeDelta(b []byte, limit uint64) ([]uint64, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("roaring: %d bytes, too short for the magic number", len(b))
	}
	var vals []uint64
	var n int
	var err error
	switch m := binary.LittleEndian.Uint32(b); m {
	case DeltaMagic:
		vals, n, err = Decode64(b[4:], limit)
	case DeltaNativeMagic:
		vals, n, err = decodeNative(b[4:], limit)
	default:
		return nil, fmt.Errorf("roaring: magic number %d, want %d or %d (not a Delta RoaringBitmapArray)", m, DeltaMagic, DeltaNativeMagic)
	}
	if err != nil {
		return nil, err
	}
	if 4+n != len(b) {
		return nil, fmt.Errorf("roaring: %d trailing bytes after the bitmap", len(b)-4-n)
	}
	if len(vals) > 0 && vals[len(vals)-1]>>63 != 0 {
		return nil, fmt.Errorf("roaring: key with the most significant bit set (Delta forbids it)")
	}
	return vals, nil
}

// Decode64 decodes a portable 64-bit bitmap at the start of b and returns
// its values in ascending order and the number of bytes it took.
func Decode64(b []byte, limit uint64) ([]uint64, int, error) {
	if len(b) < 8 {
		return nil, 0, fmt.Errorf("roaring: %d bytes, too short for the bucket count", len(b))
	}
	nb := binary.LittleEndian.Uint64(b)
	// Each bucket takes at least 4 (key) + 8 (smallest 32-bit bitmap) bytes.
	if nb > uint64(len(b)-8)/12 {
		return nil, 0, fmt.Errorf("roaring: %d buckets cannot fit in %d bytes", nb, len(b)-8)
	}
	pos := 8
	var out []uint64
	var prevKey int64 = -1
	for i := uint64(0); i < nb; i++ {
		if len(b)-pos < 4 {
			return nil, 0, fmt.Errorf("roaring: bucket %d: truncated key", i)
		}
		key := binary.LittleEndian.Uint32(b[pos:])
		pos += 4
		if int64(key) <= prevKey {
			return nil, 0, fmt.Errorf("roaring: bucket %d: key %d does not follow %d", i, key, prevKey)
		}
		prevKey = int64(key)
		vals, n, err := decode32(b[pos:], limit-uint64(len(out)), func(v uint32) uint64 { return uint64(key)<<32 | uint64(v) }, out)
		if err != nil {
			return nil, 0, fmt.Errorf("roaring: bucket %d (key %d): %w", i, key, err)
		}
		out = vals
		pos += n
	}
	return out, pos, nil
}

// decodeNative decodes Delta's native RoaringBitmapArray body.
func decodeNative(b []byte, limit uint64) ([]uint64, int, error) {
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("roaring: truncated bitmap count")
	}
	nb := binary.LittleEndian.Uint32(b)
	if nb > 1<<31-1 || uint64(nb) > uint64(len(b)-4)/12 {
		return nil, 0, fmt.Errorf("roaring: %d bitmaps cannot fit in %d bytes", nb, len(b)-4)
	}
	pos := 4
	var out []uint64
	for i := uint32(0); i < nb; i++ {
		if len(b)-pos < 4 {
			return nil, 0, fmt.Errorf("roaring: bitmap %d: truncated size", i)
		}
		size := int(binary.LittleEndian.Uint32(b[pos:]))
		pos += 4
		if size < 0 || size > len(b)-pos {
			return nil, 0, fmt.Errorf("roaring: bitmap %d: size %d past the end", i, size)
		}
		key := uint64(i)
		vals, n, err := decode32(b[pos:pos+size], limit-uint64(len(out)), func(v uint32) uint64 { return key<<32 | uint64(v) }, out)
		if err != nil {
			return nil, 0, fmt.Errorf("roaring: bitmap %d: %w", i, err)
		}
		if n != size {
			return nil, 0, fmt.Errorf("roaring: bitmap %d: %d bytes, its size says %d", i, n, size)
		}
		out = vals
		pos += size
	}
	return out, pos, nil
}

// decode32 appends the values of the 32-bit bitmap at the start of b,
// mapped through widen, to out, adding at most limit of them.
func decode32(b []byte, limit uint64, widen func(uint32) uint64, out []uint64) ([]uint64, int, error) {
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("truncated header")
	}
	cookie := binary.LittleEndian.Uint32(b)
	pos := 4
	var n int
	var runs []byte // bitset: container i is a run container
	hasRuns := false
	switch {
	case cookie&0xFFFF == serialCookie:
		hasRuns = true
		n = int(cookie>>16) + 1
		rb := (n + 7) / 8
		if len(b)-pos < rb {
			return nil, 0, fmt.Errorf("truncated run-container bitset")
		}
		runs = b[pos : pos+rb]
		pos += rb
	case cookie == serialCookieNoRun:
		if len(b)-pos < 4 {
			return nil, 0, fmt.Errorf("truncated container count")
		}
		c := binary.LittleEndian.Uint32(b[pos:])
		pos += 4
		if c > 1<<16 {
			return nil, 0, fmt.Errorf("%d containers, at most 65536", c)
		}
		n = int(c)
	default:
		return nil, 0, fmt.Errorf("unknown cookie %#x", cookie)
	}
	if len(b)-pos < 4*n {
		return nil, 0, fmt.Errorf("truncated descriptive header (%d containers)", n)
	}
	desc := b[pos : pos+4*n]
	pos += 4 * n
	if !hasRuns || n >= noOffsetThreshold {
		if len(b)-pos < 4*n {
			return nil, 0, fmt.Errorf("truncated offset header (%d containers)", n)
		}
		pos += 4 * n // offsets are redundant when containers are read in order
	}
	prevKey := -1
	for i := 0; i < n; i++ {
		key := int(binary.LittleEndian.Uint16(desc[4*i:]))
		card := int(binary.LittleEndian.Uint16(desc[4*i+2:])) + 1
		if key <= prevKey {
			return nil, 0, fmt.Errorf("container %d: key %d does not follow %d", i, key, prevKey)
		}
		prevKey = key
		high := uint32(key) << 16
		isRun := hasRuns && runs[i/8]&(1<<(i%8)) != 0
		if uint64(card) > limit {
			return nil, 0, ErrLimit
		}
		start := len(out)
		switch {
		case isRun:
			if len(b)-pos < 2 {
				return nil, 0, fmt.Errorf("container %d: truncated run count", i)
			}
			nr := int(binary.LittleEndian.Uint16(b[pos:]))
			pos += 2
			if len(b)-pos < 4*nr {
				return nil, 0, fmt.Errorf("container %d: truncated runs (%d)", i, nr)
			}
			next := 0 // smallest value the next run may start at
			for r := 0; r < nr; r++ {
				s := int(binary.LittleEndian.Uint16(b[pos+4*r:]))
				l := int(binary.LittleEndian.Uint16(b[pos+4*r+2:]))
				if s < next || s+l > 0xFFFF {
					return nil, 0, fmt.Errorf("container %d: run %d [%d, %d] overlaps, is out of order or past 65535", i, r, s, s+l)
				}
				if uint64(len(out)-start+l+1) > uint64(card) {
					return nil, 0, fmt.Errorf("container %d: runs hold more than the %d values its header says", i, card)
				}
				for v := s; v <= s+l; v++ {
					out = append(out, widen(high|uint32(v)))
				}
				next = s + l + 1
			}
			pos += 4 * nr
		case card <= arrayMaxCard:
			if len(b)-pos < 2*card {
				return nil, 0, fmt.Errorf("container %d: truncated array (%d values)", i, card)
			}
			prev := -1
			for j := 0; j < card; j++ {
				v := int(binary.LittleEndian.Uint16(b[pos+2*j:]))
				if v <= prev {
					return nil, 0, fmt.Errorf("container %d: array value %d does not follow %d", i, v, prev)
				}
				prev = v
				out = append(out, widen(high|uint32(v)))
			}
			pos += 2 * card
		default:
			if len(b)-pos < bitmapBytes {
				return nil, 0, fmt.Errorf("container %d: truncated bitmap", i)
			}
			got := 0
			for w := 0; w < bitmapBytes/8; w++ {
				got += bits.OnesCount64(binary.LittleEndian.Uint64(b[pos+8*w:]))
			}
			if got != card {
				return nil, 0, fmt.Errorf("container %d: bitmap holds %d values, header says %d", i, got, card)
			}
			for w := 0; w < bitmapBytes/8; w++ {
				word := binary.LittleEndian.Uint64(b[pos+8*w:])
				for word != 0 {
					t := bits.TrailingZeros64(word)
					out = append(out, widen(high|uint32(w*64+t)))
					word &= word - 1
				}
			}
			pos += bitmapBytes
		}
		if got := len(out) - start; got != card {
			return nil, 0, fmt.Errorf("container %d: holds %d values, header says %d", i, got, card)
		}
		limit -= uint64(card)
	}
	return out, pos, nil
}
