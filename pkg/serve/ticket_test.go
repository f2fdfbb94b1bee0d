package serve

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"github.com/energyscope/servingsnap/pkg/period"
)

func day(t testing.TB, s string) int32 {
	t.Helper()
	d, err := period.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseTicket(t *testing.T) {
	type want struct {
		series     []string
		prefix     *string
		category   *string
		from, to   string // "" = open
		columns    []string
		hasColumns bool
		attrs      bool
		latest     bool
	}
	str := func(s string) *string { return &s }
	ok := []struct {
		name, in string
		want     want
	}{
		{"series", `{"dataset":"PET","series":["A","B"]}`, want{series: []string{"A", "B"}}},
		{"prefix", `{"dataset":"PET","prefix":"PET."}`, want{prefix: str("PET.")}},
		{"empty prefix is all", `{"dataset":"PET","prefix":""}`, want{prefix: str("")}},
		{"category", `{"dataset":"PET","category":"Crude oil"}`, want{category: str("Crude oil")}},
		{"year range", `{"dataset":"PET","series":["A"],"start":"2019","end":"2020"}`, want{series: []string{"A"}, from: "2019-01-01", to: "2020-12-31"}},
		{"month end, leap", `{"dataset":"PET","series":["A"],"end":"2020-02"}`, want{series: []string{"A"}, to: "2020-02-29"}},
		{"quarter", `{"dataset":"PET","series":["A"],"start":"2019Q2","end":"2019-Q3"}`, want{series: []string{"A"}, from: "2019-04-01", to: "2019-09-30"}},
		{"week", `{"dataset":"PET","series":["A"],"start":"2020-W53","end":"2020-W53"}`, want{series: []string{"A"}, from: "2020-12-28", to: "2021-01-03"}},
		{"day", `{"dataset":"PET","series":["A"],"start":"20190315","end":"2019-03-15"}`, want{series: []string{"A"}, from: "2019-03-15", to: "2019-03-15"}},
		{"columns, attributes, latest", `{"dataset":"PET","series":["A"],"columns":["value"],"attributes":true,"latest":true}`,
			want{series: []string{"A"}, columns: []string{"value"}, hasColumns: true, attrs: true, latest: true}},
		{"empty columns", `{"dataset":"PET","series":["A"],"columns":[]}`, want{series: []string{"A"}, columns: []string{}, hasColumns: true}},
		{"whitespace and unicode ids", " {\n\"dataset\" : \"PET\", \"series\" : [\"GAS.Ü€漢字.M\"]}\n", want{series: []string{"GAS.Ü€漢字.M"}}},
		{"false flags", `{"dataset":"PET","prefix":"","latest":false,"attributes":false}`, want{prefix: str("")}},
		{"surrogate pair", `{"dataset":"PET","prefix":"\ud83d\ude00","latest":false}`, want{prefix: str("\U0001F600")}},
		{"escaped backslash before u", `{"dataset":"PET","prefix":"\\ud800"}`, want{prefix: str(`\ud800`)}},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ParseTicket([]byte(tc.in), 1<<20, 100)
			if err != nil {
				t.Fatalf("ParseTicket: %v", err)
			}
			w := tc.want
			if q.Dataset != "PET" {
				t.Errorf("dataset %q", q.Dataset)
			}
			if strings.Join(q.Series, "|") != strings.Join(w.series, "|") {
				t.Errorf("series %q, want %q", q.Series, w.series)
			}
			if q.HasPrefix != (w.prefix != nil) || (w.prefix != nil && q.Prefix != *w.prefix) {
				t.Errorf("prefix %v %q, want %v", q.HasPrefix, q.Prefix, w.prefix)
			}
			if q.HasCategory != (w.category != nil) || (w.category != nil && q.Category != *w.category) {
				t.Errorf("category %v %q, want %v", q.HasCategory, q.Category, w.category)
			}
			from, to := int32(math.MinInt32), int32(math.MaxInt32)
			if w.from != "" {
				from = day(t, w.from)
			}
			if w.to != "" {
				to = day(t, w.to)
			}
			if q.From != from || q.To != to {
				t.Errorf("range [%s, %s], want [%s, %s]", period.Format(q.From), period.Format(q.To), w.from, w.to)
			}
			if q.HasColumns != w.hasColumns || strings.Join(q.Columns, "|") != strings.Join(w.columns, "|") {
				t.Errorf("columns %v %q, want %v %q", q.HasColumns, q.Columns, w.hasColumns, w.columns)
			}
			if q.Attributes != w.attrs || q.Latest != w.latest {
				t.Errorf("attributes %v latest %v", q.Attributes, q.Latest)
			}
		})
	}

	bad := []struct {
		name, in string
		code     codes.Code
		msg      string // a substring the message must contain
	}{
		{"empty", ``, codes.InvalidArgument, "empty"},
		{"not JSON", `dataset=PET`, codes.InvalidArgument, "not JSON"},
		{"array", `["PET"]`, codes.InvalidArgument, "must be a JSON object, not an array"},
		{"string", `"PET"`, codes.InvalidArgument, "must be a JSON object, not a string"},
		{"truncated", `{"dataset":"PET","series":["A"`, codes.InvalidArgument, "not JSON"},
		{"trailing", `{"dataset":"PET","prefix":""} {}`, codes.InvalidArgument, "trailing data"},
		{"unknown field (typo)", `{"dataset":"PET","seires":["A"]}`, codes.InvalidArgument, `unknown field "seires"`},
		{"duplicate key", `{"dataset":"PET","series":["A"],"series":["B"]}`, codes.InvalidArgument, `"series" given twice`},
		{"null field", `{"dataset":"PET","series":null,"prefix":""}`, codes.InvalidArgument, `"series" is null`},
		{"null element", `{"dataset":"PET","series":["A",null]}`, codes.InvalidArgument, "element 1 is null"},
		{"lone high surrogate", `{"dataset":"PET","series":["A\ud800"]}`, codes.InvalidArgument, `lone surrogate \ud800 at byte 29`},
		{"lone low surrogate", `{"dataset":"PET","prefix":"\udc00x"}`, codes.InvalidArgument, `lone surrogate \udc00`},
		{"high then not low", `{"dataset":"PET","prefix":"\ud800\u0041"}`, codes.InvalidArgument, `lone surrogate \ud800`},
		{"surrogate in a key", `{"dataset":"PET","prefix":"","\ud800":1}`, codes.InvalidArgument, `lone surrogate`},
		{"number element", `{"dataset":"PET","series":["A",7]}`, codes.InvalidArgument, "element 1 must be a string, got number"},
		{"series not array", `{"dataset":"PET","series":"A"}`, codes.InvalidArgument, `"series" must be an array of strings, got string`},
		{"dataset number", `{"dataset":1,"prefix":""}`, codes.InvalidArgument, `"dataset" must be a string`},
		{"latest string", `{"dataset":"PET","prefix":"","latest":"yes"}`, codes.InvalidArgument, `"latest" must be true or false`},
		{"no dataset", `{"series":["A"]}`, codes.InvalidArgument, `missing field "dataset"`},
		{"dataset escapes root", `{"dataset":"../etc","prefix":""}`, codes.InvalidArgument, "not allowed"},
		{"dataset with slash", `{"dataset":"a/b","prefix":""}`, codes.InvalidArgument, "not allowed"},
		{"dataset dot", `{"dataset":".","prefix":""}`, codes.InvalidArgument, "not allowed"},
		{"dataset empty", `{"dataset":"","prefix":""}`, codes.InvalidArgument, "1-128 characters"},
		{"no selector", `{"dataset":"PET"}`, codes.InvalidArgument, "say which series"},
		{"two selectors", `{"dataset":"PET","series":["A"],"prefix":"A"}`, codes.InvalidArgument, "only one of"},
		{"empty series", `{"dataset":"PET","series":[]}`, codes.InvalidArgument, "is empty"},
		{"bad start", `{"dataset":"PET","prefix":"","start":"2019-13"}`, codes.InvalidArgument, "start: period \"2019-13\": month 13"},
		{"bad end", `{"dataset":"PET","prefix":"","end":"yesterday"}`, codes.InvalidArgument, "end: period"},
		{"empty start", `{"dataset":"PET","prefix":"","start":""}`, codes.InvalidArgument, "empty period"},
		{"inverted", `{"dataset":"PET","prefix":"","start":"2021","end":"2020"}`, codes.InvalidArgument, "is after end"},
		{"invalid utf8", "{\"dataset\":\"PET\",\"series\":[\"\xff\"]}", codes.InvalidArgument, "UTF-8"},
		{"too many series", `{"dataset":"PET","series":["A","B","C","D"]}`, codes.ResourceExhausted, "4 series requested, limit 3"},
		{"too big", `{"dataset":"PET","prefix":"` + strings.Repeat("x", 200) + `"}`, codes.ResourceExhausted, "limit 128"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTicket([]byte(tc.in), 128, 3)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("ParseTicket(%s) = %v, want an *Error", tc.in, err)
			}
			if e.Code != tc.code || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("ParseTicket(%s) = %v %q, want %v containing %q", tc.in, e.Code, e.Msg, tc.code, tc.msg)
			}
		})
	}
}

// FuzzParseTicket: ParseTicket never panics, an error is always a request
// error with a client-facing message (InvalidArgument, or ResourceExhausted
// for the limits), and an accepted ticket is consistent.
func FuzzParseTicket(f *testing.F) {
	for _, s := range []string{
		`{"dataset":"PET","series":["A","B"]}`,
		`{"dataset":"PET","prefix":"","start":"2019","end":"2020-Q2","latest":true}`,
		`{"dataset":"PET","category":"x","columns":["value"],"attributes":true}`,
		`{"dataset":"PET","series":["A"],"series":["B"]}`,
		`{"dataset":"../x","prefix":""}`,
		`{"dataset":"PET","series":[null]}`,
		`{"dataset":"PET","prefix":"","start":"2019-W53"}`,
		`[1,2]`, `{`, `{"a":}`, "\xff", `{"dataset":"PET","prefix":""}x`,
		`{"dataset":"PET","series":["\ud800"]}`, `{"dataset":"PET","prefix":"\ud83d\ude00"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFastAgrees(t, b)
		q, err := ParseTicket(b, 4096, 50)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not a request error", err, err)
			}
			if e.Code != codes.InvalidArgument && e.Code != codes.ResourceExhausted {
				t.Fatalf("code %v for %q", e.Code, b)
			}
			if !strings.HasPrefix(e.Msg, "ticket") || !utf8.ValidString(e.Msg) {
				t.Fatalf("message %q does not say it is about the ticket", e.Msg)
			}
			return
		}
		n := 0
		for _, has := range []bool{q.Series != nil, q.HasPrefix, q.HasCategory} {
			if has {
				n++
			}
		}
		if n != 1 || q.Dataset == "" || q.From > q.To || len(q.Series) > 50 {
			t.Fatalf("accepted inconsistent ticket %q: %+v", b, q)
		}
	})
}

// checkFastAgrees: where parseTicketFast accepts a ticket, encoding/json
// accepts it too and decodes the same query and fields.
func checkFastAgrees(t *testing.T, b []byte) bool {
	t.Helper()
	if !utf8.Valid(b) { // ParseTicket refuses it before either decoder
		return false
	}
	fq, fseen, ok := parseTicketFast(b)
	if !ok {
		return false
	}
	jq, jseen, err := parseTicketJSON(b)
	if err != nil {
		t.Fatalf("fast path accepted %q, encoding/json refused it: %v", b, err)
	}
	if !reflect.DeepEqual(fq, jq) || fseen != jseen {
		t.Fatalf("%q: fast path %+v (fields %b), encoding/json %+v (fields %b)", b, fq, fseen, jq, jseen)
	}
	return true
}

// TestParseTicketFast: the tickets the fast path takes decode as
// encoding/json decodes them, and those it must leave to encoding/json
// (escapes, mistakes, numbers it does not read) it leaves.
func TestParseTicketFast(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool
	}{
		{`{"dataset":"PET","series":["A","B"]}`, true},
		{" {\n\"dataset\" : \"PET\", \"series\" : [\"GAS.Ü€漢字.M\"] }\n", true},
		{`{"dataset":"PET","prefix":"","start":"2019","end":"2020-Q2","latest":true,"attributes":false}`, true},
		{`{"dataset":"PET","category":"x","columns":[],"limit":1000,"snapshot":42}`, true},
		{`{"dataset":"PET","series":["A"],"vintage":7,"shard":0,"columns":["value","note"]}`, true},
		{`{"dataset":"PET","prefix":"\\u0041"}`, false},            // an escape
		{`{"dataset":"PET","series":["A"],"series":["B"]}`, false}, // repeated
		{`{"dataset":"PET","series":["A"],"Limit":5}`, false},      // unknown key
		{`{"dataset":"PET","series":["A"],"limit":0}`, false},
		{`{"dataset":"PET","series":["A"],"limit":1e3}`, false},
		{`{"dataset":"PET","series":["A"],"limit":12.5}`, false},
		{`{"dataset":"PET","series":["A"],"limit":-1}`, false},
		{`{"dataset":"PET","series":["A"],"limit":01}`, false},
		{`{"dataset":"PET","series":["A"],"limit":1234567890123456789}`, false},
		{`{"dataset":"PET","series":["A"],"latest":truex}`, false},
		{`{"dataset":"PET","series":[null]}`, false},
		{`{"dataset":"PET","series":["A",]}`, false},
		{`{"dataset":"PET","series":["A"]}x`, false},
		{`{"dataset":"PET","series":["A"],}`, false},
		{`{"dataset":"PET","prefix":"a\tb"}`, false}, // a control character
		{`{}`, false},
		{`[1]`, false},
	} {
		if got := checkFastAgrees(t, []byte(tc.in)); got != tc.fast {
			t.Errorf("%s: fast path %v, want %v", tc.in, got, tc.fast)
		}
	}
}
