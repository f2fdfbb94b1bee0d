package livedelta

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestGather2 checks the hand gather against the values it selects, for
// every path (fixed widths 1, 4, 8, 16, booleans, strings and binaries, the
// concatenate-and-take fallback), with nulls and with sliced inputs.
func TestGather2(t *testing.T) {
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int32, arrow.FixedWidthTypes.Date32,
		arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Timestamp_us, &arrow.Decimal128Type{Precision: 20, Scale: 2},
		arrow.FixedWidthTypes.Boolean, arrow.BinaryTypes.String, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeString,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range types {
		for _, nulls := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/nulls=%v", dt, nulls), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				mk := func(n int) arrow.Array {
					var sb strings.Builder
					for i := 0; i < n; i++ {
						if i > 0 {
							sb.WriteByte(',')
						}
						switch {
						case nulls && rng.IntN(4) == 0:
							sb.WriteString("null")
						case dt.ID() == arrow.BOOL:
							fmt.Fprint(&sb, rng.IntN(2) == 0)
						case dt.ID() == arrow.STRING || dt.ID() == arrow.LARGE_STRING:
							fmt.Fprintf(&sb, "%q", strings.Repeat("x", rng.IntN(5))+fmt.Sprint(rng.IntN(100)))
						case dt.ID() == arrow.BINARY:
							fmt.Fprintf(&sb, "%q", "AQID") // base64
						case dt.ID() == arrow.DECIMAL128:
							fmt.Fprintf(&sb, "%q", fmt.Sprintf("%d.%02d", rng.IntN(1000), rng.IntN(100)))
						default:
							fmt.Fprint(&sb, rng.IntN(100))
						}
					}
					a, _, err := array.FromJSON(mem, dt, strings.NewReader("["+sb.String()+"]"))
					if err != nil {
						t.Fatal(err)
					}
					// slice off the first two rows: inputs with offsets
					s := array.NewSlice(a, 2, int64(n))
					a.Release()
					return s
				}
				a, b := mk(40), mk(30)
				defer a.Release()
				defer b.Release()
				var sel []uint32
				for i := 0; i < 100; i++ {
					if rng.IntN(2) == 0 {
						sel = append(sel, uint32(rng.IntN(a.Len())))
					} else {
						sel = append(sel, uint32(rng.IntN(b.Len()))|fromB)
					}
				}
				got, err := gather2(mem, a, b, sel)
				if err != nil {
					t.Fatal(err)
				}
				defer got.Release()
				if got.Len() != len(sel) || !arrow.TypeEqual(got.DataType(), dt) {
					t.Fatalf("got %d rows of %s", got.Len(), got.DataType())
				}
				for i, s := range sel {
					src, r := a, int(s)
					if s&fromB != 0 {
						src, r = b, int(s&^fromB)
					}
					if got.IsNull(i) != src.IsNull(r) || !got.IsNull(i) && got.ValueStr(i) != src.ValueStr(r) {
						t.Fatalf("row %d: got %q (null %v), want %q (null %v)", i, got.ValueStr(i), got.IsNull(i), src.ValueStr(r), src.IsNull(r))
					}
				}
			})
		}
	}
}
