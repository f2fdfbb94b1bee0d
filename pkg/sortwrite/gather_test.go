package sortwrite

import (
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// TestGatherValidity compares the word-at-a-time validity gather with a
// row-by-row reference, for every store kind that has validity, at lengths
// around the 64-row word boundary, with and without noRow entries.
func TestGatherValidity(t *testing.T) {
	const inputRows = 500
	rng := rand.New(rand.NewPCG(1, 2))
	fixed := &store{kind: kindFixed, width: 8, valid: make([]byte, inputRows)}
	noNull := &store{kind: kindFixed, width: 8, valid: make([]byte, inputRows), noNull: true}
	strs := &store{kind: kindString, codes: make([]uint32, inputRows)}
	for r := range inputRows {
		if rng.IntN(7) != 0 {
			fixed.valid[r] = 1
			strs.codes[r] = uint32(r)
		} else {
			strs.codes[r] = nullCode
		}
		noNull.valid[r] = 1
	}
	for _, tc := range []struct {
		name string
		s    *store
	}{{"fixed", fixed}, {"no nulls", noNull}, {"strings", strs}} {
		for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 129, 333} {
			for _, withNoRow := range []bool{false, true} {
				rows := make([]uint32, n)
				for i := range rows {
					rows[i] = uint32(rng.IntN(inputRows))
					if withNoRow && rng.IntN(5) == 0 {
						rows[i] = noRow
					}
				}
				wantBits := make([]byte, bitutil.BytesForBits(int64(n)))
				wantNulls := 0
				for i, r := range rows {
					if r != noRow && !tc.s.isNull(int(r)) {
						bitutil.SetBit(wantBits, i)
					} else {
						wantNulls++
					}
				}
				// From a slab holding dirty buffers: get must clear them.
				p := &slab{}
				for range 3 {
					dirty := make([]byte, (n+63)/64*8)
					for i := range dirty {
						dirty[i] = 0xff
					}
					p.put(dirty)
				}
				buf, nulls := tc.s.gatherValidity(rows, p)
				if nulls != wantNulls {
					t.Fatalf("%s, %d rows, noRow %v: %d nulls, want %d", tc.name, n, withNoRow, nulls, wantNulls)
				}
				if nulls == 0 {
					if buf != nil {
						t.Fatalf("%s, %d rows: a bitmap without nulls", tc.name, n)
					}
					continue
				}
				if got := buf.Bytes(); string(got) != string(wantBits) {
					t.Fatalf("%s, %d rows, noRow %v: bitmap\n%08b\nwant\n%08b", tc.name, n, withNoRow, got, wantBits)
				}
			}
		}
	}
}

func TestSlabClass(t *testing.T) {
	for n := 1; n < 1<<22; n = n*5/4 + 1 {
		c := slabClass(n)
		if c < n || c > n+n/4+1 {
			t.Fatalf("slabClass(%d) = %d: want at least n and at most n+n/4", n, c)
		}
		if slabClass(c) != c {
			t.Fatalf("slabClass(%d) = %d is not a class", n, c)
		}
	}
}

// TestGatherValidFused compares the one-pass gather of a nullable
// fixed-width column (nullsZero) with the two-pass one, byte for byte, for
// every width, with valid zeros, nulls and noRow entries among the rows.
func TestGatherValidFused(t *testing.T) {
	const inputRows = 700
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64} {
		st := newStore(Column{Name: "v", Type: typ}, inputRows, nil)
		for r := range inputRows {
			switch rng.IntN(4) {
			case 0: // null: zero bytes, as the readers leave them
			case 1: // a valid zero
				st.valid[r] = 1
			default:
				st.valid[r] = 1
				for k := range st.width {
					st.data[r*st.width+k] = byte(rng.IntN(256))
				}
			}
		}
		for _, n := range []int{1, 63, 64, 65, 200, 513} {
			rows := make([]uint32, n)
			for i := range rows {
				rows[i] = uint32(rng.IntN(inputRows))
				if rng.IntN(9) == 0 {
					rows[i] = noRow
				}
			}
			st.nullsZero = false
			want, err := st.gather(rows)
			if err != nil {
				t.Fatal(err)
			}
			st.nullsZero = true
			got, err := st.gatherFrom(rows, &slab{})
			if err != nil {
				t.Fatal(err)
			}
			if !array.Equal(got, want) || got.NullN() != want.NullN() {
				t.Fatalf("%s, %d rows: fused gather %v, want %v", typ, n, got, want)
			}
			for k, b := range want.Data().Buffers() {
				if gb := got.Data().Buffers()[k]; (b == nil) != (gb == nil) || (b != nil && string(b.Bytes()) != string(gb.Bytes())) {
					t.Fatalf("%s, %d rows: buffer %d differs", typ, n, k)
				}
			}
			got.Release()
			want.Release()
		}
	}
}
