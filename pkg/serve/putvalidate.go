package serve

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/grpc/codes"

	"github.com/energyscope/servingsnap/pkg/livedelta"
)

// validatePut checks a DoPut batch's Arrow structure in full before
// anything reads it: the delta's normalisation hands columns to arrow-go's
// compute kernels (decoding dictionaries, casts), which run on goroutines
// no recover reaches, so a client's string offset past its data or a
// dictionary index past its dictionary would otherwise end the process.
// It is InvalidArgument naming the batch and column.
func validatePut(rec arrow.RecordBatch, batch int) error {
	for i, col := range rec.Columns() {
		if err := validateColumn(col); err != nil {
			return errf(codes.InvalidArgument, "do_put: batch %d column %q: malformed Arrow data: %v", batch, rec.Schema().Field(i).Name, err)
		}
	}
	return nil
}

func validateColumn(col arrow.Array) (err error) {
	// arrow-go's own validation can panic on the offsets it checks (on
	// this goroutine): that is a malformed column too
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	if err := validateFull(col); err != nil {
		return err
	}
	d, ok := col.(*array.Dictionary)
	if !ok {
		return nil
	}
	if err := validateFull(d.Dictionary()); err != nil {
		return fmt.Errorf("dictionary: %w", err)
	}
	n := d.Dictionary().Len()
	for j := 0; j < d.Len(); j++ {
		if d.IsValid(j) {
			if k := d.GetValueIndex(j); k < 0 || k >= n {
				return fmt.Errorf("row %d: dictionary index %d outside a dictionary of %d values", j, k, n)
			}
		}
	}
	return nil
}

// validateFull is array.ValidateFull, with a string column's UTF-8 check
// made over its values at once instead of value by value: arrow-go calls
// utf8.ValidString per value, which for a batch of short series ids was a
// fifth of a DoPut batch's check in a profile of the ingest benchmark's
// server, 7 times what this takes (BenchmarkValidatePut).
func validateFull(col arrow.Array) error {
	s, ok := col.(*array.String)
	if !ok {
		return array.ValidateFull(col)
	}
	// The same buffers as binary: arrow-go's full check of the structure
	// (null count, offsets within the data and non-decreasing), all that
	// it checks of a string but the encoding.
	d := s.Data()
	bd := array.NewData(arrow.BinaryTypes.Binary, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
	defer bd.Release()
	b := array.NewBinaryData(bd)
	defer b.Release()
	if err := array.ValidateFull(b); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	return livedelta.ValidUTF8(b.ValueOffsets(), b.ValueBytes())
}
