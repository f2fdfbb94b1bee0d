package vortexio

import "unsafe"

// FastLanes bit-packing. A block of 1024 values of a B-bit unsigned word
// type is split into 1024/B lanes; lane l is an independent bit stream in the
// words l, l+LANES, l+2·LANES, ... and row r of that lane is the value at
// position 128·(r%8) + 16·order[r/8] + l of the block. This "transposed"
// order is what lets SIMD code unpack all lanes at once; we reproduce it bit
// for bit, one lane at a time.
//
// The kernels are generic over the word type so that the inner loop works on
// native words (no per-word byte decoding): this is the writer's and the
// reader's hottest loop.

var flOrder = [8]int{0, 4, 2, 6, 1, 5, 3, 7}

// flRowIndex[r] is the block position of row r in lane 0 (add the lane).
var flRowIndex = func() (t [64]int) {
	for r := range t {
		t[r] = 128*(r%8) + 16*flOrder[r/8]
	}
	return
}()

type flWord interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64
}

// words views the packed bytes of a block as B-bit words (the buffers are
// 8-byte aligned by construction or by ensureAligned).
func words[T flWord](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b) < sz {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/sz)
}

func packBlockT[T flWord](in []uint64, width int, packed []T) {
	B := int(unsafe.Sizeof(T(0))) * 8
	lanes := 1024 / B
	for l := 0; l < lanes; l++ {
		p := 0
		for r := 0; r < B; r++ {
			v := T(in[flRowIndex[r]+l])
			wi, bo := p/B, p%B
			packed[lanes*wi+l] |= v << uint(bo)
			if bo+width > B {
				packed[lanes*(wi+1)+l] |= v >> uint(B-bo)
			}
			p += width
		}
	}
}

// packBlock packs in[0:1024] (each < 2^width) into packed (128·width bytes, zeroed).
func packBlock(in []uint64, B, width int, packed []byte) {
	if width == 0 {
		return
	}
	n := 128 * width
	switch B {
	case 8:
		packBlockT(in, width, words[uint8](packed[:n]))
	case 16:
		packBlockT(in, width, words[uint16](packed[:n]))
	case 32:
		packBlockT(in, width, words[uint32](packed[:n]))
	default:
		packBlockT(in, width, words[uint64](packed[:n]))
	}
}

// packedBlocks are the 1024-row blocks of a bitpacked buffer of the given
// width that rows [offset, offset+n) need: [first, blocks), each bs bytes,
// once the buffer is checked to hold them all, and the buffer aligned for
// reading as words (copied if it was not).
func packedBlocks(packed []byte, width, offset, n int) (aligned []byte, first, blocks, bs int, err error) {
	first, blocks, bs = offset/1024, (offset+n+1023)/1024, 128*width
	if len(packed) < blocks*bs {
		return nil, 0, 0, 0, corruptf("fastlanes.bitpacked buffer of %d bytes for %d blocks of width %d", len(packed), blocks, width)
	}
	return ensureAligned(packed, 8), first, blocks, bs, nil
}

// bitPack packs values (each < 2^width) into whole 1024-value blocks.
func bitPack(vals []uint64, B, width int) []byte {
	blocks := (len(vals) + 1023) / 1024
	bs := 128 * width
	out := alignedBytes(blocks * bs)
	var tmp [1024]uint64
	for b := 0; b < blocks; b++ {
		src := vals[b*1024 : min(len(vals), (b+1)*1024)]
		if len(src) < 1024 {
			clear(tmp[:])
			copy(tmp[:], src)
			src = tmp[:]
		}
		packBlock(src, B, width, out[b*bs:])
	}
	return out
}
