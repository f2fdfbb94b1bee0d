package roaring

import "fmt"

// Decode32 decodes a portable 32-bit bitmap at the start of b and returns
// its values in ascending order and the number of bytes it took.
func Decode32(b []byte, limit uint64) ([]uint32, int, error) {
	vals, n, err := decode32(b, limit, func(v uint32) uint64 { return uint64(v) }, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("roaring: %w", err)
	}
	out := make([]uint32, len(vals))
	for i, v := range vals {
		out[i] = uint32(v)
	}
	return out, n, nil
}
