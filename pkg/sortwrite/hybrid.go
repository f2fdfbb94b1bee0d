package sortwrite

import (
	"encoding/binary"
	"errors"
)

// errHybrid reports a run of the RLE/bit-packed hybrid encoding that does
// not fit its buffer. The page reader then hands the column to the general
// reader, whose error names the file, row group and column.
var errHybrid = errors.New("malformed RLE/bit-packed run")

// decodeHybrid decodes len(out) values of Parquet's RLE/bit-packed hybrid
// encoding of bit width w (definition levels and dictionary indices) from
// b. Each run is a ULEB128 header: low bit 0 is a repeated run of header>>1
// copies of one value in ceil(w/8) little-endian bytes; low bit 1 is
// header>>1 groups of 8 values packed w bits each, least significant bit
// first. Runs past len(out) (the padding of the last group) are ignored.
func decodeHybrid(b []byte, w int, out []uint32) error {
	if w < 0 || w > 32 {
		return errHybrid
	}
	byteW := (w + 7) / 8
	mask := uint64(1)<<w - 1
	i := 0
	for i < len(out) {
		h, k := binary.Uvarint(b)
		if k <= 0 {
			return errHybrid
		}
		b = b[k:]
		left := uint64(len(out) - i)
		if h&1 == 0 {
			if len(b) < byteW {
				return errHybrid
			}
			var v uint32
			for j := 0; j < byteW; j++ {
				v |= uint32(b[j]) << (8 * j)
			}
			b = b[byteW:]
			if uint64(v) > mask {
				return errHybrid
			}
			n := min(h>>1, left)
			run := out[i : i+int(n)]
			for j := range run {
				run[j] = v
			}
			i += int(n)
			continue
		}
		groups := h >> 1
		if groups > uint64(len(b))+left { // more than b could hold at w >= 1, more than needed at w == 0
			groups = uint64(len(b)) + left
		}
		nbytes := groups * uint64(w)
		if nbytes > uint64(len(b)) {
			return errHybrid
		}
		p := b[:nbytes]
		b = b[nbytes:]
		n := int(min(groups*8, left))
		if w == 0 {
			clear(out[i : i+n])
			i += n
			continue
		}
		dst := out[i : i+n]
		// Values whose 8-byte window lies inside p: one unaligned load,
		// shift and mask each (w <= 32, so a value spans at most 5 bytes
		// after its first bit's byte).
		j := 0
		if len(p) >= 8 {
			last := (len(p) - 8) * 8 / w // values starting within p[:len(p)-7] at bit offset < 8
			if last > n {
				last = n
			}
			for ; j < last; j++ {
				off := j * w
				v := binary.LittleEndian.Uint64(p[off>>3:])
				dst[j] = uint32((v >> (off & 7)) & mask)
			}
		}
		var acc uint64
		bits, pos := 0, (j*w)>>3
		if sh := (j * w) & 7; sh != 0 {
			acc = uint64(p[pos]) >> sh
			bits = 8 - sh
			pos++
		}
		for j := j; j < n; j++ {
			for bits < w {
				acc |= uint64(p[pos]) << bits
				pos++
				bits += 8
			}
			dst[j] = uint32(acc & mask)
			acc >>= w
			bits -= w
		}
		i += n
	}
	return nil
}
