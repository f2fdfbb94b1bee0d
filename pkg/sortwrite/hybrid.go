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
		// Whole groups of 8 whose windows lie inside p: unrolled, the
		// byte offset and shift of each of the 8 positions fixed for the
		// run, so a value costs a load, a shift, a mask and a store.
		j := unpackGroups(dst, p, w, mask)
		// Values whose 8-byte window lies inside p: one unaligned load,
		// shift and mask each (w <= 32, so a value spans at most 5 bytes
		// after its first bit's byte).
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

// unpackGroups decodes the leading groups of 8 values of width w (1 to
// 32) packed in p into dst, as long as a whole group is wanted and each of
// its values' 8-byte windows lies inside p, and returns the values done.
func unpackGroups(dst []uint32, p []byte, w int, mask uint64) int {
	var off [8]int
	var sh [8]uint
	for k := range 8 {
		off[k], sh[k] = k*w>>3, uint(k*w&7)
	}
	o1, o2, o3, o4, o5, o6, o7 := off[1], off[2], off[3], off[4], off[5], off[6], off[7]
	s1, s2, s3, s4, s5, s6, s7 := sh[1], sh[2], sh[3], sh[4], sh[5], sh[6], sh[7]
	le := binary.LittleEndian
	j := 0
	for base := 0; j+8 <= len(dst) && base+o7+8 <= len(p); base += w {
		q := p[base : base+o7+8]
		d := dst[j : j+8 : j+8]
		d[0] = uint32(le.Uint64(q) & mask)
		d[1] = uint32(le.Uint64(q[o1:]) >> s1 & mask)
		d[2] = uint32(le.Uint64(q[o2:]) >> s2 & mask)
		d[3] = uint32(le.Uint64(q[o3:]) >> s3 & mask)
		d[4] = uint32(le.Uint64(q[o4:]) >> s4 & mask)
		d[5] = uint32(le.Uint64(q[o5:]) >> s5 & mask)
		d[6] = uint32(le.Uint64(q[o6:]) >> s6 & mask)
		d[7] = uint32(le.Uint64(q[o7:]) >> s7 & mask)
		j += 8
	}
	return j
}
