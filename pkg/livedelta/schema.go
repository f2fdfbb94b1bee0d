package livedelta

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
)

// Schema is what the dataset's rows look like, taken from the base
// snapshot: the data file's schema and the attribute fields.
type Schema struct {
	// Data is the data file's schema (series_code, period, value, the
	// columns that vary within a series); runs hold rows in it.
	Data *arrow.Schema
	// Attrs are the per-series attribute fields with their value types
	// (an index dictionary stands for its value type).
	Attrs []arrow.Field
	// Write is a normalized write: series_id utf8, period date32, the data
	// columns after period, the attributes, and "given" (whether the row's
	// write carried the attributes). It is also what the WAL stores.
	Write *arrow.Schema
}

// ColGiven is the last column of a normalized write.
const ColGiven = "servingsnap.attributes_given"

// NewSchema derives the write schema from a data schema and attributes.
func NewSchema(data *arrow.Schema, attrs []arrow.Field) (*Schema, error) {
	if err := datafile.CheckSchema(data); err != nil {
		return nil, err
	}
	fields := []arrow.Field{{Name: index.ColSeriesID, Type: arrow.BinaryTypes.String}}
	for i := datafile.ColumnPeriod; i < data.NumFields(); i++ {
		fields = append(fields, data.Field(i))
	}
	plain := make([]arrow.Field, len(attrs))
	for i, f := range attrs {
		t := f.Type
		if d, ok := t.(*arrow.DictionaryType); ok {
			t = d.ValueType
		}
		plain[i] = arrow.Field{Name: f.Name, Type: t, Nullable: true}
		fields = append(fields, plain[i])
	}
	fields = append(fields, arrow.Field{Name: ColGiven, Type: arrow.FixedWidthTypes.Boolean})
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f.Name] {
			return nil, fmt.Errorf("delta: column %q appears twice", f.Name)
		}
		seen[f.Name] = true
	}
	return &Schema{Data: data, Attrs: plain, Write: arrow.NewSchema(fields, nil)}, nil
}
