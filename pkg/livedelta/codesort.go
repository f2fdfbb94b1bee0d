package livedelta

import (
	"math/bits"
	"slices"
)

// codeDigit is the width of one pass of sortByCode: 11 bits sort a base of
// up to 4M series codes (the seed's 2.82M) in two passes, with a count
// table (16 KiB) that stays in L1.
const codeDigit = 11

// sortByCode sorts keys of the form code<<32|row, appended in ascending
// row order, exactly as slices.Sort would: by code, then row. It is an LSD
// radix sort over the code bits only; each pass is stable and the rows
// arrive in order, so the row bits need no pass. A write's 10k rows sort
// in a few passes over memory instead of ~n log n comparisons, which was
// the largest piece of Prepare on DoPut's acknowledgement path. tmp is
// scratch of at least len(keys); the result is either keys or tmp.
func sortByCode(keys, tmp []uint64, maxCode uint32) []uint64 {
	if len(keys) < 256 {
		slices.Sort(keys)
		return keys
	}
	tmp = tmp[:len(keys)]
	var count [1 << codeDigit]int
	src, dst := keys, tmp
	for shift := 32; shift < 32+bits.Len32(maxCode); shift += codeDigit {
		clear(count[:])
		for _, k := range src {
			count[(k>>shift)&(1<<codeDigit-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, k := range src {
			d := (k >> shift) & (1<<codeDigit - 1)
			dst[count[d]] = k
			count[d]++
		}
		src, dst = dst, src
	}
	return src
}
