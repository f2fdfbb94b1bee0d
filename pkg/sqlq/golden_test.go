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
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the golden scripts under testdata/")

func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts under testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runGolden(t, f) })
	}
}

func runGolden(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			out.WriteString(l + "\n")
			i++
			continue
		}
		pos := fmt.Sprintf("%s:%d", path, i+1)
		cmd := strings.Fields(l)
		out.WriteString(l + "\n")
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			input = append(input, lines[i])
			out.WriteString(lines[i] + "\n")
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s: no ---- after the directive", pos)
		}
		out.WriteString("----\n")
		i++
		var want []string
		for i < len(lines) && lines[i] != "" {
			want = append(want, lines[i])
			i++
		}
		got := runDirective(t, pos, cmd, strings.Join(input, "\n"))
		out.WriteString(got + "\n")
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", pos, l, got, strings.Join(want, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runDirective(t *testing.T, pos string, cmd []string, sql string) string {
	var params []string
	for _, a := range cmd[1:] {
		k, v, _ := strings.Cut(a, "=")
		if k != "params" {
			t.Fatalf("%s: unknown argument %q", pos, a)
		}
		params = strings.Split(v, ",")
	}
	st, err := Parse(sql)
	if err != nil {
		return errText(err)
	}
	switch cmd[0] {
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
	t.Fatalf("%s: unknown command %q", pos, cmd[0])
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
