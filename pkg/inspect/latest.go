package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// CategoryAttribute is the index attribute column --category matches.
const CategoryAttribute = query.CategoryAttribute

// LatestQuery selects series for Latest: either IDs, or every series
// (All), or those whose id starts with Prefix and/or whose category
// attribute matches Category (see query.MatchCategory).
type LatestQuery struct {
	IDs         []string
	All         bool
	Prefix      string
	HasPrefix   bool
	Category    string
	HasCategory bool
}

// LatestReport is the JSON document of `snapinspect latest --json`.
type LatestReport struct {
	Dataset    string         `json:"dataset"`
	SnapshotID uint64         `json:"snapshot_id"`
	Attributes []string       `json:"attributes"`
	Series     []LatestSeries `json:"series"`
}

// LatestSeries is one series' latest observation and bounds.
type LatestSeries struct {
	SeriesID string `json:"series_id"`
	// LatestPeriod and LatestValue are the last row whose value is not
	// null; both are null when every value of the series is null.
	LatestPeriod *string    `json:"latest_period"`
	LatestValue  Cell       `json:"latest_value"`
	FirstPeriod  string     `json:"first_period"`
	LastPeriod   string     `json:"last_period"`
	Rows         int64      `json:"rows"`
	Attributes   Attributes `json:"attributes"`
}

// Attributes are a series' attribute values, in index column order; in
// JSON an object keyed by column name.
type Attributes []NamedCell

// NamedCell is one attribute value.
type NamedCell struct {
	Name string
	Cell Cell
}

// MarshalJSON renders the attributes as an object in column order.
func (a Attributes) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, nc := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(nc.Name))
		b.WriteByte(':')
		v, _ := nc.Cell.MarshalJSON()
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Latest answers the query. Named ids that do not exist and filters that
// match nothing are snapshot.ErrNotFound errors.
func Latest(s *snapshot.Snapshot, q LatestQuery) (*LatestReport, error) {
	x := s.Index()
	fields, cols := x.Attributes()
	rep := &LatestReport{Dataset: s.Dataset.Name, SnapshotID: s.ID(), Attributes: []string{}, Series: []LatestSeries{}}
	for _, f := range fields {
		rep.Attributes = append(rep.Attributes, f.Name)
	}
	var codes []int
	switch {
	case len(q.IDs) > 0:
		if q.All || q.HasPrefix || q.HasCategory {
			return nil, fmt.Errorf("series ids cannot be combined with --all, --prefix or --category")
		}
		var err error
		if codes, err = LookupAll(s, q.IDs); err != nil {
			return nil, err
		}
	case q.All || q.HasPrefix || q.HasCategory:
		lo, hi := 0, x.Len()
		if q.HasPrefix {
			lo, hi = x.Prefix(q.Prefix)
		}
		match := func(int) bool { return true }
		if q.HasCategory {
			var err error
			if match, err = categoryMatcher(s, fields, cols, q.Category); err != nil {
				return nil, err
			}
		}
		for code := lo; code < hi; code++ {
			if match(code) {
				codes = append(codes, code)
			}
		}
		if len(codes) == 0 {
			var what []string
			if q.HasPrefix {
				what = append(what, "--prefix "+strconv.Quote(q.Prefix))
			}
			if q.HasCategory {
				what = append(what, "--category "+strconv.Quote(q.Category))
			}
			if len(what) == 0 {
				what = append(what, "--all (the snapshot is empty)")
			}
			return nil, notFound("no series match %s in snapshot %d of %s", strings.Join(what, " "), s.ID(), s.Dataset.Name)
		}
	default:
		return nil, fmt.Errorf("name series ids, or select with --prefix, --category or --all")
	}
	values := x.LatestValues()
	for _, code := range codes {
		e := x.Entry(code)
		ls := LatestSeries{
			SeriesID:    e.SeriesID,
			LatestValue: nullCell(),
			FirstPeriod: period.Format(e.FirstPeriod),
			LastPeriod:  period.Format(e.LastPeriod),
			Rows:        seriesRowCount(e),
			Attributes:  make(Attributes, len(fields)),
		}
		if p, ok := x.Latest(code); ok {
			ps := period.Format(p)
			ls.LatestPeriod = &ps
			ls.LatestValue = CellOf(values, code)
		}
		for i, f := range fields {
			ls.Attributes[i] = NamedCell{Name: f.Name, Cell: CellOf(cols[i], code)}
		}
		rep.Series = append(rep.Series, ls)
	}
	return rep, nil
}

// categoryMatcher returns a predicate over series codes for --category c:
// the read layer's rule (query.MatchCategory), so snapinspect and the
// server always select the same series.
func categoryMatcher(s *snapshot.Snapshot, fields []arrow.Field, cols []arrow.Array, c string) (func(int) bool, error) {
	for i, f := range fields {
		if f.Name == query.CategoryAttribute {
			return query.CategoryMatcher(cols[i], c)
		}
	}
	return nil, notFound("snapshot %d of %s has no %q attribute column, so --category cannot select (attributes: %s)",
		s.ID(), s.Dataset.Name, query.CategoryAttribute, attrNames(fields))
}

// WriteText renders the report as one aligned table, a row per series.
func (r *LatestReport) WriteText(w io.Writer) error {
	head := []string{"series_id", "latest_period", "latest_value", "first_period", "last_period", "rows"}
	t := newTable(append(head, r.Attributes...)...).alignRight(2, 5)
	for _, ls := range r.Series {
		lp, lv := "-", "-"
		if ls.LatestPeriod != nil {
			lp, lv = *ls.LatestPeriod, textOf(ls.LatestValue)
		}
		row := []string{ls.SeriesID, lp, lv, ls.FirstPeriod, ls.LastPeriod, Commas(ls.Rows)}
		for _, a := range ls.Attributes {
			row = append(row, textOf(a.Cell))
			if a.Cell.Numeric {
				t.right[len(row)-1] = true
			}
		}
		t.add(row...)
	}
	return t.write(w, "")
}

// WriteJSON renders the report as indented JSON.
func (r *LatestReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

var _ json.Marshaler = Attributes(nil)
