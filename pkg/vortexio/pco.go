package vortexio

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
)

// vortex.pco stores the valid values of a primitive array as Pcodec
// ("pco") wrapped-format components: array metadata (protobuf) holds the pco
// header and, per pco chunk, the value counts of its pages; buffers are all
// chunk metas followed by all pages; the optional child is the validity.
//
// The pco format (format versions 3 and 4): a chunk meta gives the mode
// (how a number splits into up to two latents), the delta encoding and, per
// latent variable, a tANS table of bins (weight, lower bound, offset bits).
// A page holds per latent variable its delta state and four interleaved
// tANS states, then batches of 256 numbers, each batch holding per latent
// variable the tANS-coded bin indices followed by the bins' offsets.
//
// Supported: modes Classic, IntMult, FloatMult, FloatQuant and Dict; delta
// encodings None, Consecutive and Lookback; 16-, 32- and 64-bit integers
// and 32/64-bit floats. Conv1 delta encoding and f16 fail with
// ErrUnsupported.

const (
	pcoBatch      = 256
	pcoMaxAnsLog  = 14
	pcoMaxEntries = 1 << 24
)

// pcoBits reads little-endian bit-packed fields (LSB first). Reads past the
// end yield zero bits and are reported by over.
type pcoBits struct {
	b   []byte
	pos uint64 // bit position
}

func (r *pcoBits) read(n uint) uint64 {
	if n == 0 {
		return 0
	}
	i := r.pos >> 3
	sh := uint(r.pos & 7)
	r.pos += uint64(n)
	var w uint64
	if i+8 <= uint64(len(r.b)) {
		w = binary.LittleEndian.Uint64(r.b[i:])
	} else {
		for k := uint64(0); k < 8 && i+k < uint64(len(r.b)); k++ {
			w |= uint64(r.b[i+k]) << (8 * k)
		}
	}
	v := w >> sh
	if n+sh > 64 && i+8 < uint64(len(r.b)) {
		v |= uint64(r.b[i+8]) << (64 - sh)
	}
	if n < 64 {
		v &= 1<<n - 1
	}
	return v
}

// over tells whether reads went past the end of the buffer.
func (r *pcoBits) over() bool { return r.pos > 8*uint64(len(r.b)) }

// align skips to the next byte boundary.
func (r *pcoBits) align() { r.pos = (r.pos + 7) &^ 7 }

// pcoBin is one bin of a latent variable.
type pcoBin struct {
	weight  uint32
	lower   uint64
	offBits uint
}

// pcoNode is one tANS decoding table entry.
type pcoNode struct {
	nextBase uint32
	bits     uint8
	lower    uint64
	offBits  uint8
}

// pcoLatentVar is the chunk-level description of one latent variable.
type pcoLatentVar struct {
	width  uint // latent bits: 16, 32 or 64
	ansLog uint
	bins   []pcoBin
	nodes  []pcoNode // tANS decoder, 1<<ansLog entries
}

// pcoSpread assigns each tANS state its symbol: symbol s gets weight[s]
// states, visited with an odd stride of about 3/5 of the table.
func pcoSpread(ansLog uint, weights []uint32) ([]uint32, error) {
	size := uint32(1) << ansLog
	total := uint64(0)
	for _, w := range weights {
		total += uint64(w)
	}
	if total != uint64(size) {
		return nil, corruptf("pco: tANS weights sum to %d, table size is %d", total, size)
	}
	stride := 3 * size / 5
	if stride%2 == 0 {
		stride++
	}
	out := make([]uint32, size)
	step := uint32(0)
	for s, w := range weights {
		for k := uint32(0); k < w; k++ {
			out[(stride*step)&(size-1)] = uint32(s)
			step++
		}
	}
	return out, nil
}

// buildDecoder fills v.nodes from v.bins.
func (v *pcoLatentVar) buildDecoder() error {
	weights := make([]uint32, len(v.bins))
	for i, b := range v.bins {
		weights[i] = b.weight
	}
	if len(weights) == 0 {
		weights = []uint32{1}
	}
	syms, err := pcoSpread(v.ansLog, weights)
	if err != nil {
		return err
	}
	size := uint32(1) << v.ansLog
	next := append([]uint32(nil), weights...)
	v.nodes = make([]pcoNode, size)
	for i, s := range syms {
		x := next[s]
		next[s]++
		b := uint(bits.LeadingZeros32(x) - bits.LeadingZeros32(size))
		nd := pcoNode{nextBase: x<<b - size, bits: uint8(b)}
		if int(s) < len(v.bins) {
			nd.lower = v.bins[s].lower
			nd.offBits = uint8(v.bins[s].offBits)
		}
		v.nodes[i] = nd
	}
	return nil
}

func readPcoLatentVar(r *pcoBits, width uint) (*pcoLatentVar, error) {
	v := &pcoLatentVar{width: width, ansLog: uint(r.read(4))}
	nb := int(r.read(15))
	if v.ansLog > pcoMaxAnsLog {
		return nil, corruptf("pco: tANS size log %d", v.ansLog)
	}
	if nb > 1<<v.ansLog || nb == 1 && v.ansLog > 0 {
		return nil, corruptf("pco: %d bins for tANS size log %d", nb, v.ansLog)
	}
	// Each bin takes at least ansLog+width+5 bits: refuse counts the buffer cannot hold.
	if uint64(nb)*uint64(v.ansLog+width+5) > 8*uint64(len(r.b)) {
		return nil, corruptf("pco: %d bins overrun the chunk meta", nb)
	}
	obBits := uint(bits.Len(width)) // log2(width)+1
	v.bins = make([]pcoBin, nb)
	for i := range v.bins {
		b := &v.bins[i]
		b.weight = uint32(r.read(v.ansLog)) + 1
		b.lower = r.read(width)
		b.offBits = uint(r.read(obBits))
		if b.offBits > width {
			return nil, corruptf("pco: bin offset bits %d for %d-bit latents", b.offBits, width)
		}
	}
	if r.over() {
		return nil, corruptf("pco: truncated chunk meta")
	}
	return v, v.buildDecoder()
}

// pco modes and delta encodings.
const (
	pcoClassic = iota
	pcoIntMult
	pcoFloatMult
	pcoFloatQuant
	pcoDict
)

const (
	pcoDeltaNone = iota
	pcoDeltaConsecutive
	pcoDeltaLookback
	pcoDeltaConv1
)

// pcoChunk is a parsed pco chunk meta.
type pcoChunk struct {
	width     uint // number (and latent) width
	ptypeKind byte // 'u', 'i' or 'f'
	mode      int
	base      uint64 // IntMult/FloatMult base (as latent), FloatQuant k
	dict      []uint64
	delta     int
	order     int  // consecutive order
	windowLog uint // lookback
	stateLog  uint
	secDelta  bool
	lookback  *pcoLatentVar
	primary   *pcoLatentVar
	secondary *pcoLatentVar
}

func parsePcoChunk(b []byte, p PType) (*pcoChunk, error) {
	c := &pcoChunk{width: uint(p.Width() * 8)}
	r := &pcoBits{b: b}
	c.mode = int(r.read(4))
	switch c.mode {
	case pcoClassic:
	case pcoIntMult:
		if !p.isInt() {
			return nil, corruptf("pco: IntMult mode for %s", p)
		}
		c.base = r.read(c.width)
	case pcoFloatMult:
		if !p.isFloat() {
			return nil, corruptf("pco: FloatMult mode for %s", p)
		}
		c.base = r.read(c.width)
		f := pcoFloatFromLatent(c.base, c.width)
		if f == 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, corruptf("pco: FloatMult base %v", f)
		}
	case pcoFloatQuant:
		if !p.isFloat() {
			return nil, corruptf("pco: FloatQuant mode for %s", p)
		}
		c.base = r.read(8)
		mant := uint64(52)
		if c.width == 32 {
			mant = 23
		}
		if c.base == 0 || c.base > mant {
			return nil, corruptf("pco: FloatQuant k=%d", c.base)
		}
	case pcoDict:
		nd := r.read(25)
		if r.read(uint(-r.pos&7)) != 0 {
			return nil, corruptf("pco: nonzero padding after dict length")
		}
		if nd*uint64(c.width) > 8*uint64(len(b)) {
			return nil, corruptf("pco: dict of %d values overruns the chunk meta", nd)
		}
		c.dict = make([]uint64, nd)
		for i := range c.dict {
			c.dict[i] = r.read(c.width)
		}
	default:
		return nil, unsupportedf("pco mode %d", c.mode)
	}
	c.delta = int(r.read(4))
	switch c.delta {
	case pcoDeltaNone:
	case pcoDeltaConsecutive:
		c.order = int(r.read(3))
		c.secDelta = r.read(1) != 0
		if c.order == 0 {
			return nil, corruptf("pco: consecutive delta of order 0")
		}
	case pcoDeltaLookback:
		c.windowLog = uint(r.read(5)) + 1
		c.stateLog = uint(r.read(4))
		c.secDelta = r.read(1) != 0
		if c.windowLog > 24 || c.stateLog > c.windowLog {
			return nil, corruptf("pco: lookback window log %d, state log %d", c.windowLog, c.stateLog)
		}
	case pcoDeltaConv1:
		return nil, unsupportedf("pco delta encoding Conv1")
	default:
		return nil, corruptf("pco: delta encoding %d", c.delta)
	}
	var err error
	if c.delta == pcoDeltaLookback {
		if c.lookback, err = readPcoLatentVar(r, 32); err != nil {
			return nil, err
		}
		for _, bn := range c.lookback.bins {
			if bn.lower < 1 || bn.lower > 1<<c.windowLog {
				return nil, corruptf("pco: lookback bin lower %d outside the window", bn.lower)
			}
		}
	}
	pw := c.width
	if c.mode == pcoDict {
		pw = 32
	}
	if c.primary, err = readPcoLatentVar(r, pw); err != nil {
		return nil, err
	}
	if c.mode == pcoIntMult || c.mode == pcoFloatMult || c.mode == pcoFloatQuant {
		if c.secondary, err = readPcoLatentVar(r, c.width); err != nil {
			return nil, err
		}
	}
	r.align()
	if r.over() {
		return nil, corruptf("pco: truncated chunk meta")
	}
	return c, nil
}

// stateN is the number of delta state latents of the primary variable (and
// of the secondary when it is delta encoded).
func (c *pcoChunk) stateN() int {
	switch c.delta {
	case pcoDeltaConsecutive:
		return c.order
	case pcoDeltaLookback:
		return 1 << c.stateLog
	}
	return 0
}

// pcoPageVar is the page-level state of one latent variable.
type pcoPageVar struct {
	v      *pcoLatentVar
	nState int
	state  []uint64
	ans    [4]uint32
	out    []uint64 // pre-delta latents of the page
	k      int      // latents filled so far
}

// readBatch decodes n latents: tANS bin indices, then the bins' offsets.
func (pv *pcoPageVar) readBatch(r *pcoBits, n int, offs *[pcoBatch]uint8) error {
	if n <= 0 {
		return nil
	}
	v := pv.v
	if pv.k+n > len(pv.out) {
		return corruptf("pco: page overrun")
	}
	dst := pv.out[pv.k : pv.k+n]
	pv.k += n
	switch len(v.bins) {
	case 0:
		return corruptf("pco: latents without bins")
	case 1:
		for i := range dst {
			dst[i] = v.bins[0].lower
			offs[i] = uint8(v.bins[0].offBits)
		}
	default:
		mask := uint32(len(v.nodes) - 1)
		for i := range dst {
			j := i & 3
			nd := &v.nodes[pv.ans[j]&mask]
			dst[i] = nd.lower
			offs[i] = nd.offBits
			pv.ans[j] = nd.nextBase + uint32(r.read(uint(nd.bits)))
		}
	}
	m := widthMask(v.width)
	for i := range dst {
		dst[i] = (dst[i] + r.read(uint(offs[i]))) & m
	}
	if r.over() {
		return corruptf("pco: truncated page")
	}
	return nil
}

func widthMask(w uint) uint64 {
	if w >= 64 {
		return math.MaxUint64
	}
	return 1<<w - 1
}

// decodePcoPage decodes a page of n numbers into dst (latent bit patterns
// of the number type).
func decodePcoPage(c *pcoChunk, page []byte, dst []uint64) error {
	n := len(dst)
	r := &pcoBits{b: page}
	sn := c.stateN()
	body := max(n-sn, 0)
	var vars []*pcoPageVar
	var lb, prim, sec *pcoPageVar
	mk := func(v *pcoLatentVar, nState, cnt int) *pcoPageVar {
		pv := &pcoPageVar{v: v, nState: nState, state: make([]uint64, nState)}
		for i := range pv.state {
			pv.state[i] = r.read(v.width)
		}
		for j := range pv.ans {
			pv.ans[j] = uint32(r.read(v.ansLog))
		}
		pv.out = make([]uint64, cnt)
		vars = append(vars, pv)
		return pv
	}
	if c.lookback != nil {
		lb = mk(c.lookback, 0, body)
	}
	prim = mk(c.primary, sn, n)
	if c.secondary != nil {
		ss := 0
		if c.secDelta {
			ss = sn
		}
		sec = mk(c.secondary, ss, n)
	}
	r.align()
	if r.over() {
		return corruptf("pco: truncated page meta")
	}
	var offs [pcoBatch]uint8
	for start := 0; start < n; start += pcoBatch {
		rem := n - start
		if lb != nil {
			if err := lb.readBatch(r, min(rem-sn, pcoBatch), &offs); err != nil {
				return err
			}
		}
		if err := prim.readBatch(r, min(rem-prim.nState, pcoBatch), &offs); err != nil {
			return err
		}
		if sec != nil {
			if err := sec.readBatch(r, min(rem-sec.nState, pcoBatch), &offs); err != nil {
				return err
			}
		}
	}
	var lookbacks []uint64
	if lb != nil {
		lookbacks = lb.out
	}
	if err := c.undelta(prim, lookbacks); err != nil {
		return err
	}
	if sec != nil {
		if err := c.undelta(sec, lookbacks); err != nil {
			return err
		}
	}
	return c.join(prim.out, sec, dst)
}

// undelta turns the pre-delta latents of pv (its first len-nState entries)
// into the page's latents.
func (c *pcoChunk) undelta(pv *pcoPageVar, lookbacks []uint64) error {
	if pv.nState == 0 {
		return nil
	}
	w := pv.v.width
	m := widthMask(w)
	mid := uint64(1) << (w - 1)
	xs := pv.out
	body := max(len(xs)-pv.nState, 0)
	for i := range xs[:body] {
		xs[i] ^= mid
	}
	clear(xs[body:])
	switch c.delta {
	case pcoDeltaConsecutive:
		// Repeated prefix sums, each seeded by its delta moment, last first.
		for k := len(pv.state) - 1; k >= 0; k-- {
			mom := pv.state[k]
			for i, d := range xs {
				xs[i] = mom
				mom = (mom + d) & m
			}
		}
	case pcoDeltaLookback:
		// The sequence is the state followed by the decoded latents; each
		// decoded latent adds the one lookback positions earlier (zero before
		// the start). The page's latents are its first len(xs) entries.
		sn := pv.nState
		seq := make([]uint64, sn+body)
		copy(seq, pv.state)
		win := uint64(1) << c.windowLog
		for i := 0; i < body; i++ {
			l := lookbacks[i]
			if l == 0 || l > win {
				return corruptf("pco: lookback %d outside the window of %d", l, win)
			}
			p := sn + i
			prev := uint64(0)
			if uint64(p) >= l {
				prev = seq[uint64(p)-l]
			}
			seq[p] = (xs[i] + prev) & m
		}
		copy(xs, seq)
	}
	return nil
}

// join maps latents to the bit patterns of the numbers.
func (c *pcoChunk) join(prim []uint64, sec *pcoPageVar, dst []uint64) error {
	w := c.width
	m := widthMask(w)
	isFloat := false
	isSigned := false
	switch c.ptypeKind {
	case 'f':
		isFloat = true
	case 'i':
		isSigned = true
	}
	ord := func(l uint64) uint64 {
		switch {
		case isFloat:
			return pcoFloatBitsFromLatent(l, w)
		case isSigned:
			return l ^ (1 << (w - 1))
		}
		return l
	}
	switch c.mode {
	case pcoClassic:
		for i, l := range prim {
			dst[i] = ord(l)
		}
	case pcoDict:
		for i, l := range prim {
			if l >= uint64(len(c.dict)) {
				return corruptf("pco: dict index %d of %d", l, len(c.dict))
			}
			dst[i] = ord(c.dict[l])
		}
	case pcoIntMult:
		s := sec.out
		for i, l := range prim {
			dst[i] = ord((l*c.base + s[i]) & m)
		}
	case pcoFloatMult:
		s := sec.out
		mid := uint64(1) << (w - 1)
		if w == 32 {
			base := math.Float32frombits(uint32(pcoFloatBitsFromLatent(c.base, 32)))
			for i, l := range prim {
				u := float32(pcoIntFloatFromLatent(l, 32)) * base
				lat := pcoFloatLatentFromBits(uint64(math.Float32bits(u)), 32)
				dst[i] = ord(((lat + s[i]) & m) ^ mid)
			}
		} else {
			base := math.Float64frombits(pcoFloatBitsFromLatent(c.base, 64))
			for i, l := range prim {
				u := pcoIntFloatFromLatent(l, 64) * base
				lat := pcoFloatLatentFromBits(math.Float64bits(u), 64)
				dst[i] = ord(((lat + s[i]) & m) ^ mid)
			}
		}
	case pcoFloatQuant:
		s := sec.out
		k := uint(c.base)
		cut := (uint64(1) << (w - 1)) >> k
		lowMax := uint64(1)<<k - 1
		for i, y := range prim {
			low := s[i]
			if y < cut {
				low = lowMax - low
			}
			dst[i] = ord(((y << k) + low) & m)
		}
	}
	return nil
}

// pcoFloatBitsFromLatent inverts the order-preserving float map: the sign
// bit is toggled, and for negatives all bits are.
func pcoFloatBitsFromLatent(l uint64, w uint) uint64 {
	sign := uint64(1) << (w - 1)
	if l&sign != 0 {
		return l ^ sign
	}
	return ^l & widthMask(w)
}

func pcoFloatLatentFromBits(b uint64, w uint) uint64 {
	sign := uint64(1) << (w - 1)
	if b&sign != 0 {
		return ^b & widthMask(w)
	}
	return b ^ sign
}

func pcoFloatFromLatent(l uint64, w uint) float64 {
	b := pcoFloatBitsFromLatent(l, w)
	if w == 32 {
		return float64(math.Float32frombits(uint32(b)))
	}
	return math.Float64frombits(b)
}

// pcoIntFloatFromLatent maps a latent to an integer-valued float: the
// distance from the middle, exact up to 2^mantissa_digits and continuing
// through the float bit patterns beyond.
func pcoIntFloatFromLatent(l uint64, w uint) float64 {
	mid := uint64(1) << (w - 1)
	neg := l < mid
	var a uint64
	if neg {
		a = mid - 1 - l
	} else {
		a = l - mid
	}
	var f float64
	if w == 32 {
		const gpi = 1 << 24
		var x float32
		if a < gpi {
			x = float32(a)
		} else {
			x = math.Float32frombits(math.Float32bits(gpi) + uint32(a-gpi))
		}
		f = float64(x)
	} else {
		const gpi = 1 << 53
		if a < gpi {
			f = float64(a)
		} else {
			f = math.Float64frombits(math.Float64bits(gpi) + (a - gpi))
		}
	}
	if neg {
		f = -f
	}
	return f
}

// decodePco decodes a vortex.pco array.
func (d *decoder) decodePco(nd *anode, dt *DType, n int) (*vec, error) {
	sd := storage(dt)
	if sd.Kind != KindPrimitive {
		return nil, corruptf("vortex.pco for %s", dt)
	}
	p := sd.PType
	switch p {
	case U16, U32, U64, I16, I32, I64, F32, F64:
	default:
		return nil, unsupportedf("vortex.pco for %s", p)
	}
	if err := d.expectKids(nd, 0, 1); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	hdr, _ := m.msg(1)
	if len(hdr) < 1 {
		return nil, corruptf("vortex.pco: missing pco header")
	}
	if hdr[0] < 3 || hdr[0] > 4 {
		return nil, unsupportedf("pco format version %d", hdr[0])
	}
	if hdr[0] >= 4 && len(hdr) < 2 {
		return nil, corruptf("vortex.pco: truncated pco header")
	}
	// Chunks (field 2), each a list of pages (field 1) with n_values (field 1).
	var chunkPages [][]uint64
	npages := 0
	for _, f := range m {
		if f.num != 2 {
			continue
		}
		if f.wire != wireLen {
			return nil, corruptf("vortex.pco: chunk info wire type %d", f.wire)
		}
		cm, err := pbDecode(f.b)
		if err != nil {
			return nil, err
		}
		var pages []uint64
		for _, pf := range cm {
			if pf.num != 1 {
				continue
			}
			if pf.wire != wireLen {
				return nil, corruptf("vortex.pco: page info wire type %d", pf.wire)
			}
			pm, err := pbDecode(pf.b)
			if err != nil {
				return nil, err
			}
			pages = append(pages, pm.uint(1))
			npages++
			if npages > len(nd.bufs) {
				return nil, corruptf("vortex.pco: more pages than buffers")
			}
		}
		chunkPages = append(chunkPages, pages)
	}
	if len(nd.bufs) != len(chunkPages)+npages {
		return nil, corruptf("vortex.pco: %d buffers for %d chunks and %d pages", len(nd.bufs), len(chunkPages), npages)
	}
	v := &vec{dt: dt, n: n}
	if v.valid, _, err = d.validity(nd, dt, n, 0); err != nil {
		return nil, err
	}
	nv := n
	if v.valid != nil {
		nv = 0
		for i := 0; i < n; i++ {
			if bitGet(v.valid, i) {
				nv++
			}
		}
	}
	total := uint64(0)
	for _, pages := range chunkPages {
		for _, k := range pages {
			total += k
		}
	}
	if total != uint64(nv) {
		return nil, corruptf("vortex.pco: pages hold %d values for %d valid rows", total, nv)
	}
	vals := make([]uint64, nv)
	pos, pi := 0, len(chunkPages)
	// tANS tables cost up to 3<<14 entries per chunk whatever its size: bound
	// the total so that many tiny chunks cannot make a small file expensive.
	// (The reference writes chunks of 2^18 values; only the last is smaller.)
	tableBudget := 3<<pcoMaxAnsLog + 64*nv
	for ci, pages := range chunkPages {
		var c *pcoChunk
		for _, k := range pages {
			if k > 0 {
				if k > pcoMaxEntries {
					return nil, corruptf("vortex.pco: page of %d values", k)
				}
				if c == nil {
					if c, err = parsePcoChunk(nd.bufs[ci], p); err != nil {
						return nil, fmt.Errorf("vortex.pco chunk %d: %w", ci, err)
					}
					c.ptypeKind = pcoKind(p)
					for _, lv := range []*pcoLatentVar{c.lookback, c.primary, c.secondary} {
						if lv != nil {
							tableBudget -= len(lv.nodes)
						}
					}
					if tableBudget < 0 {
						return nil, corruptf("vortex.pco: too many tANS table entries for %d values", nv)
					}
				}
				if err := decodePcoPage(c, nd.bufs[pi], vals[pos:pos+int(k)]); err != nil {
					return nil, fmt.Errorf("vortex.pco page %d: %w", pi-len(chunkPages), err)
				}
			}
			pos += int(k)
			pi++
		}
	}
	if v.valid != nil && nv != n {
		full := make([]uint64, n)
		j := 0
		for i := 0; i < n; i++ {
			if bitGet(v.valid, i) {
				full[i] = vals[j]
				j++
			}
		}
		vals = full
	}
	v.data = fromRaw64(p, vals)
	return v, nil
}

func pcoKind(p PType) byte {
	switch {
	case p.isFloat():
		return 'f'
	case p.isSigned():
		return 'i'
	}
	return 'u'
}
