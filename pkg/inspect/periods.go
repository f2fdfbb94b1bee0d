package inspect

import (
	"fmt"
	"math"

	"github.com/energyscope/servingsnap/pkg/period"
)

// Range is an inclusive range of period start dates (date32 days), as the
// --from and --to flags give it. The zero value is not open; use AllPeriods.
type Range struct {
	From, To         int32
	FromText, ToText string // as given, "" when open
}

// AllPeriods is the open range.
var AllPeriods = Range{From: math.MinInt32, To: math.MaxInt32}

// ParseRange reads --from and --to values ("" leaves that end open). Both
// accept every form period.Parse does. --from names the first period
// included and --to the last: rows whose period starts within [start of
// from, end of to] are selected, so "--to 2020" keeps all of 2020 and
// "--to 2020-03" all of March (a daily row on 2020-03-31 included).
func ParseRange(from, to string) (Range, error) {
	r := AllPeriods
	r.FromText, r.ToText = from, to
	if from != "" {
		d, err := period.Parse(from)
		if err != nil {
			return r, fmt.Errorf("--from: %w", err)
		}
		r.From = d
	}
	if to != "" {
		d, err := period.End(to)
		if err != nil {
			return r, fmt.Errorf("--to: %w", err)
		}
		r.To = d
	}
	if r.From > r.To {
		return r, fmt.Errorf("--from %s is after --to %s", from, to)
	}
	return r, nil
}

// FromDate is the first day included as YYYY-MM-DD, "" when open.
func (r Range) FromDate() string {
	if r.From == math.MinInt32 {
		return ""
	}
	return period.Format(r.From)
}

// ToDate is the last day included as YYYY-MM-DD, "" when open.
func (r Range) ToDate() string {
	if r.To == math.MaxInt32 {
		return ""
	}
	return period.Format(r.To)
}
