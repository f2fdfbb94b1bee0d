package sortwrite

import "fmt"

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
