package query

import (
	"context"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Reader is one consistent, immutable view of a dataset. Series are
// identified by codes the Reader assigns (for a bare snapshot, index row
// numbers); a Selection lists codes in ascending series-id order. All
// methods are safe for concurrent use, and what they return stays valid
// while the caller holds the view (the transport's reference on it).
type Reader interface {
	// Info is what the view serves.
	Info() Info
	// Shape is the answers' columns and schemas, derived once.
	Shape() *Shape
	// Select resolves a selector. Unknown ids and a category that matches
	// nothing are ErrNotFound; a category on a dataset without the
	// attribute is ErrInvalid.
	Select(s Selector) (Selection, error)
	// SeriesID is the id of a code.
	SeriesID(code int) string
	// Rows appends the pieces holding the series' rows whose period lies
	// in r, in period order, to dst. A bare snapshot yields at most one
	// piece; a view with a delta may interleave several.
	Rows(code int, r Range, dst []Piece) ([]Piece, error)
	// LatestRow is the series' last row in r whose value is not null.
	LatestRow(code int, r Range) (Piece, bool, error)
	// Latest is the period of the series' last non-null value, known
	// without reading rows; false when every value is null.
	Latest(code int) (int32, bool)
	// LatestValues are the latest values of codes (each has one, per
	// Latest), in that order.
	LatestValues(ctx context.Context, codes []int32, mem memory.Allocator) (arrow.Array, error)
	// Dictionaries are the series ids of sel in order, and for each
	// attribute position in attrs the attribute's value per selected
	// series (dictionary-encoded attributes decoded). Callers release them.
	Dictionaries(ctx context.Context, sel Selection, attrs []int, mem memory.Allocator) (ids arrow.Array, values []arrow.Array, err error)
}

// Info is what a view serves, exactly (counts come from the index, not
// from estimates).
type Info struct {
	Dataset    string
	SnapshotID uint64
	Series     int64
	Rows       int64
}

// Piece is rows [Lo, Hi) of a record batch of the data schema. The batch
// belongs to the Reader: valid while the view is held, never released by
// the caller.
type Piece struct {
	Rec    arrow.RecordBatch
	Lo, Hi int64
}

// Len is the number of rows.
func (p Piece) Len() int64 { return p.Hi - p.Lo }

// Selection is the matching series codes in output order: a contiguous
// code range or an explicit list.
type Selection struct {
	lo, hi int
	list   []int32 // nil: the range
}

// CodeRange selects codes [lo, hi).
func CodeRange(lo, hi int) Selection { return Selection{lo: lo, hi: hi} }

// CodeList selects the codes listed, in that order. Consecutive codes
// become a range, whose dictionaries are slices rather than copies.
func CodeList(codes []int32) Selection {
	if n := len(codes); n > 0 && int(codes[n-1]-codes[0]) == n-1 {
		return Selection{lo: int(codes[0]), hi: int(codes[0]) + n}
	}
	return Selection{list: codes}
}

// Len is the number of series.
func (s Selection) Len() int {
	if s.list != nil {
		return len(s.list)
	}
	return s.hi - s.lo
}

// Code is the k-th selected code.
func (s Selection) Code(k int) int {
	if s.list != nil {
		return int(s.list[k])
	}
	return s.lo + k
}

// Sub is the selection's positions [lo, hi): what a caller that walks a
// large selection in chunks asks dictionaries of, one chunk at a time.
func (s Selection) Sub(lo, hi int) Selection {
	if s.list != nil {
		return Selection{list: s.list[lo:hi]}
	}
	return Selection{lo: s.lo + lo, hi: s.lo + hi}
}

// Span returns the code range when the selection is one.
func (s Selection) Span() (lo, hi int, ok bool) { return s.lo, s.hi, s.list == nil }

// List returns the explicit codes, nil for a range.
func (s Selection) List() []int32 { return s.list }

// MatchCategory reports whether an attribute value v is in category c: v
// equals c, or v continues c at a '/' boundary ("Petroleum" matches
// "Petroleum/Prices/Spot", not "PetroleumCoke"). A trailing '/' on c is
// ignored. snapinspect's --category and the server's category selector
// both use it, so they always agree.
func MatchCategory(v, c string) bool {
	c = strings.TrimSuffix(c, "/")
	return v == c || (strings.HasPrefix(v, c) && len(v) > len(c) && v[len(c)] == '/')
}
