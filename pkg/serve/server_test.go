package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// expected computes a query's answer from the lake the dataset was built
// from, without the builder, the snapshot reader or the server's planning
// code (oracle_test.go): scan every row, filter by series and period, take
// the last non-null value for latest.
type expRow struct {
	id     string
	period int32
	value  any
	extra  map[string]any
}

func expected(t *testing.T, dir string, q map[string]any) []expRow {
	t.Helper()
	from, to := int32(math.MinInt32), int32(math.MaxInt32)
	var err error
	if v, ok := q["start"]; ok {
		if from, _, err = oraclePeriod(v.(string)); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := q["end"]; ok {
		if _, to, err = oraclePeriod(v.(string)); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(r lakeRow) bool {
		switch {
		case q["series"] != nil:
			for _, want := range q["series"].([]string) {
				if want == r.id {
					return true
				}
			}
			return false
		case q["prefix"] != nil:
			return strings.HasPrefix(r.id, q["prefix"].(string))
		case q["category"] != nil:
			c, _ := r.cols["category"].(string)
			return inCategory(c, q["category"].(string))
		}
		return true
	}
	var out []expRow
	rows := readLake(t, lakeOf(t, dir))
	for i := 0; i < len(rows); {
		j := i
		for j < len(rows) && rows[j].id == rows[i].id {
			j++
		}
		if !keep(rows[i]) {
			i = j
			continue
		}
		var series []expRow
		for _, r := range rows[i:j] {
			if r.period >= from && r.period <= to {
				series = append(series, expRow{id: r.id, period: r.period, value: r.value, extra: r.cols})
			}
		}
		if q["latest"] == true {
			var last []expRow
			for k := len(series) - 1; k >= 0; k-- {
				if series[k].value != nil {
					last = series[k : k+1]
					break
				}
			}
			series = last
		}
		out = append(out, series...)
		i = j
	}
	return out
}

func checkRows(t *testing.T, what string, got *result, want []expRow, cols ...string) {
	t.Helper()
	if len(got.ids) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got.ids), len(want))
	}
	for i, w := range want {
		if got.ids[i] != w.id || got.periods[i] != w.period {
			t.Fatalf("%s: row %d is (%s, %d), want (%s, %d)", what, i, got.ids[i], got.periods[i], w.id, w.period)
		}
		if v := got.cols["value"]; v != nil && v[i] != w.value {
			t.Fatalf("%s: row %d value %v, want %v", what, i, v[i], w.value)
		}
		for _, c := range cols {
			if got.cols[c][i] != w.extra[c] {
				t.Fatalf("%s: row %d %s = %v, want %v", what, i, c, got.cols[c][i], w.extra[c])
			}
		}
	}
}

func TestDoGetMatchesSnapshot(t *testing.T) {
	srv := startServer(t, Config{})
	c := dial(t, srv)
	ctx := context.Background()
	syn := filepath.Join(root(t), "SYN")
	mix := filepath.Join(root(t), "MIX")

	s, err := snapshot.Open(syn, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := s.Index()
	some := []string{x.SeriesID(150), x.SeriesID(3), x.SeriesID(77), x.SeriesID(3)} // unsorted, a duplicate
	prefix := x.SeriesID(0)[:strings.IndexByte(x.SeriesID(0), '.')+1]
	s.Close()

	cases := []struct {
		name string
		dir  string
		q    map[string]any
		cols []string
	}{
		{"series", syn, map[string]any{"series": some}, nil},
		{"series range", syn, map[string]any{"series": some, "start": "2017-03", "end": "2019"}, nil},
		{"prefix", syn, map[string]any{"prefix": prefix}, nil},
		{"prefix range", syn, map[string]any{"prefix": prefix, "start": "2020Q2", "end": "2020Q3"}, nil},
		{"all", syn, map[string]any{"prefix": ""}, nil},
		{"all latest", syn, map[string]any{"prefix": "", "latest": true}, nil},
		{"latest before 2019", syn, map[string]any{"prefix": "", "latest": true, "end": "2018"}, nil},
		{"category attributes", syn, map[string]any{"category": "Coal/Consumption", "attributes": true}, []string{"units", "category", "name"}},
		{"mix all", mix, map[string]any{"prefix": "", "attributes": true}, []string{"note", "units", "category"}},
		{"mix latest", mix, map[string]any{"prefix": "", "latest": true, "attributes": true}, []string{"note", "units"}},
		{"mix latest in range", mix, map[string]any{"prefix": "B.", "latest": true, "start": "2018-03", "end": "2018-09"}, []string{"note"}},
		{"mix category", mix, map[string]any{"category": "Gas", "start": "2018-02"}, []string{"note"}},
		{"mix latest from the index", mix, map[string]any{"prefix": "", "latest": true, "columns": []string{"value"}, "attributes": true}, []string{"units", "category"}},
		{"mix latest from the index, listed", mix, map[string]any{"series": []string{"A.ONE", "B.NULLTAIL", "C.LONG", "B.ALLNULL"}, "latest": true, "columns": []string{"value"}}, nil},
		{"category and below", syn, map[string]any{"category": "Coal", "attributes": true}, []string{"category"}},
		{"category and below, trailing slash", syn, map[string]any{"category": "Coal/", "latest": true}, nil},
		{"mix prefix no match", mix, map[string]any{"prefix": "ZZZ"}, nil},
		{"mix range empty", mix, map[string]any{"series": []string{"A.TWO"}, "start": "2030"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := map[string]any{"dataset": filepath.Base(tc.dir)}
			for k, v := range tc.q {
				q[k] = v
			}
			got, err := get(ctx, c, ticket(q))
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, tc.name, got, expected(t, tc.dir, tc.q), tc.cols...)
			md := got.schema.Metadata()
			if v, _ := md.GetValue(MetaSnapshotID); v != "1" {
				t.Errorf("schema metadata %s = %q", MetaSnapshotID, v)
			}
			// GetFlightInfo agrees on the count and hands back the query as the ticket.
			info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: ticket(q)})
			if err != nil {
				t.Fatal(err)
			}
			if info.TotalRecords != int64(len(got.ids)) {
				t.Errorf("GetFlightInfo total_records %d, DoGet streamed %d", info.TotalRecords, len(got.ids))
			}
			if !bytes.Equal(info.Endpoint[0].Ticket.Ticket, ticket(q)) {
				t.Errorf("endpoint ticket %s", info.Endpoint[0].Ticket.Ticket)
			}
			sc, err := flight.DeserializeSchema(info.Schema, nil)
			if err != nil || !sc.Equal(got.schema) {
				t.Errorf("FlightInfo schema %v, stream schema %v (%v)", sc, got.schema, err)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	srv := startServer(t, Config{})
	c := dial(t, srv)
	ctx := context.Background()
	names := func(r *result) string {
		var n []string
		for _, f := range r.schema.Fields() {
			n = append(n, f.Name)
		}
		return strings.Join(n, ",")
	}
	for _, tc := range []struct {
		q    map[string]any
		want string
	}{
		{map[string]any{}, "series_id,period,value,note"},
		{map[string]any{"attributes": true}, "series_id,period,value,note,units,category"},
		{map[string]any{"columns": []string{}}, "series_id,period"},
		{map[string]any{"columns": []string{"note", "period", "units", "note"}}, "series_id,period,note,units"},
		{map[string]any{"columns": []string{"value"}, "attributes": true}, "series_id,period,value,units,category"},
	} {
		q := map[string]any{"dataset": "MIX", "series": []string{"C.NOUNITS"}}
		for k, v := range tc.q {
			q[k] = v
		}
		r, err := get(ctx, c, ticket(q))
		if err != nil {
			t.Fatal(err)
		}
		if got := names(r); got != tc.want {
			t.Errorf("%v: columns %s, want %s", tc.q, got, tc.want)
		}
		if len(r.ids) != 9 {
			t.Errorf("%v: %d rows", tc.q, len(r.ids))
		}
		if u, ok := r.cols["units"]; ok && u[0] != nil {
			t.Errorf("units of C.NOUNITS = %v, want null", u[0])
		}
	}
}

func TestListFlightsAndInfo(t *testing.T) {
	srv := startServer(t, Config{})
	c := dial(t, srv)
	ctx := context.Background()
	st, err := c.ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		info, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := info.FlightDescriptor.Path[0]
		got = append(got, name)
		s, err := snapshot.Open(filepath.Join(root(t), name), snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if info.TotalRecords != s.Manifest.Stats.Rows || !info.Ordered {
			t.Errorf("%s: total_records %d ordered %v, want %d", name, info.TotalRecords, info.Ordered, s.Manifest.Stats.Rows)
		}
		s.Close()
		// the endpoint's ticket streams the whole dataset
		r, err := get(ctx, c, info.Endpoint[0].Ticket.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(r.ids)) != info.TotalRecords {
			t.Errorf("%s: endpoint ticket streamed %d rows", name, len(r.ids))
		}
		pi, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{name}})
		if err != nil || pi.TotalRecords != info.TotalRecords {
			t.Errorf("GetFlightInfo(path %s) = %v, %v", name, pi, err)
		}
	}
	if strings.Join(got, ",") != "MIX,SYN" { // lake-SYN (no CURRENT) is skipped
		t.Errorf("ListFlights: %v", got)
	}
	// criteria is a name prefix
	st, _ = c.ListFlights(ctx, &flight.Criteria{Expression: []byte("SY")})
	n := 0
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
		n++
	}
	if n != 1 {
		t.Errorf("ListFlights(SY): %d flights", n)
	}

	res, err := c.DoAction(ctx, &flight.Action{Type: "status"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := res.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var stat Status
	if err := json.Unmarshal(r.Body, &stat); err != nil {
		t.Fatal(err)
	}
	if len(stat.Datasets) != 2 || stat.Datasets[1].Name != "SYN" || stat.Datasets[1].SnapshotID != 1 || stat.MappedBytes <= 0 {
		t.Errorf("status %+v", stat)
	}
}

func TestErrors(t *testing.T) {
	lim := Limits{MaxTicketBytes: 4096, MaxSeries: 5, MaxRows: 1000, BatchBytes: 1 << 20}
	srv := startServer(t, Config{Options: Options{Limits: lim}})
	c := dial(t, srv)
	ctx := context.Background()
	cases := []struct {
		name   string
		ticket string
		code   codes.Code
		msg    string
	}{
		{"unknown dataset", `{"dataset":"NOPE","prefix":""}`, codes.NotFound, `dataset "NOPE" not found`},
		{"dataset outside root", `{"dataset":"..","prefix":""}`, codes.InvalidArgument, "not allowed"},
		{"lake dir is not a dataset", `{"dataset":"lake-SYN","prefix":""}`, codes.NotFound, `dataset "lake-SYN" not found`},
		{"unknown series", `{"dataset":"MIX","series":["A.ONE","NOPE"]}`, codes.NotFound, `series "NOPE" not found in dataset "MIX"`},
		{"unknown series, several", `{"dataset":"MIX","series":["X","Y"]}`, codes.NotFound, `2 of 2 series not found`},
		{"unknown category", `{"dataset":"MIX","category":"Coal"}`, codes.NotFound, `category "Coal" not found in dataset "MIX" (snapshot 1); categories: "Crude", "Gas", "Power"`},
		{"unknown column", `{"dataset":"MIX","prefix":"","columns":["vaule"]}`, codes.InvalidArgument, `unknown column "vaule"`},
		{"malformed", `{"dataset":"MIX",`, codes.InvalidArgument, "ticket: not JSON"},
		{"typo", `{"dataset":"MIX","prefx":"A"}`, codes.InvalidArgument, `unknown field "prefx"`},
		{"bad period", `{"dataset":"MIX","prefix":"","end":"2020-02-30"}`, codes.InvalidArgument, "day 30 out of range"},
		{"ticket too big", `{"dataset":"MIX","prefix":"` + strings.Repeat("x", 5000) + `"}`, codes.ResourceExhausted, "limit 4096"},
		{"too many listed series", `{"dataset":"SYN","series":["a","b","c","d","e","f"]}`, codes.ResourceExhausted, "6 series requested, limit 5"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, how := range []string{"DoGet", "GetFlightInfo"} {
				var err error
				if how == "DoGet" {
					_, err = get(ctx, c, []byte(tc.ticket))
				} else {
					_, err = c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(tc.ticket)})
				}
				st := status.Convert(err)
				if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
					t.Errorf("%s: %v %q, want %v containing %q", how, st.Code(), st.Message(), tc.code, tc.msg)
				}
			}
		})
	}
	// The limits bound explicit id lists only: a prefix or category answer
	// streams in bounded memory whatever it matches.
	if r, err := get(ctx, c, []byte(`{"dataset":"SYN","prefix":""}`)); err != nil || len(slices.Compact(slices.Clone(r.ids))) != 200 {
		t.Errorf("whole dataset past max-series: %v", err)
	}
	// rows limit: MIX has 77 rows; a server allowing 50 refuses a list of
	// every series but streams the same rows for the whole dataset.
	srv2 := startServer(t, Config{Options: Options{Limits: Limits{MaxRows: 50}}})
	c2 := dial(t, srv2)
	all := `{"dataset":"MIX","series":["A.ONE","A.TWO","B.NULLTAIL","B.ALLNULL","C.NOUNITS","C.LONG"]}`
	_, err := get(ctx, c2, []byte(all))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "matches 77 rows") {
		t.Errorf("rows limit: %v", err)
	}
	if r, err := get(ctx, c2, []byte(`{"dataset":"MIX","prefix":""}`)); err != nil || len(r.ids) != 77 {
		t.Errorf("whole dataset past max-rows: %v", err)
	}
	// path descriptors
	for _, d := range []*flight.FlightDescriptor{
		{Type: flight.DescriptorPATH, Path: []string{"NOPE"}},
		{Type: flight.DescriptorPATH, Path: []string{"MIX", "x"}},
		{Type: flight.DescriptorPATH, Path: []string{"../MIX"}},
	} {
		_, err := c.GetFlightInfo(ctx, d)
		if code := status.Code(err); code != codes.NotFound && code != codes.InvalidArgument {
			t.Errorf("GetFlightInfo(%v): %v", d.Path, err)
		}
	}
	res, _ := c.DoAction(ctx, &flight.Action{Type: "no-such-action"})
	if _, err := res.Recv(); status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown action: %v", err)
	}
}

func TestBatching(t *testing.T) {
	// A tiny budget: every SYN series (≈150 rows × 16 B) is split, and the
	// series_id dictionary goes out in several deltas.
	srv := startServer(t, Config{Options: Options{Limits: Limits{BatchBytes: 700}}})
	c := dial(t, srv)
	ctx := context.Background()
	syn := filepath.Join(root(t), "SYN")

	q := map[string]any{"dataset": "SYN", "prefix": ""}
	r, err := get(ctx, c, ticket(q))
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, "small budget", r, expected(t, syn, map[string]any{"prefix": ""}))
	if r.batches < len(r.ids)/50 {
		t.Errorf("%d rows in %d batches: not split", len(r.ids), r.batches)
	}

	// Default budget: latest over 200 series is one coalesced batch; a
	// period range over many series is coalesced too.
	srv = startServer(t, Config{})
	c = dial(t, srv)
	for _, q := range []map[string]any{
		{"prefix": "", "latest": true},
		{"prefix": "", "start": "2020", "end": "2020"},
		{"prefix": ""},
	} {
		qq := map[string]any{"dataset": "SYN"}
		for k, v := range q {
			qq[k] = v
		}
		r, err := get(ctx, c, ticket(qq))
		if err != nil {
			t.Fatal(err)
		}
		checkRows(t, "coalesced", r, expected(t, syn, q))
		// SYN has ≤ 5000-row data batches: the whole dataset needs one
		// response batch per data batch at most; latest needs one.
		s, _ := snapshot.Open(syn, snapshot.Options{})
		nb := s.NumBatches()
		s.Close()
		if r.batches > nb {
			t.Errorf("%v: %d response batches for %d data batches", q, r.batches, nb)
		}
	}
}

func TestAuth(t *testing.T) {
	const tok = "s3cret-token-0123456789"
	dir := t.TempDir()
	tf := filepath.Join(dir, "tokens")
	os.WriteFile(tf, []byte("# the test token\n\n  "+tok+"  \nanother-token-abcdefgh\n"), 0o600)
	toks, err := ReadTokenFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, Config{Tokens: toks})
	c := dial(t, srv)
	ctx := context.Background()
	q := []byte(`{"dataset":"MIX","series":["A.TWO"]}`)

	if _, err := get(ctx, c, q); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	bad := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope")
	if _, err := get(bad, c, q); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := c.GetFlightInfo(bad, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"MIX"}}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token, unary: %v", err)
	}
	good := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	if r, err := get(good, c, q); err != nil || len(r.ids) != 12 {
		t.Fatalf("bearer: %v", err)
	}
	// Basic handshake: the password is the token; the answer is a bearer.
	if _, err := c.AuthenticateBasicToken(ctx, "anyone", "wrong"); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("basic, wrong password: %v", err)
	}
	hctx, err := c.AuthenticateBasicToken(ctx, "anyone", "another-token-abcdefgh")
	if err != nil {
		t.Fatalf("basic handshake: %v", err)
	}
	if r, err := get(hctx, c, q); err != nil || len(r.ids) != 12 {
		t.Fatalf("after handshake: %v", err)
	}
	// Basic credentials on a call other than the handshake are refused.
	basic := metadata.AppendToOutgoingContext(ctx, "authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+tok)))
	if _, err := get(basic, c, q); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("basic on DoGet: %v", err)
	}

	// token file rules
	for _, body := range []string{"", "# only a comment\n", "short\n", "has a space in it here\n"} {
		os.WriteFile(tf, []byte(body), 0o600)
		if _, err := ReadTokenFile(tf); err == nil {
			t.Errorf("token file %q accepted", body)
		}
	}
	ts, _ := NewTokens("abc")
	if !ts.Valid("abc") || ts.Valid("abd") || ts.Valid("") || ts.Valid("abcd") {
		t.Error("Tokens.Valid")
	}
}

func TestMetricsAndHealth(t *testing.T) {
	srv := startServer(t, Config{HTTPAddr: "127.0.0.1:0"})
	c := dial(t, srv)
	if _, err := get(context.Background(), c, []byte(`{"dataset":"MIX","series":["A.TWO"]}`)); err != nil {
		t.Fatal(err)
	}
	get(context.Background(), c, []byte(`{"dataset":"MIX","series":["NOPE"]}`))
	base := "http://" + srv.HTTPAddr().String()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("healthz %d %s", resp.StatusCode, body)
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`servingsnap_requests_total{code="OK",method="DoGet"} 1`,
		`servingsnap_requests_total{code="NotFound",method="DoGet"} 1`,
		`servingsnap_rows_sent_total{dataset="MIX"} 12`,
		`servingsnap_snapshot_id{dataset="SYN"} 1`,
		`servingsnap_request_duration_seconds_bucket{method="DoGet",le=`,
		`servingsnap_bytes_sent_total{dataset="MIX"}`,
		`servingsnap_mapped_bytes{dataset="SYN"}`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestGracefulShutdown: a stream running when the server is told to stop
// runs to completion; new calls are refused.
func TestGracefulShutdown(t *testing.T) {
	srv, err := New(Config{Root: root(t), Addr: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second, Options: Options{Limits: Limits{BatchBytes: 512}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	c := dial(t, srv)
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(`{"dataset":"SYN","prefix":""}`)})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	rows := int64(0)
	if !rd.Next() {
		t.Fatal(rd.Err())
	}
	rows += rd.RecordBatch().NumRows()
	cancel() // like SIGTERM
	time.Sleep(50 * time.Millisecond)
	for rd.Next() {
		rows += rd.RecordBatch().NumRows()
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("stream ended with %v after %d rows", err, rows)
	}
	rd.Release()
	s, _ := snapshot.Open(filepath.Join(root(t), "SYN"), snapshot.Options{})
	want := s.Manifest.Stats.Rows
	s.Close()
	if rows != want {
		t.Fatalf("streamed %d rows, want %d", rows, want)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := get(context.Background(), c, []byte(`{"dataset":"MIX","prefix":""}`)); status.Code(err) != codes.Unavailable {
		t.Errorf("call after shutdown: %v", err)
	}
}

// TestShutdownDeadline: a stream whose client stops reading is ended when
// the grace period is over, and Serve returns.
func TestShutdownDeadline(t *testing.T) {
	srv, err := New(Config{Root: root(t), Addr: "127.0.0.1:0", ShutdownTimeout: 200 * time.Millisecond, Options: Options{Limits: Limits{BatchBytes: 256}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	c := dial(t, srv, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	stream, err := c.DoGet(context.Background(), &flight.Ticket{Ticket: []byte(`{"dataset":"SYN","prefix":""}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the stream is running; now stop reading
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the grace period")
	}
}

// TestBrokenDatasetStaysInside: a dataset whose snapshot cannot be opened
// at start-up does not keep the server down (invariant 11): the others
// serve, its requests are Unavailable naming why, status shows it failing,
// and a good snapshot published later is served.
func TestBrokenDatasetStaysInside(t *testing.T) {
	dir := t.TempDir()
	lake, ds := testsnap.Sample(t, dir, "BAD", 5, 1, nil)
	testsnap.Sample(t, dir, "GOOD", 5, 2, nil)
	// truncate the index: the snapshot no longer validates
	p := filepath.Join(ds, "snapshots", "000001", "index.arrow")
	os.Chmod(p, 0o644) // published files are 0444
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	svc, err := Open(dir, Options{Limits: DefaultLimits})
	if err != nil {
		t.Fatalf("a broken dataset kept the server from opening: %v", err)
	}
	defer svc.Close()
	if _, err := svc.acquire("BAD"); status.Code(toStatus(err)) != codes.Unavailable || !strings.Contains(err.Error(), "could not be opened") {
		t.Fatalf("a request of the broken dataset: %v, want Unavailable naming why", err)
	}
	if v, err := svc.acquire("GOOD"); err != nil {
		t.Fatalf("the good dataset: %v", err)
	} else {
		v.Release()
	}
	var bad *DatasetStatus
	st := svc.Status()
	for i := range st.Datasets {
		if st.Datasets[i].Name == "BAD" {
			bad = &st.Datasets[i]
		}
	}
	if bad == nil || !bad.Failing || !strings.Contains(bad.FailingReason, "index") {
		t.Fatalf("status of the broken dataset: %+v", bad)
	}
	// A good snapshot published: the next reload serves it.
	testsnap.Build(t, lake, ds, nil)
	res, err := svc.Reload("BAD")
	if err != nil || len(res) != 1 || res[0].Result != ReloadSwapped {
		t.Fatalf("reload after a good publish: %+v %v", res, err)
	}
	v, err := svc.acquire("BAD")
	if err != nil {
		t.Fatalf("the repaired dataset: %v", err)
	}
	v.Release()
	if _, err := Open(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Fatal("Open of a missing root succeeded")
	}
}

// inCategory is the oracle's category rule, written apart from the
// server's: the value is the category or continues it after a '/'.
func inCategory(v, cat string) bool {
	cat = strings.TrimSuffix(cat, "/")
	return v == cat || strings.HasPrefix(v, cat+"/")
}
