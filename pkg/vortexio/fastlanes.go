package vortexio

import "encoding/binary"

// FastLanes bit-packing. A block of 1024 values of a B-bit unsigned word
// type is split into 1024/B lanes; lane l is an independent bit stream in the
// words l, l+LANES, l+2·LANES, ... and row r of that lane is the value at
// position 128·(r%8) + 16·order[r/8] + l of the block. This "transposed"
// order is what lets SIMD code unpack all lanes at once; we reproduce it bit
// for bit, one lane at a time.

var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

func readWord(b []byte, i, bytesPerWord int) uint64 {
	p := i * bytesPerWord
	switch bytesPerWord {
	case 1:
		return uint64(b[p])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[p:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[p:]))
	}
	return binary.LittleEndian.Uint64(b[p:])
}

func writeWord(b []byte, i, bytesPerWord int, v uint64) {
	p := i * bytesPerWord
	switch bytesPerWord {
	case 1:
		b[p] |= byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b[p:], binary.LittleEndian.Uint16(b[p:])|uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[p:], binary.LittleEndian.Uint32(b[p:])|uint32(v))
	default:
		binary.LittleEndian.PutUint64(b[p:], binary.LittleEndian.Uint64(b[p:])|v)
	}
}

// unpackBlock unpacks one block (128·width bytes) of B-bit words into out[0:1024].
func unpackBlock(packed []byte, B, width int, out []uint64) {
	if width == 0 {
		clear(out[:1024])
		return
	}
	lanes := 1024 / B
	bpw := B / 8
	mask := maskBits(uint(width))
	for l := 0; l < lanes; l++ {
		for r := 0; r < B; r++ {
			p := r * width
			wi, bo := p/B, p%B
			v := readWord(packed, lanes*wi+l, bpw) >> uint(bo)
			if bo+width > B {
				v |= readWord(packed, lanes*(wi+1)+l, bpw) << uint(B-bo)
			}
			out[128*(r%8)+16*flOrder[r/8]+l] = v & mask
		}
	}
}

// packBlock packs in[0:1024] (each < 2^width) into packed (128·width bytes, zeroed).
func packBlock(in []uint64, B, width int, packed []byte) {
	if width == 0 {
		return
	}
	lanes := 1024 / B
	bpw := B / 8
	mask := maskBits(uint(B))
	for l := 0; l < lanes; l++ {
		for r := 0; r < B; r++ {
			v := in[128*(r%8)+16*flOrder[r/8]+l]
			p := r * width
			wi, bo := p/B, p%B
			writeWord(packed, lanes*wi+l, bpw, (v<<uint(bo))&mask)
			if bo+width > B {
				writeWord(packed, lanes*(wi+1)+l, bpw, v>>uint(B-bo))
			}
		}
	}
}

// bitUnpack decodes rows [offset, offset+n) of a packed buffer.
func bitUnpack(packed []byte, B, width, offset, n int) ([]uint64, error) {
	total := offset + n
	blocks := (total + 1023) / 1024
	bs := 128 * width
	if len(packed) < blocks*bs {
		return nil, corruptf("fastlanes.bitpacked buffer of %d bytes for %d blocks of width %d", len(packed), blocks, width)
	}
	out := make([]uint64, blocks*1024)
	for b := 0; b < blocks; b++ {
		unpackBlock(packed[b*bs:], B, width, out[b*1024:])
	}
	return out[offset:total], nil
}

// bitPack packs values (each < 2^width) into whole 1024-value blocks.
func bitPack(vals []uint64, B, width int) []byte {
	blocks := (len(vals) + 1023) / 1024
	bs := 128 * width
	out := alignedBytes(blocks * bs)
	var tmp [1024]uint64
	for b := 0; b < blocks; b++ {
		clear(tmp[:])
		copy(tmp[:], vals[b*1024:min(len(vals), (b+1)*1024)])
		packBlock(tmp[:], B, width, out[b*bs:])
	}
	return out
}
