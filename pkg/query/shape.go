package query

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
)

// Schema metadata keys of every answer's schema: which snapshot and
// dataset produced it, so a client can tell answers of two vintages apart.
const (
	MetaSnapshotID = "servingsnap.snapshot_id"
	MetaDataset    = "servingsnap.dataset"
)

// Output column names that are not data columns.
const (
	ColSeriesID = index.ColSeriesID
	ColPeriod   = datafile.ColPeriod
)

// SeriesIDType is the answer's series_id column: codes into a dictionary
// that lists the answer's series ids in output order. Ids are sent once
// per series, not once per row.
var SeriesIDType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// Column is a selectable output column: a data column (value and the
// columns that vary within a series) or a per-series attribute.
type Column struct {
	Name  string
	Attr  bool
	Pos   int         // data: position in the data schema; attribute: position among the attributes
	Field arrow.Field // as the answer carries it (attributes: dictionary<int32, T>)
	Width int         // fixed bytes per row (for message sizing); offsets for variable width
	Var   bool        // variable width: offsets + data
}

// Shape is what a Reader's schemas imply for answers, derived once per
// view: the selectable columns, lookup by name, the default answer
// schemas. Nothing in it is per series or per row.
type Shape struct {
	dataset    string
	snapshotID uint64
	dataSchema *arrow.Schema
	attrFields []arrow.Field

	data     []Column // data columns after period, in file order
	attrs    []Column // attribute columns, in index order
	byName   map[string]Column
	valuePos int // data schema position of the value column
	category int // position in attrs of the "category" attribute, -1 if none

	schemaDefault *arrow.Schema
	schemaAttrs   *arrow.Schema
}

// CategoryAttribute is the attribute a ByCategory selector matches.
const CategoryAttribute = "category"

// NewShape derives the shape of answers from a data schema (series_code,
// period, value, varying columns) and the attribute fields as stored (a
// dictionary type stands for its value type). It refuses column types the
// answers cannot carry and attribute names that clash with data columns.
func NewShape(dataset string, snapshotID uint64, data *arrow.Schema, attrs []arrow.Field) (*Shape, error) {
	sh := &Shape{dataset: dataset, snapshotID: snapshotID, dataSchema: data, attrFields: attrs, byName: map[string]Column{}, category: -1, valuePos: -1}
	if err := datafile.CheckSchema(data); err != nil {
		return nil, fmt.Errorf("dataset %s: %w", dataset, err)
	}
	for i := datafile.ColumnValue; i < data.NumFields(); i++ {
		f := data.Field(i)
		w, vari, err := widthOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: data column %q: %w", dataset, f.Name, err)
		}
		c := Column{Name: f.Name, Pos: i, Field: arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}, Width: w, Var: vari}
		sh.data = append(sh.data, c)
		sh.byName[f.Name] = c
		if f.Name == datafile.ColValue {
			sh.valuePos = i
		}
	}
	for i, f := range attrs {
		vt := f.Type
		if d, ok := vt.(*arrow.DictionaryType); ok {
			vt = d.ValueType
		}
		if _, clash := sh.byName[f.Name]; clash || f.Name == ColPeriod || f.Name == ColSeriesID {
			return nil, fmt.Errorf("dataset %s: attribute %q has the name of a data column", dataset, f.Name)
		}
		c := Column{Name: f.Name, Attr: true, Pos: i, Width: 4,
			Field: arrow.Field{Name: f.Name, Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: vt}, Nullable: true}}
		sh.attrs = append(sh.attrs, c)
		sh.byName[f.Name] = c
		if f.Name == CategoryAttribute {
			sh.category = i
		}
	}
	sh.schemaDefault = sh.schemaFor(sh.data)
	sh.schemaAttrs = sh.schemaFor(append(append([]Column(nil), sh.data...), sh.attrs...))
	return sh, nil
}

// DataSchema is the data file's schema the Reader's pieces have.
func (sh *Shape) DataSchema() *arrow.Schema { return sh.dataSchema }

// AttributeFields are the attribute fields as stored (dictionary types
// stand for their value types).
func (sh *Shape) AttributeFields() []arrow.Field { return sh.attrFields }

// Dataset is the dataset name answers carry.
func (sh *Shape) Dataset() string { return sh.dataset }

// DefaultSchema is the schema of an answer with the default columns.
func (sh *Shape) DefaultSchema() *arrow.Schema { return sh.schemaDefault }

// Attributes are the attribute columns, in index order.
func (sh *Shape) Attributes() []Column { return sh.attrs }

// Data are the data columns after period, in file order.
func (sh *Shape) Data() []Column { return sh.data }

// Category is the position of the "category" attribute, -1 if none.
func (sh *Shape) Category() int { return sh.category }

// Names are the names of every column an answer can hold: series_id,
// period, the data columns, the attributes.
func (sh *Shape) Names() []string {
	names := []string{ColSeriesID, ColPeriod}
	for _, c := range sh.data {
		names = append(names, c.Name)
	}
	for _, c := range sh.attrs {
		names = append(names, c.Name)
	}
	return names
}

// columns resolves a request's column list.
func (sh *Shape) columns(req *Request) ([]Column, *arrow.Schema, error) {
	if req.Columns == nil {
		if req.Attributes {
			return append(append([]Column(nil), sh.data...), sh.attrs...), sh.schemaAttrs, nil
		}
		return sh.data, sh.schemaDefault, nil
	}
	var cols []Column
	seen := map[string]bool{ColPeriod: true, ColSeriesID: true}
	for _, name := range req.Columns {
		if seen[name] {
			continue
		}
		seen[name] = true
		c, ok := sh.byName[name]
		if !ok {
			return nil, nil, Errorf(ErrInvalid, "unknown column %q in dataset %q (columns: %s)", Truncate(name, 128), sh.dataset, strings.Join(sh.columnNames(), ", "))
		}
		cols = append(cols, c)
	}
	if req.Attributes {
		for _, c := range sh.attrs {
			if !seen[c.Name] {
				cols = append(cols, c)
			}
		}
	}
	return cols, sh.schemaFor(cols), nil
}

func (sh *Shape) columnNames() []string {
	names := []string{ColSeriesID, ColPeriod}
	for _, c := range sh.data {
		names = append(names, c.Name)
	}
	for _, c := range sh.attrs {
		names = append(names, c.Name+" (attribute)")
	}
	return names
}

// schemaFor is an answer's schema: series_id, period, then cols, with the
// snapshot id and dataset in the metadata.
func (sh *Shape) schemaFor(cols []Column) *arrow.Schema {
	fields := make([]arrow.Field, 0, 2+len(cols))
	fields = append(fields,
		arrow.Field{Name: ColSeriesID, Type: SeriesIDType},
		arrow.Field{Name: ColPeriod, Type: arrow.FixedWidthTypes.Date32})
	for _, c := range cols {
		fields = append(fields, c.Field)
	}
	md := arrow.NewMetadata([]string{MetaSnapshotID, MetaDataset}, []string{strconv.FormatUint(sh.snapshotID, 10), sh.dataset})
	return arrow.NewSchema(fields, &md)
}

// widthOf is the fixed byte width of a type, or vari for the offset-based
// ones. Other types (nested) are refused: answers could not be sized.
func widthOf(t arrow.DataType) (w int, vari bool, err error) {
	switch t.ID() {
	case arrow.STRING, arrow.BINARY:
		return 4, true, nil
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return 8, true, nil
	case arrow.BOOL:
		return 1, false, nil // rounded up from a bit
	}
	if fw, ok := t.(arrow.FixedWidthDataType); ok {
		return (fw.BitWidth() + 7) / 8, false, nil
	}
	return 0, false, fmt.Errorf("type %s is not supported by the server", t)
}
