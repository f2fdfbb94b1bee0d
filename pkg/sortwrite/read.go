package sortwrite

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"

	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/progress"
)

var errTooManyValues = errors.New("more than 4294967294 distinct values")

// table is the whole input, column by column, in input order (file order,
// then row order). Row i of every store is the same input row.
type table struct {
	inputs   []*input
	unified  *Unified
	rows     int
	budget   int64 // memory budget (Options.MemoryLimit resolved)
	external bool  // the in-memory estimate exceeds the budget

	// base is the global row of the stores' first row: 0 for the whole
	// input, the run's first row for a run of the external sort.
	base int

	// mem holds the in-memory build's large arrays (bigmem.go).
	mem *bigArena

	periodCol string

	series  *store  // the series id column (kindString)
	periods []int32 // the period column as date32 days
	value   *store  // the value column
	others  []*store
}

// location names a global row: file, row group and row within both.
func (t *table) location(row int64) string {
	fi := sort.Search(len(t.inputs), func(i int) bool { return t.inputs[i].FirstRow > row }) - 1
	if fi < 0 {
		return fmt.Sprintf("row %d", row)
	}
	in := t.inputs[fi]
	r := row - in.FirstRow
	g := 0
	for g < len(in.GroupRows)-1 && r >= in.GroupRows[g] {
		r -= in.GroupRows[g]
		g++
	}
	return fmt.Sprintf("%s row group %d row %d (file row %d)", in.Rel, g, r, row-in.FirstRow)
}

// unit is one row group of one file (or one record batch of a record
// input): the grain of parallel reading.
type unit struct {
	in       *input
	fileIdx  int
	group    int
	firstRow int64 // global row of the unit's first row
	rows     int64 // rows it contributes (after deletes)
}

// readAll reads every unit of every input into t, using up to parallel
// workers. Each worker writes a disjoint row range of the preallocated
// stores, so only dictionary interning takes a lock. Input checksums are
// computed alongside.
func (t *table) readAll(ctx context.Context, parallel int, sums []string, rep progress.Reporter) (err error) {
	var inBytes int64
	for _, in := range t.inputs {
		inBytes += in.Size
	}
	ph := rep.Phase("read", int64(t.rows), inBytes)
	defer func() { progress.Finish(ph, err) }()
	var units []unit
	for fi, in := range t.inputs {
		r := in.FirstRow
		for g, n := range in.GroupRows {
			units = append(units, unit{in: in, fileIdx: fi, group: g, firstRow: r, rows: n})
			r += n
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	for i, in := range t.inputs {
		g.Go(func() (err error) {
			sums[i], err = in.verifiedChecksum(ctx)
			return err
		})
	}
	for _, u := range units {
		g.Go(func() error {
			if err := t.readUnit(ctx, u); err != nil {
				return err
			}
			ph.Add(u.rows, u.in.Size*u.rows/max(u.in.Rows, 1))
			return nil
		})
	}
	err = g.Wait()
	for _, in := range t.inputs {
		in.release()
	}
	if err == nil {
		t.finishAttrs(parallel)
	}
	return err
}

// verifiedChecksum hashes the input and checks its size is the one listed.
func (in *input) verifiedChecksum(ctx context.Context) (string, error) {
	sum, size, err := in.checksum(ctx)
	if err != nil {
		return "", fmt.Errorf("checksum %s: %w", in.Rel, err)
	}
	if size != in.Size {
		if in.tbl.Kind == source.KindParquet {
			return "", fmt.Errorf("%s changed while being read (size %d, then %d)", in.Rel, in.Size, size)
		}
		return "", fmt.Errorf("%s is %d bytes, but the table's log says %d: the file is not the one the table names", in.Rel, size, in.Size)
	}
	return sum, nil
}

// unitColumns reads the columns of one unit: col(x) returns the chunks of
// the input's field x (Schema.Fields[x]), with deleted rows removed.
func (t *table) unitColumns(ctx context.Context, u unit, need []int) (col func(x int) []arrow.Array, release func(), err error) {
	in := u.in
	if in.records != nil {
		rec := in.records[u.group]
		in.records[u.group] = nil
		if rec == nil {
			return nil, nil, fmt.Errorf("%s: batch %d read twice", in.Rel, u.group)
		}
		if rec.NumRows() != u.rows {
			rec.Release()
			return nil, nil, fmt.Errorf("%s batch %d: %d rows, planned %d", in.Rel, u.group, rec.NumRows(), u.rows)
		}
		return func(x int) []arrow.Array { return []arrow.Array{rec.Column(x)} }, rec.Release, nil
	}
	if constantsOnly(in, need) {
		return t.unitConstants(u, need)
	}
	pf, err := in.open(ctx, true)
	if err != nil {
		return nil, nil, err
	}
	defer pf.Close()
	// Read string columns as dictionaries: the reader hands over per-chunk
	// codes, so interning costs one hash per distinct value per row group
	// instead of one per row.
	var props pqarrow.ArrowReadProperties
	var leaves []int
	pos := map[int]int{} // field -> column of the read table
	for _, x := range need {
		leaf := in.proj.Leaf[x]
		if leaf < 0 {
			continue
		}
		if id := in.Schema.Fields[x].Type.ID(); id == arrow.STRING || id == arrow.BINARY || id == arrow.LARGE_STRING || id == arrow.LARGE_BINARY {
			props.SetReadDict(leaf, true)
		}
		pos[x] = len(leaves)
		leaves = append(leaves, leaf)
	}
	fr, err := pqarrow.NewFileReader(pf, props, memory.DefaultAllocator)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", in.Rel, err)
	}
	tbl, err := fr.ReadRowGroups(ctx, leaves, []int{u.group})
	if err != nil {
		return nil, nil, fmt.Errorf("%s row group %d: %w", in.Rel, u.group, err)
	}
	first := in.rawFirst[u.group]
	raw := in.rawRows[u.group]
	if tbl.NumRows() != raw {
		tbl.Release()
		return nil, nil, fmt.Errorf("%s row group %d: read %d rows, footer says %d", in.Rel, u.group, tbl.NumRows(), raw)
	}
	var keep arrow.Array // boolean mask of rows kept, when some are deleted
	if del := in.deletedIn(first, first+raw); len(del) > 0 {
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
		mask := make([]bool, raw)
		for i := range mask {
			mask[i] = true
		}
		for _, d := range del {
			mask[int64(d)-first] = false
		}
		b.AppendValues(mask, nil)
		keep = b.NewArray()
		b.Release()
	}
	var owned []arrow.Array
	cols := map[int][]arrow.Array{}
	for _, x := range need {
		if in.proj.Leaf[x] < 0 {
			a, err := in.tbl.Constant(in.src, in.Schema.Fields[x], int(u.rows), memory.DefaultAllocator)
			if err != nil {
				tbl.Release()
				return nil, nil, err
			}
			owned = append(owned, a)
			cols[x] = []arrow.Array{a}
			continue
		}
		chunks := tbl.Column(pos[x]).Data().Chunks()
		if keep != nil {
			// Deleted rows go: filter the column, chunk by chunk, with the
			// matching slice of the mask.
			var out []arrow.Array
			off := 0
			for _, c := range chunks {
				m := array.NewSlice(keep, int64(off), int64(off+c.Len()))
				f, err := compute.FilterArray(ctx, c, m, *compute.DefaultFilterOptions())
				m.Release()
				if err != nil {
					tbl.Release()
					return nil, nil, fmt.Errorf("%s row group %d: remove deleted rows: %w", in.Rel, u.group, err)
				}
				owned = append(owned, f)
				out = append(out, f)
				off += c.Len()
			}
			chunks = out
		}
		cols[x] = chunks
	}
	if keep != nil {
		keep.Release()
	}
	return func(x int) []arrow.Array { return cols[x] }, func() {
		for _, a := range owned {
			a.Release()
		}
		tbl.Release()
	}, nil
}

// constantsOnly reports whether every needed field of the file comes from
// the log (a Delta partition value), not from its Parquet columns: once
// the page reader took the others, nothing is left to decode.
func constantsOnly(in *input, need []int) bool {
	for _, x := range need {
		if in.proj.Leaf[x] >= 0 {
			return false
		}
	}
	return true
}

// unitConstants is unitColumns for fields that all come from the log.
func (t *table) unitConstants(u unit, need []int) (col func(x int) []arrow.Array, release func(), err error) {
	in := u.in
	cols := map[int][]arrow.Array{}
	var owned []arrow.Array
	release = func() {
		for _, a := range owned {
			a.Release()
		}
	}
	for _, x := range need {
		a, err := in.tbl.Constant(in.src, in.Schema.Fields[x], int(u.rows), memory.DefaultAllocator)
		if err != nil {
			release()
			return nil, nil, err
		}
		owned = append(owned, a)
		cols[x] = []arrow.Array{a}
	}
	return func(x int) []arrow.Array { return cols[x] }, release, nil
}

func (t *table) readUnit(ctx context.Context, u unit) (err error) {
	defer recoverAs(&err, fmt.Sprintf("%s row group %d", u.in.Rel, u.group))
	if err := ctx.Err(); err != nil {
		return err
	}
	stores := append([]*store{t.series, t.value}, t.others...)
	pcol := t.unified.Columns[t.unified.Index(t.periodName())]
	var need []int
	pField := pcol.In[u.fileIdx]
	if pField >= 0 {
		need = append(need, pField)
	}
	for _, s := range stores {
		if x := s.col.In[u.fileIdx]; x >= 0 {
			need = append(need, x)
		}
	}
	lo, hi := int(u.firstRow)-t.base, int(u.firstRow+u.rows)-t.base
	// The page reader takes the columns it can decode itself (pages.go);
	// pqarrow reads the rest.
	paged, err := t.readPages(ctx, u, lo, pField, stores)
	if err != nil {
		return err
	}
	var rest []int
	for _, x := range need {
		if !paged[x] {
			rest = append(rest, x)
		}
	}
	col := func(int) []arrow.Array { return nil }
	if len(rest) > 0 {
		var release func()
		col, release, err = t.unitColumns(ctx, u, rest)
		if err != nil {
			return err
		}
		defer release()
	}

	// Period: required in every file.
	if pField < 0 {
		return fmt.Errorf("%s: no period column %q", u.in.Rel, t.periodName())
	}
	off := lo
	if paged[pField] {
		off = hi
	}
	for _, chunk := range col(pField) {
		if off+chunk.Len() > hi {
			return fmt.Errorf("%s unit %d: more rows than planned", u.in.Rel, u.group)
		}
		if err := period.Column(chunk, t.periods[off:off+chunk.Len()]); err != nil {
			var re *period.RowError
			if errors.As(err, &re) {
				return fmt.Errorf("%s: column %q: period %q: %v", t.location(int64(t.base+off+re.Row)), t.periodName(), re.Value, re.Err)
			}
			return fmt.Errorf("%s row group %d: column %q: %w", u.in.Rel, u.group, t.periodName(), err)
		}
		off += chunk.Len()
	}

	for _, s := range stores {
		x := s.col.In[u.fileIdx]
		if x < 0 {
			if s == t.series {
				return fmt.Errorf("%s: no series column %q", u.in.Rel, s.col.Name)
			}
			s.setNull(lo, hi)
			continue
		}
		if paged[x] {
			continue
		}
		off := lo
		for _, chunk := range col(x) {
			if off+chunk.Len() > hi {
				return fmt.Errorf("%s unit %d: column %q: more rows than planned", u.in.Rel, u.group, s.col.Name)
			}
			if err := s.fill(chunk, off); err != nil {
				return fmt.Errorf("%s row group %d: column %q: %w", u.in.Rel, u.group, s.col.Name, err)
			}
			off += chunk.Len()
		}
		if off != hi {
			return fmt.Errorf("%s unit %d: column %q: %d rows, planned %d", u.in.Rel, u.group, s.col.Name, off-lo, hi-lo)
		}
	}
	// A null series id cannot be placed in any series.
	for r := lo; r < hi; r++ {
		if t.series.codes[r] == nullCode {
			return fmt.Errorf("%s: column %q: series id is null", t.location(int64(t.base+r)), t.series.col.Name)
		}
	}
	return nil
}

// fill copies one chunk into rows [off, off+len) of the store.
func (s *store) fill(arr arrow.Array, off int) error {
	n := arr.Len()
	switch s.kind {
	case kindNull:
		return nil
	case kindString:
		s.att.notePerRow()
		return s.fillStrings(arr, s.codes[off:off+n])
	}
	valid := s.valid[off : off+n]
	if arr.NullN() == 0 {
		for i := range valid {
			valid[i] = 1
		}
	} else {
		for i := range valid {
			valid[i] = 0
			if arr.IsValid(i) {
				valid[i] = 1
			}
		}
	}
	if s.kind == kindBool {
		b, ok := arr.(*array.Boolean)
		if !ok {
			return fmt.Errorf("got %s, want bool", arr.DataType())
		}
		for i := 0; i < n; i++ {
			s.data[off+i] = 0
			if valid[i] == 1 && b.Value(i) {
				s.data[off+i] = 1
			}
		}
		return nil
	}
	if !arrow.TypeEqual(arr.DataType(), s.col.Type) {
		return fmt.Errorf("got %s, want %s", arr.DataType(), s.col.Type)
	}
	d := arr.Data()
	buf := d.Buffers()[1]
	w := s.width
	if buf == nil {
		if n > 0 && arr.NullN() != n {
			return fmt.Errorf("missing value buffer")
		}
		return nil
	}
	src := buf.Bytes()
	start := d.Offset() * w
	if start+n*w > len(src) {
		return fmt.Errorf("value buffer too short")
	}
	dst := s.data[off*w : (off+n)*w]
	copy(dst, src[start:start+n*w])
	// Null slots may hold anything in Arrow; zero them so that equal values
	// compare equal as raw bytes (constantPerSeries relies on it).
	if arr.NullN() > 0 {
		for i := 0; i < n; i++ {
			if valid[i] == 0 {
				clear(dst[i*w : (i+1)*w])
			}
		}
	}
	return nil
}

// fillStrings turns a string chunk into global dictionary codes.
func (s *store) fillStrings(arr arrow.Array, dst []uint32) error {
	if d, ok := arr.(*array.Dictionary); ok {
		local, err := stringValues(d.Dictionary())
		if err != nil {
			return err
		}
		remap := make([]uint32, len(local))
		if err := s.dict.internLocal(local, remap); err != nil {
			return err
		}
		hasNulls := d.NullN() > 0
		if idx, ok := d.Indices().(*array.Int32); ok {
			vals := idx.Int32Values()
			for i, v := range vals {
				if hasNulls && d.IsNull(i) {
					dst[i] = nullCode
					continue
				}
				if v < 0 || int(v) >= len(remap) {
					return fmt.Errorf("dictionary index %d out of range", v)
				}
				dst[i] = remap[v]
			}
			return nil
		}
		for i := range dst {
			if d.IsNull(i) {
				dst[i] = nullCode
				continue
			}
			v := d.GetValueIndex(i)
			if v < 0 || v >= len(remap) {
				return fmt.Errorf("dictionary index %d out of range", v)
			}
			dst[i] = remap[v]
		}
		return nil
	}
	// Plain strings: build a chunk-local dictionary without the lock, then
	// intern it once.
	vals, err := stringValues(arr)
	if err != nil {
		return err
	}
	localIdx := map[string]uint32{}
	var local []string
	for i, v := range vals {
		if arr.IsNull(i) {
			dst[i] = nullCode
			continue
		}
		c, ok := localIdx[v]
		if !ok {
			c = uint32(len(local))
			localIdx[v] = c
			local = append(local, v)
		}
		dst[i] = c
	}
	remap := make([]uint32, len(local))
	if err := s.dict.internLocal(local, remap); err != nil {
		return err
	}
	for i := range dst {
		if dst[i] != nullCode {
			dst[i] = remap[dst[i]]
		}
	}
	return nil
}

// stringValues returns the values of a string or binary array as strings
// that alias its buffers (valid while the array is).
func stringValues(arr arrow.Array) ([]string, error) {
	n := arr.Len()
	out := make([]string, n)
	switch a := arr.(type) {
	case *array.String:
		for i := range out {
			out[i] = a.Value(i)
		}
	case *array.LargeString:
		for i := range out {
			out[i] = a.Value(i)
		}
	case *array.StringView:
		for i := range out {
			out[i] = a.Value(i)
		}
	case *array.Binary:
		for i := range out {
			out[i] = unsafeString(a.Value(i))
		}
	case *array.LargeBinary:
		for i := range out {
			out[i] = unsafeString(a.Value(i))
		}
	case *array.BinaryView:
		for i := range out {
			out[i] = unsafeString(a.Value(i))
		}
	default:
		return nil, fmt.Errorf("got %s, want a string or binary column", arr.DataType())
	}
	return out, nil
}
