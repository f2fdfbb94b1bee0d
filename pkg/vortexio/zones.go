package vortexio

// Zone maps. With WriterOptions.ZoneRows > 0 the writer wraps every integer
// column (and every temporal column over integer storage: dates, times,
// timestamps) in a vortex.zoned layout, the form vortex-data's own writer
// uses: child 0 is the column's data as before, child 1 a flat zone table
// with one row per ZoneRows rows of the column (the last zone may be
// shorter) and the columns max, min and null_count. The reference prunes a
// filtered scan with them: a zone whose [min, max] cannot hold the
// predicate's value is not read. So the statistics must be exact, and they
// are: computed from the very values written, min and max over the zone's
// non-null rows (null when every row is null), null_count the zone's null
// rows.
//
// The zoned metadata is one version byte 0x01 then the protobuf
// ZonedMetadata{zone_len = 1; repeated AggregateSpec{id = 1; options = 2}
// aggregate_specs = 2}, with the aggregate ids and options vortex-data 0.93
// writes for integer columns: vortex.max and vortex.min with options 08 01,
// vortex.null_count without. The zone table's dtype is not stored: the
// reader derives it from the column's dtype and the aggregates (max and min
// of the column's type made nullable, null_count u64).
//
// Floats, booleans and strings get no zone map (they would need nan_count
// and the reference's NaN and truncation rules to be exact; the cold tier's
// keys are integers and dates). Our reader reads files with and without
// zone maps alike: it reads child 0 and skips the zone table.

// zoneAcc accumulates the zone statistics of one column as it is written.
type zoneAcc struct {
	zoneLen int
	signed  bool
	// the open zone
	rows, nulls int
	has         bool
	lo, hi      int64 // bit patterns; compared as unsigned when !signed
	// closed zones
	mins, maxs []int64
	valid      []bool // zone has a non-null row (min/max are set)
	nullCounts []uint64
}

// zoneable reports whether a column of dtype dt gets a zone map.
func zoneable(dt *DType) bool {
	sd := storage(dt)
	return sd.Kind == KindPrimitive && sd.PType.isInt()
}

func newZoneAcc(dt *DType, zoneLen int) *zoneAcc {
	return &zoneAcc{zoneLen: zoneLen, signed: storage(dt).PType.isSigned()}
}

func (z *zoneAcc) less(a, b int64) bool {
	if z.signed {
		return a < b
	}
	return uint64(a) < uint64(b)
}

// add takes the next rows of the column.
func (z *zoneAcc) add(v *vec) error {
	xs, err := v.ints() // sign-extended for signed types, zero-extended otherwise
	if err != nil {
		return err
	}
	for i, x := range xs {
		if !v.isValid(i) {
			z.nulls++
		} else if !z.has {
			z.lo, z.hi, z.has = x, x, true
		} else {
			if z.less(x, z.lo) {
				z.lo = x
			}
			if z.less(z.hi, x) {
				z.hi = x
			}
		}
		z.rows++
		if z.rows == z.zoneLen {
			z.close()
		}
	}
	return nil
}

func (z *zoneAcc) close() {
	if z.rows == 0 {
		return
	}
	z.mins = append(z.mins, z.lo)
	z.maxs = append(z.maxs, z.hi)
	z.valid = append(z.valid, z.has)
	z.nullCounts = append(z.nullCounts, uint64(z.nulls))
	z.rows, z.nulls, z.has, z.lo, z.hi = 0, 0, false, 0, 0
}

// table is the zone table: a struct of max, min and null_count, one row
// per zone, for a column of dtype dt.
func (z *zoneAcc) table(dt *DType) *vec {
	z.close()
	n := len(z.mins)
	st := storage(dt)
	stat := func(xs []int64) *vec {
		raw := make([]uint64, n)
		for i, x := range xs {
			raw[i] = uint64(x)
		}
		v := &vec{dt: dt.withNullable(true), n: n, data: fromRaw64(st.PType, raw)}
		for i, ok := range z.valid {
			if !ok {
				if v.valid == nil {
					v.valid = make([]byte, bitmapLen(n))
					for k := 0; k < n; k++ {
						bitSet(v.valid, k)
					}
				}
				v.valid[i>>3] &^= 1 << (uint(i) & 7)
			}
		}
		return v
	}
	nc := &vec{dt: primDType(U64, false), n: n, data: fromRaw64(U64, z.nullCounts)}
	return &vec{dt: zoneTableDType(dt), n: n, kids: []*vec{stat(z.maxs), stat(z.mins), nc}}
}

// zoneTableDType is the zone table's dtype for a column of dtype dt.
func zoneTableDType(dt *DType) *DType {
	s := dt.withNullable(true)
	return &DType{Kind: KindStruct, Names: []string{"max", "min", "null_count"}, Fields: []*DType{s, s, primDType(U64, false)}}
}

// zonedMetadata is the vortex.zoned layout's metadata for zones of zoneLen
// rows with the integer aggregates.
func zonedMetadata(zoneLen int) []byte {
	var w pbWriter
	w.uint(1, uint64(zoneLen))
	for _, spec := range []struct {
		id   string
		opts []byte
	}{{"vortex.max", []byte{0x08, 0x01}}, {"vortex.min", []byte{0x08, 0x01}}, {"vortex.null_count", nil}} {
		var s pbWriter
		s.bytesAlways(1, []byte(spec.id))
		if spec.opts != nil {
			s.bytesAlways(2, spec.opts)
		}
		w.bytesAlways(2, s.b)
	}
	return append([]byte{0x01}, w.b...)
}
