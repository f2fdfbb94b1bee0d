package query

// arrow-go's compute kernels (TakeArray) run on a goroutine compute starts
// for each call, so a panic inside one (a string offset past the end of
// its data, a dictionary index past its dictionary) is on a goroutine no
// recover of ours reaches, and it kills the whole server. The index comes
// from a file; a damaged one whose checksums were recomputed still opens.
// So every gather the read layer hands to compute is checked first, here
// in the caller's goroutine, and a bad offset is an error marked corrupt.
// The check costs one pass over the gathered rows, which the gather makes
// anyway.

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// checkGather reports, as a corrupt error, any reason gathering src at
// rows codes could panic: a row outside src, a variable-width value whose
// offsets are decreasing or outside the data buffer, a dictionary index
// outside the dictionary. Only the rows gathered are checked (and a
// dictionary's own offsets, all of them: dictionaries are small), so the
// check costs what the gather does, not a pass over the column.
func checkGather(src arrow.Array, codes []int32) error {
	if err := checkRows(src.Len(), codes); err != nil {
		return err
	}
	switch a := src.(type) {
	case *array.Dictionary:
		for _, c := range codes {
			if err := checkDictIndex(a, int(c)); err != nil {
				return err
			}
		}
		return checkOffsetsAll(a.Dictionary())
	default:
		return checkOffsets(src, codes)
	}
}

// checkDictSpan is checkGather for a dictionary's rows [lo, hi), which
// its decoding gathers from the dictionary.
func checkDictSpan(d *array.Dictionary, lo, hi int) error {
	if lo < 0 || hi > d.Len() || lo > hi {
		return corrupt.Errorf("rows [%d, %d) outside a column of %d rows", lo, hi, d.Len())
	}
	for i := lo; i < hi; i++ {
		if err := checkDictIndex(d, i); err != nil {
			return err
		}
	}
	return checkOffsetsAll(d.Dictionary())
}

// checkRows checks that every row of codes lies inside a column of n
// rows.
func checkRows(n int, codes []int32) error {
	for _, c := range codes {
		if c < 0 || int(c) >= n {
			return corrupt.Errorf("row %d outside a column of %d rows", c, n)
		}
	}
	return nil
}

// checkOffsets checks the value offsets of rows codes of a string or
// binary column (other types have none to check).
func checkOffsets(src arrow.Array, codes []int32) error {
	switch a := src.(type) {
	case *array.String:
		return offsetsOK(a.ValueOffsets(), dataLen(a), codes, a.Len())
	case *array.Binary:
		return offsetsOK(a.ValueOffsets(), dataLen(a), codes, a.Len())
	case *array.LargeString:
		return offsetsOK(a.ValueOffsets(), dataLen(a), codes, a.Len())
	case *array.LargeBinary:
		return offsetsOK(a.ValueOffsets(), dataLen(a), codes, a.Len())
	}
	return nil
}

// dataLen is the length of a variable-width array's whole data buffer
// (offsets address it from its start, whatever the array's offset).
func dataLen(a arrow.Array) int {
	bufs := a.Data().Buffers()
	if len(bufs) < 3 || bufs[2] == nil {
		return 0
	}
	return bufs[2].Len()
}

// checkOffsetsAll is checkOffsets over every row.
func checkOffsetsAll(src arrow.Array) error {
	return checkOffsets(src, nil)
}

// offsetsOK checks offsets[c] <= offsets[c+1] <= data for each c of codes
// (every row when codes is nil). offs is the array's own window (arrow-go
// returns it sliced at the array's offset), so it has n+1 entries.
func offsetsOK[T int32 | int64](offs []T, data int, codes []int32, n int) error {
	if len(offs) < n+1 {
		return corrupt.Errorf("%d value offsets for %d rows", len(offs), n)
	}
	bad := func(i int) error {
		return corrupt.Errorf("row %d: value offsets [%d, %d) outside the %d bytes of string data", i, offs[i], offs[i+1], data)
	}
	check := func(i int) error {
		if offs[i] < 0 || offs[i] > offs[i+1] || int64(offs[i+1]) > int64(data) {
			return bad(i)
		}
		return nil
	}
	if codes == nil {
		for i := 0; i < n; i++ {
			if err := check(i); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range codes {
		if err := check(int(c)); err != nil {
			return err
		}
	}
	return nil
}

// checkDictIndex checks row i's index (unless null) against d's
// dictionary's length.
func checkDictIndex(d *array.Dictionary, i int) error {
	if d.IsNull(i) {
		return nil
	}
	if k, n := d.GetValueIndex(i), d.Dictionary().Len(); k < 0 || k >= n {
		return corrupt.Errorf("row %d: dictionary index %d outside a dictionary of %d values", i, k, n)
	}
	return nil
}

// gatherError names the column a failed check was about.
func gatherError(col string, err error) error {
	return fmt.Errorf("index column %s: %w", col, err)
}
