package vortexio

// fastlanes.delta: per 1024-value block, the values are "transposed" into
// 1024/B lanes of B rows (B = bit width of the type) and each lane is stored
// as a running difference from a per-lane base. Decoding is a prefix sum per
// lane followed by the inverse transposition. For 32- and 64-bit types a lane
// holds B consecutive values, so a delta is simply "this value minus the
// previous one" inside runs of 32 (or 64) rows; that is what makes it pay
// on columns that are sorted in runs (dates within a series, a random walk
// within a series): the deltas are small even though the values span a wide
// range.
//
// Wire form (vortex-data 0.90): metadata DeltaMetadata{deltas_len=1,
// offset=2}; children [bases, deltas], both of the parent dtype; deltas_len
// is a multiple of 1024 (the last block is padded) and there are
// deltas_len/1024 × lanes bases. The deltas are stored in transposed order;
// if they carry validity it is bit-transposed with the reference's
// transpose_bits, which the reader undoes (our writer never emits nullable
// deltas: nullable columns are wrapped in vortex.masked instead).
//
// The encoding belongs to no edition; vortex-data 0.90 registers and reads
// it (tests/vortex checks that), older readers may not. See WriterOptions.

// flTranspose is the FastLanes transposition: position i of a transposed
// block holds the value from original position flTranspose(i).
func flTranspose(i int) int {
	return 64*(i%16) + 8*flOrder[(i/16)%8] + i/128
}

// deltaLayout caches, for a B-bit type, the transposed index (where the
// delta of lane l, row r is stored) and the original position it decodes to,
// both in lane-major order l*B + r.
type deltaLayout struct {
	lanes int
	tidx  [1024]uint16
	orig  [1024]uint16
}

var deltaLayouts = func() map[int]*deltaLayout {
	m := map[int]*deltaLayout{}
	for _, B := range []int{8, 16, 32, 64} {
		dl := &deltaLayout{lanes: 1024 / B}
		for l := 0; l < dl.lanes; l++ {
			for r := 0; r < B; r++ {
				t := 128*(r%8) + 16*flOrder[r/8] + l
				dl.tidx[l*B+r] = uint16(t)
				dl.orig[l*B+r] = uint16(flTranspose(t))
			}
		}
		m[B] = dl
	}
	return m
}()

// deltaEncode returns the bases (blocks × lanes) and the transposed deltas
// (blocks × 1024) of xs, B-bit raw values. Rows that are null (valid != nil
// and bit clear) or past the end decode to don't-care values, so their delta
// repeats the lane's previous delta, which keeps the delta range tight. Each
// lane's base is chosen so that its first delta equals its second one (the
// reference uses delta 0 there, which would widen the range of sorted data).
func deltaEncode(xs []uint64, valid []byte, B int) (bases, deltas []uint64) {
	n := len(xs)
	dl := deltaLayouts[B]
	mask := maskBits(uint(B))
	blocks := (n + 1023) / 1024
	bases = make([]uint64, blocks*dl.lanes)
	deltas = make([]uint64, blocks*1024)
	ok := func(p int) bool { return p < n && (valid == nil || bitGet(valid, p)) }
	for b := 0; b < blocks; b++ {
		off := b * 1024
		out := deltas[off : off+1024]
		for l := 0; l < dl.lanes; l++ {
			row := l * B
			// The first two real values of the lane give the base.
			first, second := -1, -1
			for r := 0; r < B && second < 0; r++ {
				if p := off + int(dl.orig[row+r]); ok(p) {
					if first < 0 {
						first = p
					} else {
						second = p
					}
				}
			}
			var guess uint64
			if second >= 0 {
				guess = (xs[second] - xs[first]) & mask
			}
			var prev uint64
			if first >= 0 {
				prev = (xs[first] - guess) & mask
			}
			bases[b*dl.lanes+l] = prev
			last := guess
			for r := 0; r < B; r++ {
				p := off + int(dl.orig[row+r])
				var d uint64
				if ok(p) {
					d = (xs[p] - prev) & mask
					last = d
				} else {
					d = last
				}
				prev = (prev + d) & mask
				out[dl.tidx[row+r]] = d
			}
		}
	}
	return bases, deltas
}

// untransposeBits undoes the reference's validity transposition of a delta
// array (per 1024-bit block: out bit j = in bit flTranspose(j)).
func untransposeBits(in []byte, nbits int) []byte {
	blocks := (nbits + 1023) / 1024
	out := make([]byte, blocks*128)
	for b := 0; b < blocks; b++ {
		for j := 0; j < 1024; j++ {
			src := b*1024 + flTranspose(j)
			if src/8 < len(in) && bitGet(in, src) {
				bitSet(out, b*1024+j)
			}
		}
	}
	return out
}
