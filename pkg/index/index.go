// Package index defines the index sidecar (index.arrow): one row per
// series, sorted by series id, saying where the series' rows are in the data
// file and holding everything a server used to rebuild at start-up (bounds,
// latest value, per-series attributes). docs/FORMAT.md §4 is the prose
// version.
//
// The index is itself an Arrow IPC file with a single record batch, so a
// reader maps it and binary-searches the series_id column in place: opening
// builds no per-series map. Since version 2 it holds no
// dictionary-encoded column, so arrow-go maps it zero-copy; version 1 files
// may dictionary-encode string attributes and are read through arrow-go's
// copying reader (see New). Version 4 stores a low-cardinality string
// attribute as a narrow integer code column, mapped like any other, whose
// distinct values live in the field's metadata (MetaDictionary): a reader
// decodes them on the column's first use, in time proportional to their
// number, and hands the column out as an Arrow dictionary array over the
// mapped codes (codes.go). Version 5 (what Writer writes) adds a hash
// table over the ids, two more mapped columns, so that a lookup costs a
// few cache misses rather than a binary search (lookup.go).
package index

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/datafile"
)

// Column names of the index, in order; attribute columns follow.
const (
	ColSeriesID     = "series_id"
	ColRowOffset    = "row_offset"
	ColRowCount     = "row_count"
	ColBatch        = "batch"
	ColBatchOffset  = "batch_offset"
	ColFirstPeriod  = "first_period"
	ColLastPeriod   = "last_period"
	ColLatestPeriod = "latest_period"
	ColLatestValue  = "latest_value"

	// The tier columns of a version-3 (tiered) index, after the fixed
	// ones: where the series' cold rows lie in cold.vortex.
	ColColdStart       = "cold_start"
	ColColdRows        = "cold_rows"
	ColColdFirstPeriod = "cold_first_period"
	ColColdLastPeriod  = "cold_last_period"

	// The lookup columns of a version-5 index, after the fixed and tier
	// columns (lookup.go).
	ColLookupStart = "lookup_start"
	ColLookupCode  = "lookup_code"

	// FileIndex is the servingsnap.file metadata value of an index file.
	FileIndex = "index"

	// Version is the index layout Writer writes (the schema's
	// servingsnap.format_version): version 4's columns, then the lookup
	// table's two (ColLookupStart, ColLookupCode) before the attributes.
	// The file maps zero-copy. FORMAT.md §4.
	Version = "5"
	// VersionV4 is version 2's columns (and, tiered, version 3's), no
	// dictionary-encoded column, and low-cardinality string attributes
	// stored as code columns (MetaDictionary); still read. Readers find a
	// series in it by binary search.
	VersionV4 = "4"
	// VersionV1 is the first layout, still read: string attributes may be
	// dictionary-encoded, so a reader must load (copy) the file.
	VersionV1 = "1"
	// VersionV2 is the first layout without dictionaries, still read:
	// every attribute plain.
	VersionV2 = "2"
	// VersionTiered is the layout of a version-3 (tiered) index, still
	// read (FORMAT.md §4, §9): version 2 plus the tier columns
	// (ColumnColdStart…) between the fixed columns and the attributes. A
	// version-4 index has them when its schema says MetaTiered.
	VersionTiered = "3"

	// MetaTiered is the schema metadata key of a version-4 or -5 index
	// that holds the tier columns (value "true"): the index of a snapshot
	// with a cold file. Absent otherwise.
	MetaTiered = "servingsnap.tiered"
	// MetaDictionary is the field metadata key of a version-4 code
	// column: a JSON array of the attribute's distinct values, sorted
	// bytewise without repeats; code k stands for the k-th.
	MetaDictionary = "servingsnap.dictionary"
)

// Positions of the fixed index columns. Every reader and writer of the
// index uses these instead of numbers, so the layout has one owner.
const (
	ColumnSeriesID     = iota // utf8, strictly increasing
	ColumnRowOffset           // int64
	ColumnRowCount            // int64
	ColumnBatch               // uint32
	ColumnBatchOffset         // uint32
	ColumnFirstPeriod         // date32
	ColumnLastPeriod          // date32
	ColumnLatestPeriod        // date32, null when every value is null
	ColumnLatestValue         // the value type, null with latest_period

	// NumFixed is the number of fixed columns: the per-series attribute
	// columns start at this position, or in a version-3 index after the
	// tier columns.
	NumFixed
)

// Positions of the tier columns of a version-3 index.
const (
	ColumnColdStart       = NumFixed + iota // int64: first row in cold.vortex
	ColumnColdRows                          // int64: cold rows (0: none)
	ColumnColdFirstPeriod                   // date32: period of the first cold row (0 without cold rows)
	ColumnColdLastPeriod                    // date32: period of the last cold row (0 without cold rows)

	// NumFixedTiered is where a version-3 index's attributes start.
	NumFixedTiered = ColumnColdLastPeriod + 1
)

// Positions of a version-5 index's lookup columns, relative to the end
// of its fixed and tier columns (NumFixed, or NumFixedTiered): the
// attributes start NumLookup columns later.
const (
	ColumnLookupStart = iota // uint32: bucket b's first row in lookup_code
	ColumnLookupCode         // uint32: series codes, bucket by bucket

	// NumLookup is the number of lookup columns.
	NumLookup
)

// OwnNames is every column name the index holds for itself, in any
// version and tiered or not: the fixed, tier and lookup columns. An
// attribute column may take none of them, or readers that go by name
// (pyarrow, FORMAT.md's snippets) would find two columns of that name.
func OwnNames() []string {
	fs := schemaOf(arrow.PrimitiveTypes.Float64, nil, true, true).Fields()
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names
}

// schema is the index schema Writer writes (Version) for a value type
// and attribute fields (as the file stores them: codes.go), with the
// cold-tier columns when tiered.
func schema(valueType arrow.DataType, attrs []arrow.Field, tiered bool) *arrow.Schema {
	return schemaOf(valueType, attrs, tiered, true)
}

// schemaOf is the schema of an index with the lookup columns (version 5)
// or without (version 4, and its fixed columns those of every version).
func schemaOf(valueType arrow.DataType, attrs []arrow.Field, tiered, lookup bool) *arrow.Schema {
	fields := make([]arrow.Field, NumFixed, NumFixedTiered+NumLookup+len(attrs))
	fields[ColumnSeriesID] = arrow.Field{Name: ColSeriesID, Type: arrow.BinaryTypes.String}
	fields[ColumnRowOffset] = arrow.Field{Name: ColRowOffset, Type: arrow.PrimitiveTypes.Int64}
	fields[ColumnRowCount] = arrow.Field{Name: ColRowCount, Type: arrow.PrimitiveTypes.Int64}
	fields[ColumnBatch] = arrow.Field{Name: ColBatch, Type: arrow.PrimitiveTypes.Uint32}
	fields[ColumnBatchOffset] = arrow.Field{Name: ColBatchOffset, Type: arrow.PrimitiveTypes.Uint32}
	fields[ColumnFirstPeriod] = arrow.Field{Name: ColFirstPeriod, Type: arrow.FixedWidthTypes.Date32}
	fields[ColumnLastPeriod] = arrow.Field{Name: ColLastPeriod, Type: arrow.FixedWidthTypes.Date32}
	fields[ColumnLatestPeriod] = arrow.Field{Name: ColLatestPeriod, Type: arrow.FixedWidthTypes.Date32, Nullable: true}
	fields[ColumnLatestValue] = arrow.Field{Name: ColLatestValue, Type: valueType, Nullable: true}
	keys, vals := []string{datafile.MetaFile, datafile.MetaVersion}, []string{FileIndex, Version}
	if tiered {
		keys, vals = append(keys, MetaTiered), append(vals, "true")
		fields = append(fields,
			arrow.Field{Name: ColColdStart, Type: arrow.PrimitiveTypes.Int64},
			arrow.Field{Name: ColColdRows, Type: arrow.PrimitiveTypes.Int64},
			arrow.Field{Name: ColColdFirstPeriod, Type: arrow.FixedWidthTypes.Date32},
			arrow.Field{Name: ColColdLastPeriod, Type: arrow.FixedWidthTypes.Date32})
	}
	if lookup {
		fields = append(fields,
			arrow.Field{Name: ColLookupStart, Type: arrow.PrimitiveTypes.Uint32},
			arrow.Field{Name: ColLookupCode, Type: arrow.PrimitiveTypes.Uint32})
	}
	fields = append(fields, attrs...)
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(fields, &md)
}

// Reader is a read-only view over the index record batch. It holds typed
// handles to the columns and nothing per series: lookups binary-search the
// sorted series_id column where it lies (in the mapping, for a mapped file).
type Reader struct {
	version      string
	tiered       bool          // the tier columns are there (version 3, or 4 and 5 with MetaTiered)
	attrStart    int           // the first attribute column: NumFixed, or NumFixedTiered, plus NumLookup in version 5
	attrFields   []arrow.Field // as handed out: a code column as its dictionary type
	file         string        // for the errors of lazy checks; see SetFile
	attrs        []attrCheck
	idCheck      attrCheck // series_id's offsets pass, on first use (IDs)
	rec          arrow.RecordBatch
	ids          *array.String
	idOffs       []int32 // ids' raw offsets and values, for per-access bounds checks
	idData       []byte
	rowOffset    []int64
	rowCount     []int64
	batch        []uint32
	batchOffset  []uint32
	firstPeriod  []arrow.Date32
	lastPeriod   []arrow.Date32
	latestPeriod *array.Date32
	latestValue  arrow.Array
	// The tier columns, nil unless the index is version 3.
	coldStart, coldRows []int64
	coldFirst, coldLast []arrow.Date32
	lookup              lookupTable // version 5's hash table over the ids
}

// Entry is one series' location and bounds.
type Entry struct {
	Code int // the index row; the data file's series_code
	// SeriesID aliases the index (mapped since version 2): valid while the
	// snapshot is held; strings.Clone it to keep it longer.
	SeriesID    string
	RowOffset   int64
	RowCount    int64
	Batch       int
	BatchOffset int
	FirstPeriod int32
	LastPeriod  int32
	// Cold is where the series' cold rows lie (a version-3 index; zero
	// otherwise, or when the series has none).
	Cold Cold
}

// Cold is where one series' cold rows lie in cold.vortex: rows [Start,
// Start+Rows), whose first and last periods are FirstPeriod and
// LastPeriod. Rows 0: the series has no cold rows.
type Cold struct {
	Start, Rows             int64
	FirstPeriod, LastPeriod int32
}

// attrCheck is the outcome of one attribute column's check, made once, on
// first use (Attribute). col is the column, or after a failed check a
// column of nulls standing in for it (Attributes).
type attrCheck struct {
	once sync.Once
	col  arrow.Array
	err  error
}

// New wraps an index record batch after checking its schema and what
// arrow-go trusts in its columns (validate.go). Every column gets the O(1)
// checks (types, buffer lengths). The pass over a utf8 column's offsets
// costs about a nanosecond per series, which at millions of series and
// several string columns would be most of an open, so each string column
// gets it once, on first use: series_id when IDs is first called (Lookup,
// Prefix, SeriesID and Entry bounds-check each id they read instead, so
// they need no pass), each attribute column when Attribute is; Check runs
// them all (snapshot.Open with VerifyData, which reads every byte anyway).
// A damaged column is an error naming it, never a column handed out that
// could make arrow-go slice out of bounds. Nothing else of the file is
// read. New does not take a reference on rec; the caller keeps rec alive.
func New(rec arrow.RecordBatch) (*Reader, error) {
	s := rec.Schema()
	md := s.Metadata()
	if got, _ := md.GetValue(datafile.MetaFile); got != FileIndex {
		return nil, fmt.Errorf("schema metadata %s=%q, want %q", datafile.MetaFile, got, FileIndex)
	}
	version, _ := md.GetValue(datafile.MetaVersion)
	if version != Version && version != VersionV1 && version != VersionV2 && version != VersionTiered && version != VersionV4 {
		return nil, fmt.Errorf("index file format version %q is not supported (this build reads %s to %s)", version, VersionV1, Version)
	}
	tiered, fixed, lookup := version == VersionTiered, NumFixed, version == Version
	if t, ok := md.GetValue(MetaTiered); ok && (version == Version || version == VersionV4) {
		if t != "true" {
			return nil, fmt.Errorf("schema metadata %s=%q, want \"true\" or absent", MetaTiered, t)
		}
		tiered = true
	}
	if tiered {
		fixed = NumFixedTiered
	}
	lookupAt := fixed
	if lookup {
		fixed += NumLookup
	}
	if s.NumFields() < fixed {
		return nil, fmt.Errorf("index has %d columns, want at least %d", s.NumFields(), fixed)
	}
	want := schemaOf(s.Field(ColumnLatestValue).Type, nil, tiered, lookup)
	for i := 0; i < fixed; i++ {
		g, w := s.Field(i), want.Field(i)
		if g.Name != w.Name || !arrow.TypeEqual(g.Type, w.Type) {
			return nil, fmt.Errorf("index column %d is %s %s, want %s %s", i, g.Name, g.Type, w.Name, w.Type)
		}
	}
	if int64(rec.NumRows()) < 0 || rec.NumCols() != int64(s.NumFields()) {
		return nil, fmt.Errorf("index batch has %d columns for %d fields", rec.NumCols(), s.NumFields())
	}
	for i, c := range rec.Columns() {
		name := s.Field(i).Name
		if c.DataType().ID() == arrow.DICTIONARY && version != VersionV1 {
			return nil, fmt.Errorf("index column %q is dictionary-encoded; version %s indexes hold none", name, version)
		}
		if int64(c.Len()) != rec.NumRows() {
			return nil, fmt.Errorf("index column %q has %d rows, the batch %d", name, c.Len(), rec.NumRows())
		}
		if err := checkBuffers(c); err != nil {
			return nil, fmt.Errorf("index column %q: %w", name, err)
		}
		if i >= fixed || i == ColumnSeriesID {
			continue // checkValues on first use: Attribute, IDs
		}
		if err := checkValues(c); err != nil {
			return nil, fmt.Errorf("index column %q: %w", name, err)
		}
	}
	for i := 0; i < fixed; i++ {
		if !want.Field(i).Nullable && rec.Column(i).NullN() != 0 {
			return nil, fmt.Errorf("index column %s has %d nulls", s.Field(i).Name, rec.Column(i).NullN())
		}
	}
	attrFields, err := attributeFields(s.Fields()[fixed:], version == Version || version == VersionV4)
	if err != nil {
		return nil, err
	}
	x := &Reader{
		attrs:        make([]attrCheck, s.NumFields()-fixed),
		version:      version,
		tiered:       tiered,
		attrStart:    fixed,
		attrFields:   attrFields,
		rec:          rec,
		ids:          rec.Column(ColumnSeriesID).(*array.String),
		rowOffset:    rec.Column(ColumnRowOffset).(*array.Int64).Int64Values(),
		rowCount:     rec.Column(ColumnRowCount).(*array.Int64).Int64Values(),
		batch:        rec.Column(ColumnBatch).(*array.Uint32).Uint32Values(),
		batchOffset:  rec.Column(ColumnBatchOffset).(*array.Uint32).Uint32Values(),
		firstPeriod:  rec.Column(ColumnFirstPeriod).(*array.Date32).Date32Values(),
		lastPeriod:   rec.Column(ColumnLastPeriod).(*array.Date32).Date32Values(),
		latestPeriod: rec.Column(ColumnLatestPeriod).(*array.Date32),
		latestValue:  rec.Column(ColumnLatestValue),
	}
	if tiered {
		x.coldStart = rec.Column(ColumnColdStart).(*array.Int64).Int64Values()
		x.coldRows = rec.Column(ColumnColdRows).(*array.Int64).Int64Values()
		x.coldFirst = rec.Column(ColumnColdFirstPeriod).(*array.Date32).Date32Values()
		x.coldLast = rec.Column(ColumnColdLastPeriod).(*array.Date32).Date32Values()
	}
	if lookup {
		x.lookup.start = rec.Column(lookupAt + ColumnLookupStart).(*array.Uint32).Uint32Values()
		x.lookup.code = rec.Column(lookupAt + ColumnLookupCode).(*array.Uint32).Uint32Values()
	}
	if d := x.ids.Data(); d.Len() > 0 {
		// checkBuffers made sure both buffers are there and long enough.
		x.idOffs = arrow.Int32Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()+1]
		if b := d.Buffers()[2]; b != nil {
			x.idData = b.Bytes()
		}
	}
	return x, nil
}

// Version is the file's layout version (Version, VersionV1, VersionV2,
// VersionTiered or VersionV4).
func (x *Reader) Version() string { return x.version }

// Tiered reports whether the index locates cold rows (version 3, or
// version 4 or 5 with MetaTiered). It is the schema that says so, not the
// rows: an empty tiered index (an --allow-empty build with a tier policy)
// has no rows to hold them.
func (x *Reader) Tiered() bool { return x.tiered }

// Len is the number of series.
func (x *Reader) Len() int { return x.ids.Len() }

// ID is series i's id, aliasing the index (valid while the snapshot is
// held), read with its two offsets bounds-checked, so that it needs no
// pass over the column; "" when they are damaged, which IDs and Check
// report. Lookup and Prefix read ids this way.
func (x *Reader) ID(i int) string {
	if i < 0 || i+1 >= len(x.idOffs) {
		return ""
	}
	lo, hi := x.idOffs[i], x.idOffs[i+1]
	if lo < 0 || hi < lo || int(hi) > len(x.idData) {
		return ""
	}
	return unsafeString(x.idData[lo:hi])
}

// IDBytes is the total length of every series id (for sizing a copy).
func (x *Reader) IDBytes() int { return len(x.idData) }

// Check runs every column's first-use check now (IDs, Attribute), and a
// version-5 index's lookup table check (CheckLookup), and returns the
// first failure.
func (x *Reader) Check() error {
	if _, err := x.IDs(); err != nil {
		return err
	}
	if err := x.CheckLookup(); err != nil {
		return err
	}
	return x.CheckAttributes()
}

// corruptf marks a check's failure as corruption of the index file.
func (x *Reader) corruptf(err error) error {
	if x.file != "" {
		return corrupt.InFile(x.file, fmt.Errorf("%s: %w", x.file, err))
	}
	return corrupt.Mark(err)
}

// Record is the underlying record batch.
func (x *Reader) Record() arrow.RecordBatch { return x.rec }

// IDs is the series_id column, sorted bytewise (aliasing the index, and
// so the mapping: valid while the snapshot is held), once its offsets have
// been checked: on the first call, like Attribute's check.
func (x *Reader) IDs() (*array.String, error) {
	x.idCheck.once.Do(func() {
		if err := checkValues(x.ids); err != nil {
			x.idCheck.err = x.corruptf(fmt.Errorf("index column %q: %w", ColSeriesID, err))
		}
	})
	if x.idCheck.err != nil {
		return nil, x.idCheck.err
	}
	return x.ids, nil
}

// SeriesID returns a copy of series i's id, safe to keep after the
// snapshot is released. (Hot paths read IDs() in place instead: since
// version 2 the index is mapped, so a string aliasing it is valid only
// while the mapping is, as are Entry's SeriesID and every column.)
func (x *Reader) SeriesID(i int) string { return strings.Clone(x.ID(i)) }

// Lookup finds a series by id: through the lookup table of a version-5
// index (lookup.go), else, or when the table does not hold it, by a
// binary search over the sorted ids. Either way a code is answered only
// after its id compared equal, so the table can speed an answer up but
// never change it. An id that is not there costs both.
func (x *Reader) Lookup(id string) (int, bool) {
	if c, ok := x.find(id); ok {
		return c, true
	}
	return x.search(id)
}

// search is Lookup's binary search. It compares the id bytes where they
// lie (offsets and data of the utf8 column) rather than through Value,
// which is most of a search's cost.
func (x *Reader) search(id string) (int, bool) {
	lo, hi := 0, x.ids.Len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if x.ID(m) < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < x.ids.Len() && x.ID(lo) == id
}

// Prefix returns the code range [lo, hi) of series whose id starts with p.
func (x *Reader) Prefix(p string) (lo, hi int) {
	n := x.ids.Len()
	lo = sort.Search(n, func(i int) bool { return x.ID(i) >= p })
	hi = lo + sort.Search(n-lo, func(j int) bool { return !strings.HasPrefix(x.ID(lo+j), p) })
	return lo, hi
}

// Entry returns series i's location and bounds.
func (x *Reader) Entry(i int) Entry {
	return Entry{
		Code:        i,
		SeriesID:    x.ID(i),
		RowOffset:   x.rowOffset[i],
		RowCount:    x.rowCount[i],
		Batch:       int(x.batch[i]),
		BatchOffset: int(x.batchOffset[i]),
		FirstPeriod: int32(x.firstPeriod[i]),
		LastPeriod:  int32(x.lastPeriod[i]),
		Cold:        x.Cold(i),
	}
}

// Location is where series i's hot rows lie: Entry's Batch, BatchOffset
// and RowCount, read alone (three columns rather than every column of the
// entry, its id among them: two more cache misses) for a caller that
// reads the rows of many series (a DoPut's revisions).
func (x *Reader) Location(i int) (batch, offset int, rows int64) {
	return int(x.batch[i]), int(x.batchOffset[i]), x.rowCount[i]
}

// Bounds are series i's first and last periods over both tiers: Entry's
// FirstPeriod and LastPeriod, read alone (two columns rather than every
// column of the entry) for a caller that only needs to know whether a
// period can be one of the series'.
func (x *Reader) Bounds(i int) (first, last int32) {
	return int32(x.firstPeriod[i]), int32(x.lastPeriod[i])
}

// Cold is where series i's cold rows lie; the zero Cold in an index that
// is not tiered.
func (x *Reader) Cold(i int) Cold {
	if !x.Tiered() {
		return Cold{}
	}
	return Cold{Start: x.coldStart[i], Rows: x.coldRows[i], FirstPeriod: int32(x.coldFirst[i]), LastPeriod: int32(x.coldLast[i])}
}

// Latest returns the period of series i's last non-null value, and false
// when all its values are null. The value itself is LatestValues().(i).
func (x *Reader) Latest(i int) (int32, bool) {
	if x.latestPeriod.IsNull(i) {
		return 0, false
	}
	return int32(x.latestPeriod.Value(i)), true
}

// LatestValues is the latest_value column.
func (x *Reader) LatestValues() arrow.Array { return x.latestValue }

// SetFile names the index file in the errors of the lazy checks (the way
// the caller knows it: a snapshot passes the manifest's path), so that they
// are corrupt.FileErrors like those of an open. Call it before sharing x.
func (x *Reader) SetFile(path string) { x.file = path }

// AttributeFields returns the attribute fields, in column order, typed as
// Attribute hands the columns out: a version-4 code column as a
// dictionary of utf8 indexed by its code type. It checks nothing (the
// schema was checked by New).
func (x *Reader) AttributeFields() []arrow.Field {
	return x.attrFields
}

// Attribute returns attribute column i (0 is the first column after the
// fixed ones) once its offsets or dictionary indices have been checked:
// the check runs on the first call for that column and its outcome is
// kept, so later calls cost nothing. A damaged column is an error marked
// corrupt.ErrCorrupt naming the column (and the file, see SetFile). Safe
// for concurrent use.
func (x *Reader) Attribute(i int) (arrow.Array, error) {
	if i < 0 || i >= len(x.attrs) {
		return nil, fmt.Errorf("attribute %d of %d", i, len(x.attrs))
	}
	c := &x.attrs[i]
	c.once.Do(func() {
		col := x.rec.Column(x.attrStart + i)
		f := x.rec.Schema().Field(x.attrStart + i)
		var err error
		if x.coded(i) {
			var d arrow.Array
			if d, err = decodeColumn(f, col); err == nil {
				col = d
			}
		} else {
			err = checkValues(col)
		}
		if err != nil {
			c.err = x.corruptf(fmt.Errorf("index column %q: %w", f.Name, err))
			c.col = array.MakeArrayOfNull(memory.DefaultAllocator, x.attrFields[i].Type, col.Len())
			return
		}
		c.col = col
	})
	if c.err != nil {
		return nil, c.err
	}
	return c.col, nil
}

// CheckAttributes checks every attribute column not checked yet (see
// Attribute) and returns the first failure.
func (x *Reader) CheckAttributes() error {
	for i := range x.attrs {
		if _, err := x.Attribute(i); err != nil {
			return err
		}
	}
	return nil
}

// Attributes returns the attribute fields and columns, each checked (see
// Attribute; the first call pays for every column not checked yet). A
// column that fails its check is replaced by one of nulls of its type, so
// that nothing returned can make arrow-go slice out of bounds; callers
// that must report the damage call CheckAttributes or Attribute.
func (x *Reader) Attributes() ([]arrow.Field, []arrow.Array) {
	f := x.AttributeFields()
	c := make([]arrow.Array, len(x.attrs))
	for i := range x.attrs {
		x.Attribute(i)
		c[i] = x.attrs[i].col
	}
	return f, c
}
