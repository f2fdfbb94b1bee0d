package vortexio

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// bitw is a test-only LSB-first bit writer, the inverse of pcoBits.
type bitw struct {
	b   []byte
	pos uint
}

func (w *bitw) put(v uint64, n uint) {
	for i := uint(0); i < n; i++ {
		if w.pos/8 >= uint(len(w.b)) {
			w.b = append(w.b, 0)
		}
		if v>>i&1 != 0 {
			w.b[w.pos/8] |= 1 << (w.pos % 8)
		}
		w.pos++
	}
}

func (w *bitw) align() {
	for w.pos%8 != 0 {
		w.put(0, 1)
	}
}

func TestPcoBits(t *testing.T) {
	var w bitw
	vals := []struct {
		v uint64
		n uint
	}{{5, 3}, {0, 0}, {1, 1}, {0x1234, 13}, {math.MaxUint64, 64}, {0xdeadbeefcafe, 57}, {3, 2}, {0x8000000000000001, 64}}
	for _, x := range vals {
		w.put(x.v, x.n)
	}
	r := &pcoBits{b: w.b}
	for i, x := range vals {
		mask := widthMask(x.n)
		if x.n == 0 {
			mask = 0
		}
		if got := r.read(x.n); got != x.v&mask {
			t.Fatalf("field %d: got %#x, want %#x", i, got, x.v&mask)
		}
	}
	if r.over() {
		t.Fatal("over after exact read")
	}
	// Past the end: zeros, reported by over, never a panic.
	if got := r.read(64); got != 0 {
		t.Fatalf("read past end = %#x", got)
	}
	if got := r.read(64); got != 0 || !r.over() {
		t.Fatalf("read past end = %#x, over=%v", got, r.over())
	}
	r = &pcoBits{b: []byte{0xff}}
	r.read(3)
	r.align()
	if r.pos != 8 || r.over() {
		t.Fatalf("align: pos %d", r.pos)
	}
}

func TestPcoSpreadAndDecoder(t *testing.T) {
	// Table of 4 with weights [3, 1]: stride 3 visits states 0, 3, 2 for
	// symbol 0 and then state 1 for symbol 1.
	syms, err := pcoSpread(2, []uint32{3, 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint32{0, 1, 0, 0}; !equalU32(syms, want) {
		t.Fatalf("spread %v, want %v", syms, want)
	}
	if _, err := pcoSpread(2, []uint32{3, 2}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad weights: %v", err)
	}
	v := &pcoLatentVar{width: 32, ansLog: 2, bins: []pcoBin{{3, 10, 1}, {1, 20, 2}}}
	if err := v.buildDecoder(); err != nil {
		t.Fatal(err)
	}
	// State i decodes symbol syms[i]; its x_s runs from the weight upwards
	// and is renormalised into [4, 8) by reading bits.
	want := []pcoNode{
		{nextBase: 2, bits: 1, lower: 10, offBits: 1}, // x=3: 3<<1 - 4
		{nextBase: 0, bits: 2, lower: 20, offBits: 2}, // x=1: 1<<2 - 4
		{nextBase: 0, bits: 0, lower: 10, offBits: 1}, // x=4
		{nextBase: 1, bits: 0, lower: 10, offBits: 1}, // x=5
	}
	for i := range want {
		if v.nodes[i] != want[i] {
			t.Fatalf("node %d = %+v, want %+v", i, v.nodes[i], want[i])
		}
	}
	// Every reachable next state stays inside the table.
	for i, nd := range v.nodes {
		if nd.nextBase+(1<<nd.bits)-1 >= 4 {
			t.Fatalf("node %d can leave the table", i)
		}
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// pcoOneBinChunk builds a u32/i32 chunk meta: Classic mode, the given delta
// encoding bits, one bin (lower, offBits).
func pcoOneBinChunk(delta func(w *bitw), lower uint64, offBits uint) []byte {
	var w bitw
	w.put(pcoClassic, 4)
	delta(&w)
	w.put(0, 4)  // ans size log
	w.put(1, 15) // bins
	w.put(0, 0)  // weight-1 in 0 bits
	w.put(lower, 32)
	w.put(uint64(offBits), 6)
	w.align()
	return w.b
}

func TestPcoDecodeHandBuilt(t *testing.T) {
	// Classic, no delta: values = 100 + 4-bit offsets.
	meta := pcoOneBinChunk(func(w *bitw) { w.put(pcoDeltaNone, 4) }, 100, 4)
	c, err := parsePcoChunk(meta, U32)
	if err != nil {
		t.Fatal(err)
	}
	c.ptypeKind = pcoKind(U32)
	offs := []uint64{0, 15, 3, 7, 1}
	var w bitw
	w.put(0, 0) // four 0-bit tANS states
	w.align()
	for _, o := range offs {
		w.put(o, 4)
	}
	dst := make([]uint64, len(offs))
	if err := decodePcoPage(c, w.b, dst); err != nil {
		t.Fatal(err)
	}
	for i, o := range offs {
		if dst[i] != 100+o {
			t.Fatalf("value %d = %d, want %d", i, dst[i], 100+o)
		}
	}
	// A truncated page is corrupt, not a panic.
	if err := decodePcoPage(c, w.b[:1], dst); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated page: %v", err)
	}

	// i32, consecutive delta of order 1: the moment is the first latent and
	// each stored delta is centred (top bit toggled).
	meta = pcoOneBinChunk(func(w *bitw) { w.put(pcoDeltaConsecutive, 4); w.put(1, 3); w.put(0, 1) }, 1<<31-2, 2)
	if c, err = parsePcoChunk(meta, I32); err != nil {
		t.Fatal(err)
	}
	c.ptypeKind = pcoKind(I32)
	want := []int32{-7, -9, -8, -8, -7}
	w = bitw{}
	w.put(uint64(uint32(want[0]))^1<<31, 32) // delta moment (latent of -7)
	w.align()
	for i := 1; i < len(want); i++ {
		d := want[i] - want[i-1] // deltas -2..1 = lower (-2) + offset
		w.put(uint64(d+2), 2)
	}
	dst = make([]uint64, len(want))
	if err := decodePcoPage(c, w.b, dst); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if int32(uint32(dst[i])) != want[i] {
			t.Fatalf("value %d = %d, want %d", i, int32(uint32(dst[i])), want[i])
		}
	}
}

func TestPcoChunkErrors(t *testing.T) {
	var w bitw
	w.put(pcoClassic, 4)
	w.put(pcoDeltaConv1, 4)
	w.put(0, 64)
	if _, err := parsePcoChunk(w.b, I32); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("conv1: %v", err)
	}
	w = bitw{}
	w.put(9, 4)
	if _, err := parsePcoChunk(append(w.b, 0), I32); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("mode 9: %v", err)
	}
	w = bitw{}
	w.put(pcoClassic, 4)
	w.put(pcoDeltaNone, 4)
	w.put(1, 4)  // table of 2
	w.put(5, 15) // 5 bins
	if _, err := parsePcoChunk(append(w.b, make([]byte, 64)...), I32); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("too many bins: %v", err)
	}
	w = bitw{}
	w.put(pcoIntMult, 4)
	if _, err := parsePcoChunk(append(w.b, make([]byte, 16)...), F64); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("IntMult for floats: %v", err)
	}
	// Random bytes never panic.
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		p := []PType{U16, I32, U64, F32, F64}[i%5]
		c, err := parsePcoChunk(b, p)
		if err != nil {
			continue
		}
		c.ptypeKind = pcoKind(p)
		page := make([]byte, rng.IntN(300))
		for j := range page {
			page[j] = byte(rng.Uint32())
		}
		_ = decodePcoPage(c, page, make([]uint64, rng.IntN(600)))
	}
}

func TestPcoNumberMaps(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 1.5, -1.5, math.Inf(1), math.Inf(-1), 5e-324, -math.MaxFloat64} {
		b := math.Float64bits(f)
		l := pcoFloatLatentFromBits(b, 64)
		if got := pcoFloatBitsFromLatent(l, 64); got != b {
			t.Fatalf("f64 %v: round trip %#x", f, got)
		}
	}
	// Order preservation: -1 < -0 < +0 < 1.
	ls := []uint64{
		pcoFloatLatentFromBits(math.Float64bits(-1), 64),
		pcoFloatLatentFromBits(math.Float64bits(math.Copysign(0, -1)), 64),
		pcoFloatLatentFromBits(0, 64),
		pcoFloatLatentFromBits(math.Float64bits(1), 64),
	}
	for i := 1; i < len(ls); i++ {
		if ls[i] <= ls[i-1] {
			t.Fatalf("float latents out of order: %v", ls)
		}
	}
	f32 := uint64(math.Float32bits(-2.5))
	if got := pcoFloatBitsFromLatent(pcoFloatLatentFromBits(f32, 32), 32); got != f32 {
		t.Fatalf("f32 round trip %#x", got)
	}
	mid := uint64(1) << 63
	for _, c := range []struct {
		l    uint64
		w    uint
		want float64
	}{
		{mid + 5, 64, 5}, {mid - 6, 64, -5}, {mid, 64, 0},
		{mid + 1<<53 + 1, 64, 1<<53 + 2}, // past 2^53 it steps through bit patterns
		{1<<31 + 7, 32, 7}, {1<<31 + 1<<24 + 1, 32, 1<<24 + 2},
	} {
		if got := pcoIntFloatFromLatent(c.l, c.w); got != c.want {
			t.Fatalf("int float of %#x/%d = %v, want %v", c.l, c.w, got, c.want)
		}
	}
}
