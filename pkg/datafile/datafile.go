// Package datafile defines the hot data file (data.arrow) of a snapshot:
// its key columns, schema metadata and the checks a reader makes before it
// trusts a mapped file. docs/FORMAT.md §3 is the prose version.
//
// Rows are sorted by (series, period) so that one series is one contiguous
// row range; the file carries series_code (the series' row in the index)
// instead of the series id string, so no per-row string and no dictionary
// type is ever mapped.
package datafile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// Names of the fixed columns, in order.
const (
	ColSeriesCode = "series_code"
	ColPeriod     = "period"
	ColValue      = "value"
)

// Positions of the fixed columns. Every reader and writer of data records
// uses these instead of numbers, so the layout has one owner.
const (
	ColumnSeriesCode = iota // uint32, never null: the series' row in the index
	ColumnPeriod            // date32, never null
	ColumnValue             // the value type, nullable

	// NumFixed is the number of fixed columns: the columns that vary
	// within a series start at this position.
	NumFixed
)

// Schema metadata keys and values shared by the data and index files.
const (
	MetaFile    = "servingsnap.file"
	MetaVersion = "servingsnap.format_version"
	FileData    = "data"
	Version     = "1"
)

// DefaultBatchRows is the target record batch size: about a million rows
// keeps the footer small (one page fault per batch at open) while a batch
// still fits comfortably in a gRPC response slice.
const DefaultBatchRows = 1 << 20

// Schema returns the data file schema: the key columns, then the value
// column of valueType, then the columns that vary within a series.
func Schema(valueType arrow.DataType, extra []arrow.Field) *arrow.Schema {
	fields := make([]arrow.Field, NumFixed, NumFixed+len(extra))
	fields[ColumnSeriesCode] = arrow.Field{Name: ColSeriesCode, Type: arrow.PrimitiveTypes.Uint32}
	fields[ColumnPeriod] = arrow.Field{Name: ColPeriod, Type: arrow.FixedWidthTypes.Date32}
	fields[ColumnValue] = arrow.Field{Name: ColValue, Type: valueType, Nullable: true}
	fields = append(fields, extra...)
	md := arrow.NewMetadata([]string{MetaFile, MetaVersion}, []string{FileData, Version})
	return arrow.NewSchema(fields, &md)
}

// CheckSchema verifies that s is a data file schema this package can read.
func CheckSchema(s *arrow.Schema) error {
	if err := CheckMeta(s, FileData); err != nil {
		return err
	}
	if s.NumFields() < NumFixed {
		return fmt.Errorf("data file has %d columns, want at least %d", s.NumFields(), NumFixed)
	}
	want := []struct {
		pos  int
		name string
		id   arrow.Type
	}{{ColumnSeriesCode, ColSeriesCode, arrow.UINT32}, {ColumnPeriod, ColPeriod, arrow.DATE32}}
	for _, w := range want {
		f := s.Field(w.pos)
		if f.Name != w.name || f.Type.ID() != w.id {
			return fmt.Errorf("data file column %d is %s %s, want %s %s", w.pos, f.Name, f.Type, w.name, w.id)
		}
	}
	if f := s.Field(ColumnValue); f.Name != ColValue {
		return fmt.Errorf("data file column %d is %q, want %q", ColumnValue, f.Name, ColValue)
	}
	for _, f := range s.Fields() {
		if f.Type.ID() == arrow.DICTIONARY {
			return fmt.Errorf("data file column %q is dictionary-encoded", f.Name)
		}
	}
	return nil
}

// IsNumeric reports whether dt can be the value column's type: integers,
// floats and decimals (a dictionary of those counts too, for readers that
// see one).
func IsNumeric(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64,
		arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	case arrow.DICTIONARY:
		return IsNumeric(dt.(*arrow.DictionaryType).ValueType)
	}
	return false
}

// CheckMeta verifies the servingsnap file-kind and version metadata.
func CheckMeta(s *arrow.Schema, kind string) error {
	md := s.Metadata()
	if got, _ := md.GetValue(MetaFile); got != kind {
		return fmt.Errorf("schema metadata %s=%q, want %q", MetaFile, got, kind)
	}
	if got, _ := md.GetValue(MetaVersion); got != Version {
		return fmt.Errorf("%s file format version %q is not supported (this build reads %s)", kind, got, Version)
	}
	return nil
}
