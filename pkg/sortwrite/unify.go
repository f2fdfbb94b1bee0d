package sortwrite

import (
	"fmt"
	"strings"

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
// names both files, and so are two names that differ only in case (value
// and Value): engines that read the snapshot's portable copy, and most that
// wrote the lake, fold case, so the two would silently become one column or
// fail there. The columns in periodLike (the period column, normalised per
// file) may have different types in different files as long as
// periodTypesMix allows it: date32 in one file and strings or a timestamp
// in another is fine, strings in one and integers in another is a type
// conflict. A column of Arrow's null type (all-null in that file) takes any
// other file's type.
func Unify(files []FileSchema, periodLike map[string]bool) (*Unified, error) {
	return unify(files, periodLike, false)
}

// UnifyMixedPeriods is Unify with the kinds of the periodLike columns
// free to mix (build --mixed-period-types): each file's periods are read
// as FORMAT.md §5 says for its own type, integers as their digits.
func UnifyMixedPeriods(files []FileSchema, periodLike map[string]bool) (*Unified, error) {
	return unify(files, periodLike, true)
}

func unify(files []FileSchema, periodLike map[string]bool, mixPeriods bool) (*Unified, error) {
	u := &Unified{}
	pos := map[string]int{}
	folded := map[string]int{} // lower-cased name -> column
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
				if other, clash := folded[strings.ToLower(fld.Name)]; clash {
					o := u.Columns[other]
					where := "in " + o.From + " and " + f.Path
					if o.In[fi] >= 0 {
						where = "both in " + f.Path
					}
					return nil, fmt.Errorf("columns %q and %q differ only in case (%s): rename one; a snapshot's columns must differ in more than case", o.Name, fld.Name, where)
				}
				ci = len(u.Columns)
				pos[fld.Name] = ci
				folded[strings.ToLower(fld.Name)] = ci
				in := make([]int, len(files))
				for i := range in {
					in[i] = -1
				}
				u.Columns = append(u.Columns, Column{Name: fld.Name, Type: nt, From: f.Path, In: in})
			}
			c := &u.Columns[ci]
			c.In[fi] = xi
			switch {
			case nt.ID() == arrow.NULL:
			case c.Type.ID() == arrow.NULL:
				c.Type, c.From = nt, f.Path
			case periodLike[fld.Name]:
				if !mixPeriods && !periodTypesMix(c.Type, nt) {
					return nil, fmt.Errorf("column %q has type %s (%s) in %s but %s (%s) in %s: integer periods cannot mix with other kinds across files (--mixed-period-types accepts it)",
						fld.Name, c.Type, PeriodKind(c.Type), c.From, nt, PeriodKind(nt), f.Path)
				}
			case arrow.TypeEqual(c.Type, nt):
			default:
				return nil, fmt.Errorf("column %q has type %s in %s but %s in %s", fld.Name, c.Type, c.From, nt, f.Path)
			}
		}
	}
	return u, nil
}

// periodTypesMix reports whether two files' period columns may have types
// a and b. Types of one kind (PeriodKind) always mix. Text and dates mix
// too: a string names its period by its form (2019-03, 2019-Q2) and a date
// by its value, so each value says which period it means. An integer is
// only digits: whether 2019, 201903 or 20190315 spells a year, a month or
// a day is the exporting file's convention, so integer periods mix only
// with integers, and anything else is the type conflict the docs call an
// error (a string period in one file, an integer in another).
func periodTypesMix(a, b arrow.DataType) bool {
	ka, kb := PeriodKind(a), PeriodKind(b)
	calendar := func(k string) bool { return k == "text" || k == "date" }
	return ka == kb || (calendar(ka) && calendar(kb))
}

// PeriodKind names the kind of a period column's type: "text" (string
// flavours, dictionaries of strings), "integer" (read as decimal digits),
// "date" (date32, date64, timestamps of any unit and zone). Any other type
// is its own kind (the period reader refuses it).
func PeriodKind(dt arrow.DataType) string {
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "text"
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return "integer"
	case arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP:
		return "date"
	case arrow.DICTIONARY:
		return PeriodKind(dt.(*arrow.DictionaryType).ValueType)
	}
	return dt.String()
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
