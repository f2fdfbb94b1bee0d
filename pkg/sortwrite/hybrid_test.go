package sortwrite

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// encodeHybrid is a reference encoder of the RLE/bit-packed hybrid: runs
// of at least 8 equal values become repeated runs, the rest bit-packed
// groups of 8 (the last padded with zeros).
func encodeHybrid(vals []uint32, w int) []byte {
	var out []byte
	byteW := (w + 7) / 8
	i := 0
	for i < len(vals) {
		j := i
		for j < len(vals) && vals[j] == vals[i] {
			j++
		}
		if j-i >= 8 {
			out = binary.AppendUvarint(out, uint64(j-i)<<1)
			for k := 0; k < byteW; k++ {
				out = append(out, byte(vals[i]>>(8*k)))
			}
			i = j
			continue
		}
		groups := min((len(vals)-i+7)/8, 4)
		out = binary.AppendUvarint(out, uint64(groups)<<1|1)
		var acc uint64
		bits := 0
		for k := 0; k < groups*8; k++ {
			var v uint32
			if i+k < len(vals) {
				v = vals[i+k]
			}
			acc |= uint64(v) << bits
			bits += w
			for bits >= 8 {
				out = append(out, byte(acc))
				acc >>= 8
				bits -= 8
			}
		}
		i += groups * 8
	}
	return out
}

func TestDecodeHybrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, w := range []int{0, 1, 2, 3, 5, 7, 8, 9, 12, 13, 16, 17, 20, 24, 31, 32} {
		for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 1000} {
			vals := make([]uint32, n)
			for i := range vals {
				if w > 0 {
					vals[i] = uint32(rng.Uint64() & (1<<w - 1))
				}
				if i%50 > 35 && i > 0 {
					vals[i] = vals[i-1] // runs
				}
			}
			got := make([]uint32, n)
			if err := decodeHybrid(encodeHybrid(vals, w), w, got); err != nil {
				t.Fatalf("w=%d n=%d: %v", w, n, err)
			}
			if !slices.Equal(got, vals) {
				t.Fatalf("w=%d n=%d: decoded %v, want %v", w, n, got[:min(n, 20)], vals[:min(n, 20)])
			}
		}
	}
}

func TestDecodeHybridMalformed(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		w, n int
	}{
		{"empty", nil, 3, 1},
		{"truncated varint", []byte{0x80}, 3, 1},
		{"repeated run without value", []byte{8 << 1}, 9, 8},
		{"value wider than the width", []byte{8 << 1, 0xff}, 3, 8},
		{"packed group cut short", []byte{1<<1 | 1, 0xff}, 3, 8},
		{"runs short of the count", []byte{2 << 1, 1}, 3, 5},
		{"width over 32", []byte{2 << 1, 1, 0, 0, 0, 0}, 33, 2},
		{"huge group count", binary.AppendUvarint(nil, 1<<62|1), 4, 8},
	}
	for _, tc := range cases {
		if err := decodeHybrid(tc.b, tc.w, make([]uint32, tc.n)); err == nil {
			t.Errorf("%s: decoded without error", tc.name)
		}
	}
}

// FuzzDecodeHybrid: any bytes decode or fail, never panic, and a decode
// that succeeds stays within the width.
func FuzzDecodeHybrid(f *testing.F) {
	f.Add(encodeHybrid([]uint32{1, 2, 3, 4, 5, 6, 7, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 3), 3, 17)
	f.Add([]byte{0x03, 0xff, 0xff, 0xff}, 24, 8)
	f.Fuzz(func(t *testing.T, b []byte, w, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		out := make([]uint32, n)
		if decodeHybrid(b, w, out) != nil {
			return
		}
		for _, v := range out {
			if w < 32 && v>>w != 0 {
				t.Fatalf("value %d wider than %d bits", v, w)
			}
		}
	})
}

// TestDecodeHybridLongRuns decodes bit-packed runs of many groups (as
// writers emit them: the unrolled group loop's case) at every width.
func TestDecodeHybridLongRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for w := 1; w <= 32; w++ {
		for _, n := range []int{8, 16, 100, 1000, 4096} {
			vals := make([]uint32, n)
			for i := range vals {
				vals[i] = uint32(rng.Uint64() & (1<<w - 1))
			}
			groups := (n + 7) / 8
			b := binary.AppendUvarint(nil, uint64(groups)<<1|1)
			var acc uint64
			bits := 0
			for k := 0; k < groups*8; k++ {
				var v uint32
				if k < n {
					v = vals[k]
				}
				acc |= uint64(v) << bits
				for bits += w; bits >= 8; bits -= 8 {
					b = append(b, byte(acc))
					acc >>= 8
				}
			}
			got := make([]uint32, n)
			if err := decodeHybrid(b, w, got); err != nil {
				t.Fatalf("w=%d n=%d: %v", w, n, err)
			}
			if !slices.Equal(got, vals) {
				t.Fatalf("w=%d n=%d: decoded %v, want %v", w, n, got[:min(n, 20)], vals[:min(n, 20)])
			}
		}
	}
}

func BenchmarkDecodeHybrid(b *testing.B) {
	for _, w := range []int{1, 9, 14} {
		rng := rand.New(rand.NewPCG(7, 8))
		const n = 1 << 16
		vals := make([]uint32, n)
		for i := range vals {
			vals[i] = uint32(rng.Uint64() & (1<<w - 1))
		}
		enc := binary.AppendUvarint(nil, uint64(n/8)<<1|1)
		var acc uint64
		bits := 0
		for _, v := range vals {
			acc |= uint64(v) << bits
			for bits += w; bits >= 8; bits -= 8 {
				enc = append(enc, byte(acc))
				acc >>= 8
			}
		}
		out := make([]uint32, n)
		b.Run("w="+string(rune('0'+w/10))+string(rune('0'+w%10)), func(b *testing.B) {
			b.SetBytes(n * 4)
			for b.Loop() {
				decodeHybrid(enc, w, out)
			}
		})
	}
}
