package vortexio

// decodeDateTimeParts decodes vortex.datetimeparts, which the reference
// compressor uses for timestamps: days, seconds within the day and
// sub-second ticks, each compressed separately.
func (d *decoder) decodeDateTimeParts(nd *anode, dt *DType, n int) (*vec, error) {
	if dt.Kind != KindExtension || dt.ExtID != "vortex.timestamp" || len(dt.ExtMeta) < 1 || storage(dt).PType != I64 {
		return nil, corruptf("vortex.datetimeparts for %s", dt)
	}
	if err := d.expectKids(nd, 3, 3); err != nil {
		return nil, err
	}
	m, err := pbDecode(nd.meta)
	if err != nil {
		return nil, err
	}
	var perSec int64
	switch dt.ExtMeta[0] {
	case unitNs:
		perSec = 1e9
	case unitUs:
		perSec = 1e6
	case unitMs:
		perSec = 1e3
	case unitS:
		perSec = 1
	default:
		return nil, corruptf("vortex.datetimeparts time unit %d", dt.ExtMeta[0])
	}
	var parts [3][]int64
	var days *vec
	for i := 0; i < 3; i++ {
		p := PType(m.uint(i + 1))
		if !p.valid() || !p.isInt() {
			return nil, corruptf("vortex.datetimeparts ptype %d", p)
		}
		v, err := d.decode(nd.kids[i], primDType(p, i == 0 && dt.nullable()), n)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			days = v.materialize()
			v = days
		}
		if parts[i], err = v.ints(); err != nil {
			return nil, err
		}
	}
	out := make([]uint64, n)
	for i := range out {
		// Wrapping int64 arithmetic, as the reference does.
		out[i] = uint64(parts[0][i])*uint64(86400*perSec) + uint64(parts[1][i])*uint64(perSec) + uint64(parts[2][i])
	}
	return &vec{dt: dt, n: n, valid: days.valid, data: fromRaw64(I64, out)}, nil
}
