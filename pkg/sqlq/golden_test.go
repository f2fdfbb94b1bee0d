package sqlq

// Golden scripts of statements (STYLE.md §5): testdata/*.txt hold
// directives
//
//	parse | bind [params=a,b]
//	the statement (one or more lines)
//	----
//	expected output
//	<blank line or end of file>
//
// parse prints the canonical form, bind what the statement binds to; both
// print an error as "error: " and its message, the grammar summary that
// ends every syntax error shortened to "<supported>". go test -run
// TestGolden -rewrite writes the output into the scripts.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/datadriven"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
)

func TestGolden(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		datadriven.RunFile(t, path, func(d *datadriven.Directive) string { return runDirective(t, d) })
	})
}

func runDirective(t *testing.T, d *datadriven.Directive) string {
	var params []string
	for _, a := range d.Args {
		if a.Key != "params" {
			d.Fatalf(t, "unknown argument %q", a.Key)
		}
		params = a.Vals
	}
	st, err := Parse(d.Input)
	if err != nil {
		return errText(err)
	}
	switch d.Cmd {
	case "parse":
		roundTrip(t, st, params)
		return st.String()
	case "bind":
		q, err := st.Bind(params)
		if err != nil {
			return errText(err)
		}
		return queryText(q)
	}
	d.Fatalf(t, "unknown command")
	return ""
}

func errText(err error) string {
	if !errors.Is(err, query.ErrInvalid) {
		return "error (not ErrInvalid): " + err.Error()
	}
	return "error: " + strings.Replace(err.Error(), Supported, "<supported>", 1)
}

func queryText(q *Query) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table: %s", q.Table)
	if q.Schema != (Ident{}) {
		fmt.Fprintf(&b, " schema: %s", q.Schema)
	}
	if q.Catalog != (Ident{}) {
		fmt.Fprintf(&b, " catalog: %s", q.Catalog)
	}
	if q.Vintage != 0 {
		fmt.Fprintf(&b, " vintage: %d", q.Vintage)
	}
	r := q.Request
	switch {
	case len(q.Aggs) > 0:
		var as []string
		for _, a := range q.Aggs {
			as = append(as, fmt.Sprintf("%s as %q", a.Expr(), a.Name))
		}
		b.WriteString("\naggregates: " + strings.Join(as, ", "))
	case r.Attributes:
		b.WriteString("\ncolumns: * (with attributes)")
	default:
		var cs []string
		for _, c := range q.Columns {
			cs = append(cs, c.String())
		}
		b.WriteString("\ncolumns: " + strings.Join(cs, ", "))
	}
	switch r.Select.Kind {
	case query.ByIDs:
		fmt.Fprintf(&b, "\nseries: %q", r.Select.IDs)
	case query.ByPrefix:
		fmt.Fprintf(&b, "\nprefix: %q", r.Select.Prefix)
	case query.ByCategory:
		fmt.Fprintf(&b, "\ncategory: %q", r.Select.Category)
	}
	day := func(d int32) string {
		if d == math.MinInt32 || d == math.MaxInt32 {
			return "open"
		}
		return period.Format(d)
	}
	fmt.Fprintf(&b, "\nperiods: %s to %s", day(r.Range.From), day(r.Range.To))
	if r.Latest {
		b.WriteString("\nlatest")
	}
	if r.Limit > 0 {
		fmt.Fprintf(&b, "\nlimit: %d", r.Limit)
	}
	return b.String()
}
