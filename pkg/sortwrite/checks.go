package sortwrite

import (
	"fmt"
	"slices"
	"strings"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
)

// checkColumnNames refuses an input column, other than the series,
// period and value columns, whose name the snapshot already uses:
//   - series_id, period and value, the names every answer and the
//     portable copy give those three columns whatever the input called
//     them, compared ignoring case like any two snapshot columns (Unify);
//   - a column the data or index file holds for itself (series_code, or
//     row_offset, lookup_code and the index's other fixed, tier and
//     lookup columns, index.OwnNames);
//   - a name in servingsnap's own namespace, "servingsnap." (the flag
//     column of a live write's normalized rows, the metadata keys).
//
// Such a column would be written beside the file's own column of that
// name, and a reader that goes by name (pyarrow, the Python package,
// FORMAT.md's snippets) would read the wrong one or fail; snapverify
// reports the data file's repeat as corrupt. Whether an extra column
// lands in the data file or the index depends on whether it is constant
// per series, so every name is refused in both roles: a lake that builds
// today cannot fail tomorrow because a column became constant.
func checkColumnNames(u *Unified, opt Options) error {
	answer := []string{index.ColSeriesID, datafile.ColPeriod, datafile.ColValue}
	own := append([]string{datafile.ColSeriesCode}, index.OwnNames()...)
	for _, c := range u.Columns {
		if c.Name == opt.SeriesColumn || c.Name == opt.PeriodColumn || c.Name == opt.ValueColumn {
			continue
		}
		for _, a := range answer {
			if strings.EqualFold(c.Name, a) {
				return fmt.Errorf("column %q (in %s): every answer names a column %q (the input's %s, %s and %s columns become series_id, period and value), and a snapshot's columns must differ in more than case: rename the column in the lake, or choose it with --%s-column",
					c.Name, c.From, a, opt.SeriesColumn, opt.PeriodColumn, opt.ValueColumn, roleOf(a))
			}
		}
		if strings.HasPrefix(c.Name, reservedPrefix) {
			return fmt.Errorf("column %q (in %s): names beginning %q are servingsnap's own (a live write's %q flag, the files' metadata keys): rename the column in the lake",
				c.Name, c.From, reservedPrefix, reservedPrefix+"attributes_given")
		}
		if slices.Contains(own, c.Name) {
			return fmt.Errorf("column %q (in %s): the snapshot's files hold a column of their own by that name (docs/FORMAT.md §3, §4), which a reader going by name would confuse with it: rename the column in the lake",
				c.Name, c.From)
		}
	}
	return nil
}

// reservedPrefix begins the names servingsnap gives its own columns
// and metadata outside the two files' fixed columns.
const reservedPrefix = "servingsnap."

// roleOf is the --ROLE-column flag that chooses the input column an
// answer column a comes from.
func roleOf(a string) string {
	switch a {
	case index.ColSeriesID:
		return "series"
	case datafile.ColPeriod:
		return "period"
	}
	return "value"
}

// checkSeriesIDs refuses an empty series id, naming the first row that
// has one: it is almost always an export bug (a blank cell), reads as "no
// id" to most clients and exports, and sorts before every real id, so it
// is an input error like a null id. The scan runs only when some row has
// it: the column's dictionary says so in one lookup.
func (t *table) checkSeriesIDs() error {
	code, ok := t.series.dict.code("")
	if !ok {
		return nil
	}
	for r, c := range t.series.codes {
		if c == code {
			return fmt.Errorf("%s: column %q: series id is empty", t.location(int64(r)), t.series.col.Name)
		}
	}
	// The external sort keeps no per-row codes: the dictionary says an
	// empty id was read, not where.
	return fmt.Errorf("column %q: a series id is empty (in one of the %d input files)", t.series.col.Name, len(t.inputs))
}
