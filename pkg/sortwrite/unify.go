package sortwrite

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// FileSchema is the Arrow schema of one input file, as its reader sees it.
type FileSchema struct {
	Path   string
	Fields []arrow.Field
}

// Column is one column of the unified input schema.
type Column struct {
	Name string
	// Type is the normalised type: every string flavour (utf8, large_utf8,
	// string_view, dictionary of strings) is utf8, every binary flavour is
	// binary. Other types are kept as they are.
	Type arrow.DataType
	// From is the first file that has the column with this type; it names
	// the column's origin in type-conflict errors.
	From string
	// In[i] is the column's field index in file i, or -1 when file i lacks
	// it (its rows get nulls there).
	In []int
}

// Unified is the schema all input files are read into.
type Unified struct {
	Columns []Column
}

// Index returns the position of the named column, or -1.
func (u *Unified) Index(name string) int {
	for i, c := range u.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Unify merges the schemas of all input files: the union of their columns,
// in first-seen order. A column missing from a file is null there. The same
// column with different (normalised) types in two files is an error that
// names both files, except for the columns in anyType (the period column is
// normalised per file, so its physical type may differ). A column of Arrow's
// null type (all-null in that file) takes any other file's type.
func Unify(files []FileSchema, anyType map[string]bool) (*Unified, error) {
	u := &Unified{}
	pos := map[string]int{}
	for fi, f := range files {
		seen := map[string]bool{}
		for xi, fld := range f.Fields {
			if seen[fld.Name] {
				return nil, fmt.Errorf("%s: column %q appears twice", f.Path, fld.Name)
			}
			seen[fld.Name] = true
			nt, err := normalizeType(fld.Type)
			if err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", f.Path, fld.Name, err)
			}
			ci, ok := pos[fld.Name]
			if !ok {
				ci = len(u.Columns)
				pos[fld.Name] = ci
				in := make([]int, len(files))
				for i := range in {
					in[i] = -1
				}
				u.Columns = append(u.Columns, Column{Name: fld.Name, Type: nt, From: f.Path, In: in})
			}
			c := &u.Columns[ci]
			c.In[fi] = xi
			switch {
			case anyType[fld.Name] || arrow.TypeEqual(c.Type, nt) || nt.ID() == arrow.NULL:
			case c.Type.ID() == arrow.NULL:
				c.Type, c.From = nt, f.Path
			default:
				return nil, fmt.Errorf("column %q has type %s in %s but %s in %s", fld.Name, c.Type, c.From, nt, f.Path)
			}
		}
	}
	return u, nil
}

// normalizeType maps a file's column type to the type it has in the
// unified schema, or explains why the column cannot be stored.
func normalizeType(dt arrow.DataType) (arrow.DataType, error) {
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return arrow.BinaryTypes.String, nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return arrow.BinaryTypes.Binary, nil
	case arrow.DICTIONARY:
		return normalizeType(dt.(*arrow.DictionaryType).ValueType)
	case arrow.NULL, arrow.BOOL:
		return dt, nil
	}
	if fw, ok := dt.(arrow.FixedWidthDataType); ok && fw.BitWidth() >= 8 && fw.BitWidth()%8 == 0 {
		return dt, nil
	}
	return nil, fmt.Errorf("type %s is not supported (nested and extension columns cannot be stored in a snapshot)", dt)
}

// kind says how a column is held in memory while building.
type kind int

const (
	kindString kind = iota // dictionary codes; utf8 or binary
	kindFixed              // fixed-width bytes per row
	kindBool               // one byte per row
	kindNull               // no values at all
)

func kindOf(dt arrow.DataType) kind {
	switch dt.ID() {
	case arrow.STRING, arrow.BINARY:
		return kindString
	case arrow.BOOL:
		return kindBool
	case arrow.NULL:
		return kindNull
	}
	return kindFixed
}
