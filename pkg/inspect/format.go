package inspect

import (
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/period"
)

// Cell is one value of an Arrow column, rendered once for text and once for
// JSON. Its JSON form is a number for integer and floating-point columns
// (non-finite floats become the strings "NaN", "+Inf", "-Inf"), a boolean
// for booleans, null for nulls and a string for everything else (dates as
// YYYY-MM-DD).
type Cell struct {
	Text    string // text form; "" for null
	Null    bool
	Numeric bool // right-align in text tables
	json    []byte
}

// MarshalJSON implements json.Marshaler.
func (c Cell) MarshalJSON() ([]byte, error) {
	if c.Null || c.json == nil {
		return []byte("null"), nil
	}
	return c.json, nil
}

func nullCell() Cell { return Cell{Null: true} }

func stringCell(s string) Cell {
	b, _ := json.Marshal(s)
	return Cell{Text: s, json: b}
}

func numberCell(s string) Cell { return Cell{Text: s, Numeric: true, json: []byte(s)} }

func floatCell(v float64, bits int) Cell {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		s := "NaN"
		if math.IsInf(v, 1) {
			s = "+Inf"
		} else if math.IsInf(v, -1) {
			s = "-Inf"
		}
		c := stringCell(s)
		c.Numeric = true
		return c
	}
	return numberCell(formatFloat(v, bits))
}

// formatFloat renders v in the shortest form that reads back exactly, in
// plain decimal notation unless that would be very long.
func formatFloat(v float64, bits int) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.FormatFloat(v, 'f', -1, bits)
	}
	return strconv.FormatFloat(v, 'g', -1, bits)
}

// CellOf renders row i of arr. Dictionary arrays are rendered through their
// dictionary.
func CellOf(arr arrow.Array, i int) Cell {
	if arr.IsNull(i) {
		return nullCell()
	}
	switch a := arr.(type) {
	case *array.Dictionary:
		return CellOf(a.Dictionary(), a.GetValueIndex(i))
	case *array.Float64:
		return floatCell(a.Value(i), 64)
	case *array.Float32:
		return floatCell(float64(a.Value(i)), 32)
	case *array.Float16:
		return floatCell(float64(a.Value(i).Float32()), 32)
	case *array.Int8:
		return numberCell(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Int16:
		return numberCell(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Int32:
		return numberCell(strconv.FormatInt(int64(a.Value(i)), 10))
	case *array.Int64:
		return numberCell(strconv.FormatInt(a.Value(i), 10))
	case *array.Uint8:
		return numberCell(strconv.FormatUint(uint64(a.Value(i)), 10))
	case *array.Uint16:
		return numberCell(strconv.FormatUint(uint64(a.Value(i)), 10))
	case *array.Uint32:
		return numberCell(strconv.FormatUint(uint64(a.Value(i)), 10))
	case *array.Uint64:
		return numberCell(strconv.FormatUint(a.Value(i), 10))
	case *array.Boolean:
		s := strconv.FormatBool(a.Value(i))
		return Cell{Text: s, json: []byte(s)}
	case *array.Date32:
		return stringCell(period.Format(int32(a.Value(i))))
	case *array.String:
		return stringCell(a.Value(i))
	case *array.LargeString:
		return stringCell(a.Value(i))
	case *array.Decimal128, *array.Decimal256, *array.Decimal32, *array.Decimal64:
		c := stringCell(arr.ValueStr(i))
		c.Numeric = true
		return c
	}
	return stringCell(arr.ValueStr(i))
}

// textOf is the text form of a cell, with "null" for nulls (in tables,
// where an empty cell would be ambiguous).
func textOf(c Cell) string {
	if c.Null {
		return "null"
	}
	return c.Text
}

// Commas renders n with thousands separators: 1234567 → "1,234,567"
// (the binaries' one format for counts, cliutil.Count).
func Commas(n int64) string { return cliutil.Count(n) }

// signed renders a change with an explicit sign: +3, -2, 0.
func signed(n int64) string {
	if n > 0 {
		return "+" + Commas(n)
	}
	return Commas(n)
}

// HumanBytes renders a size in binary units: 536130 → "523.6 KiB"
// (cliutil.Bytes).
func HumanBytes(n int64) string { return cliutil.Bytes(n) }

// orDash shows an empty string as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// table writes aligned columns separated by two spaces; numeric columns
// are right-aligned and no line has trailing spaces. The last cell of a row
// shorter than the others is written as is and spans the remaining columns.
type table struct {
	header []string
	right  []bool
	rows   [][]string
}

func newTable(header ...string) *table {
	return &table{header: header, right: make([]bool, len(header))}
}

// alignRight right-aligns the given columns.
func (t *table) alignRight(cols ...int) *table {
	for _, c := range cols {
		t.right[c] = true
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, indent string) error {
	n := len(t.header)
	for _, r := range t.rows {
		if len(r) > n {
			n = len(r)
		}
	}
	if len(t.right) < n {
		t.right = append(t.right, make([]bool, n-len(t.right))...)
	}
	width := make([]int, n)
	measure := func(r []string) {
		for i, c := range r {
			if len(r) < n && i == len(r)-1 {
				break // the last cell of a short row spans the rest
			}
			if n := utf8.RuneCountInString(c); n > width[i] {
				width[i] = n
			}
		}
	}
	if t.header != nil {
		measure(t.header)
	}
	for _, r := range t.rows {
		measure(r)
	}
	var err error
	line := func(r []string) {
		if err == nil {
			_, err = io.WriteString(w, formatLine(indent, r, width, t.right))
		}
	}
	if t.header != nil {
		line(t.header)
	}
	for _, r := range t.rows {
		line(r)
	}
	return err
}

// writeJSON writes v as indented JSON with a trailing newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// formatLine lays out one table line: cells padded to width (right-aligned
// where right says), two spaces apart, no trailing spaces, a newline.
func formatLine(indent string, r []string, width []int, right []bool) string {
	var b strings.Builder
	b.WriteString(indent)
	for i, c := range r {
		pad := max(width[i]-utf8.RuneCountInString(c), 0)
		last := i == len(r)-1
		if right[i] {
			b.WriteString(strings.Repeat(" ", pad))
			b.WriteString(c)
		} else {
			b.WriteString(c)
			if !last {
				b.WriteString(strings.Repeat(" ", pad))
			}
		}
		if !last {
			b.WriteString("  ")
		}
	}
	return strings.TrimRight(b.String(), " ") + "\n"
}
