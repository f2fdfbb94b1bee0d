package sqlq

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
)

func day(t testing.TB, s string) int32 {
	d, err := period.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func end(t testing.TB, s string) int32 {
	d, err := period.End(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseBind(t *testing.T) {
	all := query.AllPeriods
	ids := func(s ...string) query.Selector { return query.Selector{Kind: query.ByIDs, IDs: s} }
	for _, tc := range []struct {
		sql     string
		params  []string
		dataset string
		want    query.Request
	}{
		{"SELECT * FROM EIA", nil, "EIA", query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: all, Attributes: true}},
		{"select value from \"PET-1\" where series_id = 'A'", nil, "PET-1", query.Request{Select: ids("A"), Range: all, Columns: []string{"value"}}},
		{"SELECT series_id, period, value FROM EIA WHERE series_id = ?", []string{"X.Y"}, "EIA", query.Request{Select: ids("X.Y"), Range: all, Columns: []string{"series_id", "period", "value"}}},
		{"SELECT * FROM EIA WHERE series_id IN ('A', 'B''s', ?)", []string{"C"}, "EIA", query.Request{Select: ids("A", "B's", "C"), Range: all, Attributes: true}},
		{"SELECT * FROM EIA WHERE series_id LIKE 'PET.%'", nil, "EIA", query.Request{Select: query.Selector{Kind: query.ByPrefix, Prefix: "PET."}, Range: all, Attributes: true}},
		{`SELECT * FROM EIA WHERE series_id LIKE 'A\_B%'`, nil, "EIA", query.Request{Select: query.Selector{Kind: query.ByPrefix, Prefix: "A_B"}, Range: all, Attributes: true}},
		{"SELECT * FROM EIA WHERE category = 'Crude' AND period >= '2019' AND period <= '2020-06'", nil, "EIA",
			query.Request{Select: query.Selector{Kind: query.ByCategory, Category: "Crude"}, Range: query.Range{From: day(t, "2019"), To: end(t, "2020-06")}, Attributes: true}},
		{"SELECT value FROM EIA WHERE period BETWEEN ? AND ? AND series_id = 'A' ORDER BY series_id, period LIMIT 10;", []string{"2019Q2", "2019Q3"}, "EIA",
			query.Request{Select: ids("A"), Range: query.Range{From: day(t, "2019Q2"), To: end(t, "2019Q3")}, Columns: []string{"value"}, Limit: 10}},
		{"SELECT value FROM EIA WHERE series_id = 'A' AND period > '2019' AND period < DATE '2021-01-01'", nil, "EIA",
			query.Request{Select: ids("A"), Range: query.Range{From: day(t, "2020"), To: day(t, "2020-12-31")}, Columns: []string{"value"}}},
		{"SELECT value FROM EIA WHERE series_id = 'A' AND period = '2020-W02' LIMIT ?", []string{"3"}, "EIA",
			query.Request{Select: ids("A"), Range: query.Range{From: day(t, "2020-W02"), To: end(t, "2020-W02")}, Columns: []string{"value"}, Limit: 3}},
		{"SELECT * FROM latest(EIA) WHERE series_id LIKE '%' -- comment", nil, "EIA", query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: all, Attributes: true, Latest: true}},
		{`SELECT * FROM "servingsnap"."main"."PET.X"`, nil, "PET.X", query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: all, Attributes: true}},
		{"SELECT * FROM EIA ORDER BY series_id", nil, "EIA", query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: all, Attributes: true}},
		{"SELECT value FROM EIA for version as of 41 WHERE series_id = 'A'", nil, "EIA", query.Request{Select: ids("A"), Range: all, Columns: []string{"value"}}},
		{"SELECT * FROM latest(EIA) FOR VERSION AS OF 7", nil, "EIA", query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: all, Attributes: true, Latest: true}},
	} {
		st, err := Parse(tc.sql)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		q, err := st.Bind(tc.params)
		if err != nil {
			t.Errorf("%s: bind: %v", tc.sql, err)
			continue
		}
		wantVintage := uint64(0)
		if i := strings.Index(strings.ToUpper(tc.sql), "AS OF "); i >= 0 {
			wantVintage = uint64(atoi(t, strings.Fields(tc.sql[i+6:])[0]))
		}
		if q.Vintage != wantVintage {
			t.Errorf("%s: vintage %d, want %d", tc.sql, q.Vintage, wantVintage)
		}
		if q.Table.Name != tc.dataset || !reflect.DeepEqual(q.Request, tc.want) {
			t.Errorf("%s:\n got %s %+v\nwant %s %+v", tc.sql, q.Table.Name, q.Request, tc.dataset, tc.want)
		}
		roundTrip(t, st, tc.params)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ sql, msg string }{
		{"", "expected SELECT at the end"},
		{"DELETE FROM EIA", "expected SELECT"},
		{"SELECT sum(value) FROM EIA", "only the aggregates count(*), count(DISTINCT series_id), min(period) and max(period)"},
		{"SELECT count(value) FROM EIA", "expected *, DISTINCT series_id, series_id or period in count()"},
		{"SELECT count(DISTINCT period) FROM EIA", "only count(DISTINCT series_id)"},
		{"SELECT min(value) FROM EIA", "only min(period)"},
		{"SELECT count(*), value FROM EIA", "columns and aggregates do not mix"},
		{"SELECT value, count(*) FROM EIA", "columns and aggregates do not mix"},
		{"SELECT count(*) FROM EIA ORDER BY series_id", "ORDER BY does not apply"},
		{"SELECT count(*) AS FROM EIA", "expected a column alias"},
		{"SELECT * FROM a.b.c.d", "expected the end of the statement"},
		{"SELECT * FROM EIA GROUP BY series_id", "expected the end of the statement"},
		{"SELECT * FROM EIA JOIN X", "expected the end of the statement"},
		{"SELECT * FROM EIA WHERE value > 3", "expected a condition on series_id, category or period"},
		{"SELECT * FROM EIA WHERE series_id = 'A' OR series_id = 'B'", "OR is not supported"},
		{"SELECT * FROM EIA WHERE series_id = 'A' AND category = 'B'", "only one series condition"},
		{"SELECT * FROM EIA WHERE series_id LIKE '%A'", "only a prefix pattern"},
		{"SELECT * FROM EIA WHERE series_id LIKE 'A'", "must end with a percent sign"},
		{"SELECT * FROM EIA WHERE period >= '2019-13'", "period \"2019-13\""},
		{"SELECT * FROM EIA WHERE period >= '2020' AND period < '2020'", "select no period"},
		{"SELECT * FROM EIA ORDER BY period", "only ORDER BY series_id, period"},
		{"SELECT * FROM EIA LIMIT 0", "LIMIT \"0\""},
		{"SELECT * FROM EIA WHERE series_id = 'A", "unterminated"},
		{"SELECT * FROM EIA WHERE series_id = \"A\"", "a quoted string or ?"},
		{"SELECT * FROM latest(EIA", "expected \")\""},
		{"SELECT * FROM EIA WHERE series_id = ?", "1 parameters, 0 bound"},
		{"SELECT * FROM EIA FOR VERSION AS OF 0", "a snapshot id (a positive integer)"},
		{"SELECT * FROM EIA FOR VERSION AS OF ?", "a snapshot id (a positive integer)"},
		{"SELECT * FROM EIA FOR VERSION 3", "expected AS"},
		{"SELECT * FROM EIA FOR SYSTEM_TIME AS OF '2024'", "expected VERSION"},
	} {
		st, err := Parse(tc.sql)
		if err == nil {
			_, err = st.Bind(nil)
		}
		if err == nil {
			t.Errorf("%q: no error", tc.sql)
			continue
		}
		if !errors.Is(err, query.ErrInvalid) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want ErrInvalid with %q", tc.sql, err, tc.msg)
		}
		if strings.Contains(err.Error(), "supported:") && !strings.HasSuffix(err.Error(), Supported) || strings.Contains(err.Error(), "%!") {
			t.Errorf("%q: garbled message %v", tc.sql, err)
		}
		if !strings.Contains(err.Error(), "supported: SELECT") && !strings.Contains(err.Error(), "parameters") && !strings.Contains(err.Error(), "period") {
			t.Errorf("%q: %v does not say what is supported", tc.sql, err)
		}
	}
}

func atoi(t testing.TB, s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// roundTrip checks that the canonical form parses to the same statement
// and binds to the same request.
func roundTrip(t testing.TB, st *Statement, params []string) {
	t.Helper()
	s := st.String()
	st2, err := Parse(s)
	if err != nil {
		t.Fatalf("canonical %q does not parse: %v", s, err)
	}
	if !reflect.DeepEqual(st, st2) {
		t.Fatalf("canonical %q parses to\n%+v, want\n%+v", s, st2, st)
	}
	q1, err1 := st.Bind(params)
	q2, err2 := st2.Bind(params)
	if (err1 == nil) != (err2 == nil) || err1 == nil && !reflect.DeepEqual(q1, q2) {
		t.Fatalf("%q binds differently from its canonical form: %v %v", s, err1, err2)
	}
	if err1 != nil {
		return
	}
	r := q1.Request
	if r.Range.From > r.Range.To || r.Limit < 0 || r.Select.Kind < query.ByIDs || r.Select.Kind > query.ByCategory ||
		r.Select.Kind == query.ByIDs && len(r.Select.IDs) == 0 || r.Latest != st.Latest || (r.Columns == nil) != st.Star ||
		r.Range.From != math.MinInt32 && len(st.Periods) == 0 {
		t.Fatalf("%q: inconsistent request %+v", s, r)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"SELECT * FROM EIA",
		"SELECT value FROM latest(EIA) WHERE series_id IN ('A', ?) AND period BETWEEN '2019' AND '2020Q1' ORDER BY series_id, period LIMIT 5",
		"select * from \"x\"\"y\" where category = 'C' and period >= DATE '2020-01-01'",
		"SELECT * FROM EIA WHERE series_id LIKE 'P\\%%'",
		"SELECT a, b FROM t WHERE period > ? AND period < ? LIMIT ?",
		"SELECT count(*), COUNT(distinct SERIES_ID) AS n, min(period), max(\"period\") FROM cat.\"Main\".eia WHERE series_id LIKE ?",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := Parse(s)
		if err != nil {
			if !errors.Is(err, query.ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", s, err)
			}
			return
		}
		params := make([]string, st.Params)
		for i := range params {
			params[i] = "2020"
		}
		roundTrip(t, st, params)
	})
}

// TestIdentResolve: a bare name matches exactly, else ignoring case when
// one name does; a quoted one matches exactly; two names equal ignoring
// case make a bare one ambiguous unless one equals it.
func TestIdentResolve(t *testing.T) {
	names := []string{"MIX", "Mix2", "mix2", "PET-1"}
	for _, tc := range []struct {
		id   Ident
		want string
		ok   bool
		err  string
	}{
		{Ident{Name: "MIX"}, "MIX", true, ""},
		{Ident{Name: "mix"}, "MIX", true, ""},
		{Ident{Name: "mix", Quoted: true}, "", false, ""},
		{Ident{Name: "pet-1"}, "PET-1", true, ""},
		{Ident{Name: "Mix2"}, "Mix2", true, ""},
		{Ident{Name: "mix2", Quoted: true}, "mix2", true, ""},
		{Ident{Name: "MIX2"}, "", false, `MIX2 is ambiguous: it matches Mix2, mix2 ignoring case; quote the one meant ("Mix2")`},
		{Ident{Name: "nope"}, "", false, ""},
	} {
		got, ok, err := tc.id.Resolve(names)
		if got != tc.want || ok != tc.ok || (err == nil) != (tc.err == "") || err != nil && (!strings.Contains(err.Error(), tc.err) || !errors.Is(err, query.ErrInvalid)) {
			t.Errorf("%+v: %q %v %v, want %q %v %q", tc.id, got, ok, err, tc.want, tc.ok, tc.err)
		}
	}
}
