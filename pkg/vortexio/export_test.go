package vortexio

// deltaDecode undoes deltaEncode: rows [offset, offset+n) of the blocks.
func deltaDecode(bases, deltas []uint64, B, offset, n int) ([]uint64, error) {
	dl := deltaLayouts[B]
	if dl == nil {
		return nil, corruptf("fastlanes.delta for %d-bit values", B)
	}
	if len(deltas)%1024 != 0 || offset+n > len(deltas) {
		return nil, corruptf("fastlanes.delta: %d deltas for rows [%d,+%d)", len(deltas), offset, n)
	}
	blocks := len(deltas) / 1024
	if len(bases) < blocks*dl.lanes {
		return nil, corruptf("fastlanes.delta: %d bases for %d blocks", len(bases), blocks)
	}
	mask := maskBits(uint(B))
	first, last := offset/1024, (offset+n+1023)/1024
	out := make([]uint64, (last-first)*1024)
	for b := first; b < last; b++ {
		in := deltas[b*1024 : b*1024+1024]
		o := out[(b-first)*1024:]
		for l := 0; l < dl.lanes; l++ {
			acc := bases[b*dl.lanes+l]
			row := l * B
			for r := 0; r < B; r++ {
				acc = (acc + in[dl.tidx[row+r]]) & mask
				o[dl.orig[row+r]] = acc
			}
		}
	}
	s := offset - first*1024
	return out[s : s+n], nil
}
