package livedelta

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/period"
)

// ErrInvalid marks a refused write. Nothing of a refused write is applied
// or logged. Test with errors.Is.
var ErrInvalid = errors.New("invalid write")

// Known is what the dataset already holds about series' attributes (the
// base index and earlier writes).
type Known interface {
	// Attr returns where attribute a of series id is held (array, row; a
	// dictionary array is read through), and false if the series is new.
	Attr(id string, a int) (arrow.Array, int, bool)
}

// BaseCoder is a Known that also says which series of the base an id is
// (its code, Base.Lookup's): NormalizeCodes hands the codes on to Prepare.
type BaseCoder interface {
	BaseCode(id string) (code int, ok bool)
}

// BatchCoder is a BaseCoder that answers a whole id column at once
// (codes[i] for ids[i], -1 for a series the base lacks), which lets it
// overlap the memory accesses of many rows' look-ups.
type BatchCoder interface {
	BaseCodes(ids *array.String, codes []int32)
}

// Normalize is NormalizeCodes without the codes.
func Normalize(ctx context.Context, mem memory.Allocator, s *Schema, rec arrow.RecordBatch, batch int, known Known) (arrow.RecordBatch, error) {
	w, _, err := normalize(ctx, mem, s, rec, batch, known, nil)
	return w, err
}

// NormalizeCodes is Normalize that also returns each row's series code in
// the base coder answers for (-1: the base lacks the series), found with
// the look-ups the checks make anyway: one per distinct series.
func NormalizeCodes(ctx context.Context, mem memory.Allocator, s *Schema, rec arrow.RecordBatch, batch int, known Known, coder BaseCoder) (arrow.RecordBatch, []int32, error) {
	return normalize(ctx, mem, s, rec, batch, known, coder)
}

// Normalize checks one incoming record batch (number batch of its stream)
// against the dataset and returns it as a normalized write (Schema.Write):
// ids as utf8, periods as date32 (every form `snapbuild build` accepts,
// normalised the same way), data columns in the data file's types (a safe
// cast where the types differ: no overflow, no truncation), missing varying
// columns null, attributes checked against what the dataset knows.
//
// Errors name the batch, the row and the column, and wrap ErrInvalid.
// known may be nil: every series is then new.
func normalize(ctx context.Context, mem memory.Allocator, s *Schema, rec arrow.RecordBatch, batch int, known Known, coder BaseCoder) (_ arrow.RecordBatch, codes []int32, err error) {
	if known == nil {
		known = noneKnown{}
	}
	n := int(rec.NumRows())
	bad := func(row int, col, format string, a ...any) error {
		where := fmt.Sprintf("batch %d", batch)
		if row >= 0 {
			where += fmt.Sprintf(", row %d", row)
		}
		if col != "" {
			where += fmt.Sprintf(", column %q", col)
		}
		return fmt.Errorf("%w: %s: %s", ErrInvalid, where, fmt.Sprintf(format, a...))
	}
	// Columns by name.
	byName := map[string]int{}
	for i, f := range rec.Schema().Fields() {
		if _, dup := byName[f.Name]; dup {
			return nil, nil, bad(-1, f.Name, "given twice")
		}
		byName[f.Name] = i
	}
	allowed := []string{index.ColSeriesID}
	for i := datafile.ColumnPeriod; i < s.Data.NumFields(); i++ {
		allowed = append(allowed, s.Data.Field(i).Name)
	}
	for _, f := range s.Attrs {
		allowed = append(allowed, f.Name)
	}
	for name := range byName {
		if !contains(allowed, name) {
			return nil, nil, bad(-1, name, "unknown column (columns: %s)", strings.Join(allowed, ", "))
		}
	}
	for _, req := range []string{index.ColSeriesID, datafile.ColPeriod, datafile.ColValue} {
		if _, ok := byName[req]; !ok {
			return nil, nil, bad(-1, req, "missing (a write needs %s, %s and %s)", index.ColSeriesID, datafile.ColPeriod, datafile.ColValue)
		}
	}
	cols := make([]arrow.Array, 0, s.Write.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()

	// series_id
	idcol := rec.Column(byName[index.ColSeriesID])
	ids, err := asUTF8(ctx, mem, idcol)
	if err != nil {
		return nil, nil, bad(-1, index.ColSeriesID, "%v", err)
	}
	cols = append(cols, ids)
	for i := 0; i < n; i++ {
		switch {
		case ids.IsNull(i):
			return nil, nil, bad(i, index.ColSeriesID, "null series id")
		case ids.Value(i) == "":
			return nil, nil, bad(i, index.ColSeriesID, "empty series id")
		}
	}

	// period
	days := make([]int32, n)
	if err := period.Column(rec.Column(byName[datafile.ColPeriod]), days); err != nil {
		var re *period.RowError
		if errors.As(err, &re) {
			return nil, nil, bad(re.Row, datafile.ColPeriod, "%q: %v", re.Value, re.Err)
		}
		return nil, nil, bad(-1, datafile.ColPeriod, "%v", err)
	}
	// The days become the column's buffer as they are (date32 is int32
	// days): no per-row builder call.
	pd := array.NewData(arrow.FixedWidthTypes.Date32, n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(days))}, nil, 0, 0)
	cols = append(cols, array.NewDate32Data(pd))
	pd.Release()

	// value and the varying columns
	for i := datafile.ColumnValue; i < s.Data.NumFields(); i++ {
		f := s.Data.Field(i)
		j, ok := byName[f.Name]
		if !ok {
			cols = append(cols, array.MakeArrayOfNull(mem, f.Type, n))
			continue
		}
		a, err := castTo(ctx, mem, rec.Column(j), f.Type)
		if err != nil {
			return nil, nil, bad(-1, f.Name, "%v", err)
		}
		cols = append(cols, a)
	}

	// attributes: all or none
	var present []string
	for _, f := range s.Attrs {
		if _, ok := byName[f.Name]; ok {
			present = append(present, f.Name)
		}
	}
	given := len(present) > 0
	if given && len(present) != len(s.Attrs) {
		return nil, nil, bad(-1, "", "attributes are given all together or not at all: got %s of %s", strings.Join(present, ", "), attrNames(s.Attrs))
	}
	attrCols := make([]arrow.Array, len(s.Attrs))
	for k, f := range s.Attrs {
		if !given {
			attrCols[k] = array.MakeArrayOfNull(mem, f.Type, n)
		} else {
			a, err := castTo(ctx, mem, rec.Column(byName[f.Name]), f.Type)
			if err != nil {
				return nil, nil, bad(-1, f.Name, "%v", err)
			}
			attrCols[k] = a
		}
		cols = append(cols, attrCols[k])
	}
	// New series need their attributes; attributes are constant within a
	// series and agree with what the dataset already holds.
	// The base codes first, for every row: one probe of the coder each
	// (a cheap one; for a BatchCoder, a column at a time), rather than
	// that and a first-occurrence map insert, which cost as much again.
	if coder != nil {
		codes = make([]int32, n)
		seriesBaseCodes(idcol, ids, coder, codes)
	}
	switch {
	case len(s.Attrs) == 0:
	case !given:
		// A series the base lacks must be known to the delta already;
		// each is asked once.
		var asked map[string]struct{}
		for i := 0; i < n; i++ {
			if codes != nil && codes[i] >= 0 {
				continue
			}
			id := ids.Value(i)
			if _, ok := asked[id]; ok {
				continue
			}
			if asked == nil {
				asked = map[string]struct{}{}
			}
			asked[id] = struct{}{}
			if _, _, ok := known.Attr(id, 0); !ok {
				return nil, nil, bad(i, index.ColSeriesID, "series %q is new: give its attributes (%s)", id, attrNames(s.Attrs))
			}
		}
	default:
		first := make(map[string]int, min(n, 1<<16))
		for i := 0; i < n; i++ {
			id := ids.Value(i)
			f, seen := first[id]
			if !seen {
				first[id] = i
			}
			for k, a := range attrCols {
				if seen {
					if cellText(a, i) != cellText(a, f) {
						return nil, nil, bad(i, s.Attrs[k].Name, "series %q has %s here and %s in row %d: an attribute is constant within a series", id, cellText(a, i), cellText(a, f), f)
					}
					continue
				}
				if ka, kr, ok := known.Attr(id, k); ok && cellText(ka, kr) != cellText(a, i) {
					return nil, nil, bad(i, s.Attrs[k].Name, "series %q has %s, the dataset says %s: attributes cannot change by a write", id, cellText(a, i), cellText(ka, kr))
				}
			}
		}
	}
	cols = append(cols, constBool(mem, given, n))
	return array.NewRecordBatch(s.Write, cols, int64(n)), codes, nil
}

// seriesBaseCodes sets codes[i] to row i's base code (-1: not in the base). A
// dictionary-encoded id column is probed once per dictionary value a row
// uses, not once per row; a utf8 one is handed whole to a BatchCoder, or else
// probed row by row.
func seriesBaseCodes(idcol arrow.Array, ids *array.String, coder BaseCoder, codes []int32) {
	probe := func(id string) int32 {
		if c, ok := coder.BaseCode(id); ok {
			return int32(c)
		}
		return -1
	}
	if d, ok := idcol.(*array.Dictionary); ok {
		if dv, ok := d.Dictionary().(*array.String); ok {
			per := make([]int32, dv.Len())
			for k := range per {
				per[k] = -2 // not probed yet
			}
			for i := range codes {
				k := d.GetValueIndex(i) // valid: null ids were refused
				if per[k] == -2 {
					per[k] = probe(dv.Value(k))
				}
				codes[i] = per[k]
			}
			return
		}
	}
	if bc, ok := coder.(BatchCoder); ok {
		bc.BaseCodes(ids, codes)
		return
	}
	for i := range codes {
		codes[i] = probe(ids.Value(i))
	}
}

// constBool is a boolean column of n values v, its bitmap filled bytewise.
func constBool(mem memory.Allocator, v bool, n int) arrow.Array {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	b := buf.Bytes()
	fill := byte(0)
	if v {
		fill = 0xff
	}
	for i := range b {
		b[i] = fill
	}
	data := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	defer data.Release()
	return array.MakeFromData(data)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func attrNames(fs []arrow.Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// asUTF8 decodes a utf8, large_utf8 or dictionary-of-utf8 column.
func asUTF8(ctx context.Context, mem memory.Allocator, a arrow.Array) (*array.String, error) {
	switch c := a.(type) {
	case *array.String:
		c.Retain()
		return c, nil
	case *array.Dictionary:
		if id := c.Dictionary().DataType().ID(); id != arrow.STRING && id != arrow.LARGE_STRING {
			break
		}
		out, err := compute.TakeArray(compute.WithAllocator(ctx, mem), c.Dictionary(), c.Indices())
		if err != nil {
			return nil, err
		}
		return asUTF8Owned(ctx, mem, out)
	case *array.LargeString:
		return asUTF8Owned(ctx, mem, c)
	}
	return nil, fmt.Errorf("type %s; want utf8, large_utf8 or a dictionary of utf8", a.DataType())
}

func asUTF8Owned(ctx context.Context, mem memory.Allocator, a arrow.Array) (*array.String, error) {
	if s, ok := a.(*array.String); ok {
		return s, nil
	}
	out, err := compute.CastArray(compute.WithAllocator(ctx, mem), a, compute.SafeCastOptions(arrow.BinaryTypes.String))
	if err != nil {
		return nil, err
	}
	s, ok := out.(*array.String)
	if !ok {
		out.Release()
		return nil, fmt.Errorf("type %s cannot be read as utf8", a.DataType())
	}
	return s, nil
}

// castTo returns a in type t: itself when the types agree, a safe cast
// otherwise (an overflow or a lost fraction is an error).
func castTo(ctx context.Context, mem memory.Allocator, a arrow.Array, t arrow.DataType) (arrow.Array, error) {
	if d, ok := a.(*array.Dictionary); ok {
		dec, err := compute.TakeArray(compute.WithAllocator(ctx, mem), d.Dictionary(), d.Indices())
		if err != nil {
			return nil, err
		}
		defer dec.Release()
		a = dec
	}
	if arrow.TypeEqual(a.DataType(), t) {
		a.Retain()
		return a, nil
	}
	out, err := compute.CastArray(compute.WithAllocator(ctx, mem), a, compute.SafeCastOptions(t))
	if err != nil {
		return nil, fmt.Errorf("type %s does not convert to the dataset's %s: %v", a.DataType(), t, err)
	}
	return out, nil
}

// cellText is a cell's value for comparisons and messages (dictionaries
// read through).
func cellText(a arrow.Array, i int) string {
	if d, ok := a.(*array.Dictionary); ok {
		if d.IsNull(i) {
			return "null"
		}
		return cellText(d.Dictionary(), d.GetValueIndex(i))
	}
	if a.IsNull(i) {
		return "null"
	}
	if s, ok := a.(*array.String); ok {
		return fmt.Sprintf("%q", s.Value(i))
	}
	return a.ValueStr(i)
}

type noneKnown struct{}

func (noneKnown) Attr(string, int) (arrow.Array, int, bool) { return nil, 0, false }
