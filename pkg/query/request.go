package query

import "math"

// SelectorKind says how a request picks its series.
type SelectorKind uint8

const (
	// ByIDs: the series listed in Selector.IDs (order and duplicates are
	// irrelevant; every id must exist).
	ByIDs SelectorKind = iota + 1
	// ByPrefix: every series whose id starts with Selector.Prefix; the
	// empty prefix is the whole dataset.
	ByPrefix
	// ByCategory: every series whose "category" attribute is
	// Selector.Category or lies below it (see MatchCategory).
	ByCategory
)

// Selector picks series. Output order is always ascending series id
// (bytewise), whatever the selector.
type Selector struct {
	Kind     SelectorKind
	IDs      []string
	Prefix   string
	Category string
}

// Range is an inclusive range of periods in date32 days. Open ends are
// math.MinInt32 / math.MaxInt32; AllPeriods is open at both.
type Range struct {
	From, To int32
}

// AllPeriods selects every period.
var AllPeriods = Range{From: math.MinInt32, To: math.MaxInt32}

// Covers reports whether r includes every period in [first, last]: then a
// series' rows need no search at all.
func (r Range) Covers(first, last int32) bool { return r.From <= first && r.To >= last }

// IsAll reports whether r is open at both ends.
func (r Range) IsAll() bool { return r == AllPeriods }

// Request is a query against one dataset.
type Request struct {
	Select Selector
	Range  Range

	// Columns are the output columns after series_id and period, in order;
	// nil means the default (value and the other data columns). A present
	// but empty list means none.
	Columns []string
	// Attributes adds every per-series attribute column not already named.
	Attributes bool
	// Latest keeps one row per series: its last row in Range whose value is
	// not null.
	Latest bool
	// Snapshot, when not 0, is the snapshot id the caller requires; a
	// Reader serving another one refuses with ErrStale.
	Snapshot uint64
	// Limit, when > 0, caps the rows returned (the first Limit rows in
	// output order).
	Limit int64
}

// Limits bound what one request may cost. Zero disables a limit. They
// apply to explicit id lists, whose dictionaries and pieces are built
// whole; prefix and category answers stream in bounded memory at any size.
type Limits struct {
	MaxSeries int   // series listed in one request
	MaxRows   int64 // rows in the answer to an id list
}
