package delta

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// concatRecords concatenates record batches of one schema.
func concatRecords(mem memory.Allocator, sc *arrow.Schema, recs ...arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, sc.NumFields())
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	for c := range cols {
		parts := make([]arrow.Array, len(recs))
		for i, r := range recs {
			parts[i] = r.Column(c)
		}
		a, err := array.Concatenate(parts, mem)
		if err != nil {
			for _, x := range cols[:c] {
				x.Release()
			}
			return nil, err
		}
		cols[c] = a
	}
	rec := array.NewRecordBatch(sc, cols, n)
	for _, a := range cols {
		a.Release()
	}
	return rec, nil
}

// Concat concatenates normalized writes (in log order) into one, which
// Apply treats as a single write whose later rows win.
func Concat(mem memory.Allocator, s *Schema, writes []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(writes) == 1 {
		writes[0].Retain()
		return writes[0], nil
	}
	return concatRecords(mem, s.Write, writes...)
}
