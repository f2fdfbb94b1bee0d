package serve

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/period"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func dialSQL(t testing.TB, addr string) *flightsql.Client {
	t.Helper()
	c, err := flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sqlGet runs the endpoint of info and decodes it like get.
func sqlGet(t testing.TB, ctx context.Context, c *flightsql.Client, info *flight.FlightInfo) *result {
	t.Helper()
	if len(info.Endpoint) != 1 {
		t.Fatalf("%d endpoints", len(info.Endpoint))
	}
	r, err := get(ctx, c.Client, info.Endpoint[0].Ticket.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if info.TotalRecords != int64(len(r.ids)) {
		t.Errorf("FlightInfo says %d rows, the stream has %d", info.TotalRecords, len(r.ids))
	}
	return r
}

func sameAnswer(t *testing.T, what string, got, want *result) {
	t.Helper()
	if !reflect.DeepEqual(got.cols, want.cols) || len(got.ids) == 0 {
		t.Errorf("%s: SQL answer (%d rows) differs from the ticket's (%d rows)\n got %v\nwant %v", what, len(got.ids), len(want.ids), got.cols, want.cols)
	}
}

func TestFlightSQLStatements(t *testing.T) {
	srv := startServer(t, Config{})
	c := dialSQL(t, srv.FlightAddr().String())
	plain := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		sql    string
		ticket map[string]any
	}{
		{"SELECT value FROM MIX WHERE series_id = 'A.TWO' AND period >= '2018-06'", map[string]any{"dataset": "MIX", "series": []string{"A.TWO"}, "start": "2018-06", "columns": []string{"value"}}},
		{"SELECT * FROM MIX WHERE series_id IN ('C.LONG', 'A.ONE') AND period BETWEEN '2018Q2' AND '2019'", map[string]any{"dataset": "MIX", "series": []string{"A.ONE", "C.LONG"}, "start": "2018Q2", "end": "2019", "attributes": true}},
		{"select value, note from MIX where series_id like 'B.%' order by series_id, period limit 9", map[string]any{"dataset": "MIX", "prefix": "B.", "columns": []string{"value", "note"}, "limit": 9}},
		{"SELECT value FROM MIX WHERE category = 'Gas' AND period <= '2018-03'", map[string]any{"dataset": "MIX", "category": "Gas", "end": "2018-03", "columns": []string{"value"}}},
		{"SELECT * FROM latest(MIX)", map[string]any{"dataset": "MIX", "prefix": "", "latest": true, "attributes": true}},
		{"SELECT * FROM SYN", map[string]any{"dataset": "SYN", "prefix": "", "attributes": true}},
	} {
		info, err := c.Execute(ctx, tc.sql)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		got := sqlGet(t, ctx, c, info)
		want, err := get(ctx, plain, ticket(tc.ticket))
		if err != nil {
			t.Fatal(err)
		}
		sameAnswer(t, tc.sql, got, want)
	}
}

func TestFlightSQLPrepared(t *testing.T) {
	srv := startServer(t, Config{})
	c := dialSQL(t, srv.FlightAddr().String())
	plain := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps, err := c.Prepare(ctx, "SELECT value FROM MIX WHERE series_id = ? AND period >= ?")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close(ctx)
	if n := ps.ParameterSchema().NumFields(); n != 2 {
		t.Fatalf("parameter schema has %d fields", n)
	}
	mem := memory.NewGoAllocator()
	for _, id := range []string{"A.TWO", "C.LONG"} {
		sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.FixedWidthTypes.Date32}}, nil)
		b := array.NewRecordBuilder(mem, sc)
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.Date32Builder).Append(arrow.Date32FromTime(time.Date(2018, 5, 1, 0, 0, 0, 0, time.UTC)))
		rec := b.NewRecordBatch()
		b.Release()
		ps.SetParameters(rec)
		info, err := ps.Execute(ctx)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		got := sqlGet(t, ctx, c, info)
		want, err := get(ctx, plain, ticket(map[string]any{"dataset": "MIX", "series": []string{id}, "start": "2018-05-01", "columns": []string{"value"}}))
		if err != nil {
			t.Fatal(err)
		}
		sameAnswer(t, id, got, want)
	}
}

func TestFlightSQLErrors(t *testing.T) {
	srv := startServer(t, Config{})
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		sql  string
		code codes.Code
		msg  string
	}{
		{"SELECT sum(value) FROM MIX", codes.InvalidArgument, "supported: SELECT"},
		{"SELECT count(*) FROM MIX GROUP BY series_id", codes.InvalidArgument, "agg: count(*) | count(DISTINCT series_id) | min(period) | max(period)"},
		{"SELECT * FROM other.main.MIX", codes.NotFound, `catalog "other" not found (this server has one catalog, "servingsnap", with one schema, "main")`},
		{"SELECT * FROM servingsnap.public.MIX", codes.NotFound, `schema "public" not found in catalog "servingsnap"`},
		{"SELECT * FROM public.MIX", codes.NotFound, `schema "public" not found`},
		{`SELECT * FROM "Servingsnap".main.MIX`, codes.NotFound, `catalog "Servingsnap" not found`},
		{`SELECT * FROM "mix"`, codes.NotFound, `dataset "mix" not found (serving: MIX, SYN)`},
		{`SELECT "Value" FROM MIX`, codes.InvalidArgument, `unknown column "Value"`},
		{"SELECT count(*) FROM other.main.MIX", codes.NotFound, `catalog "other"`},
		{"SELECT count(*) FROM MIX WHERE series_id = 'X.NONE'", codes.NotFound, "X.NONE"},
		{"SELECT * FROM MIX WHERE value > 1", codes.InvalidArgument, "supported: SELECT"},
		{"SELECT nope FROM MIX", codes.InvalidArgument, `unknown column "nope"`},
		{"SELECT * FROM NOPE", codes.NotFound, "NOPE"},
		{"SELECT * FROM MIX WHERE series_id = 'X.NONE'", codes.NotFound, "X.NONE"},
		{"SELECT * FROM MIX WHERE series_id = ?", codes.InvalidArgument, "prepared statement"},
	} {
		_, err := c.Execute(ctx, tc.sql)
		st, _ := status.FromError(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) || strings.HasPrefix(st.Message(), "ticket:") || strings.Contains(st.Message(), "%!") {
			t.Errorf("%s: %v, want %v with %q", tc.sql, err, tc.code, tc.msg)
		}
	}
}

func TestFlightSQLCatalog(t *testing.T) {
	srv := startServer(t, Config{})
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(info *flight.FlightInfo, err error) arrow.RecordBatch {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		rd, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Release()
		if !rd.Next() {
			t.Fatalf("no batch: %v", rd.Err())
		}
		rec := rd.RecordBatch()
		rec.Retain()
		return rec
	}
	cats := read(c.GetCatalogs(ctx))
	defer cats.Release()
	if cats.NumRows() != 1 || cats.Column(0).ValueStr(0) != sqlCatalog {
		t.Errorf("catalogs: %v", cats)
	}
	tabs := read(c.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true}))
	defer tabs.Release()
	if tabs.NumRows() != 2 || tabs.Column(2).ValueStr(0) != "MIX" || tabs.Column(2).ValueStr(1) != "SYN" {
		t.Fatalf("tables: %v", tabs)
	}
	sc, err := flight.DeserializeSchema(tabs.Column(4).(*array.Binary).Value(0), memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range sc.Fields() {
		names = append(names, f.Name)
	}
	if got := strings.Join(names, ","); got != "series_id,period,value,note,units,category" {
		t.Errorf("MIX table schema: %s", got)
	}
	types := read(c.GetTableTypes(ctx))
	defer types.Release()
	if types.NumRows() != 1 {
		t.Errorf("table types: %v", types)
	}
	info := read(c.GetSqlInfo(ctx, []flightsql.SqlInfo{flightsql.SqlInfoFlightSqlServerName}))
	defer info.Release()
	if info.NumRows() != 1 {
		t.Errorf("sql info: %v", info)
	}
	// The plain surface is unchanged on the same port.
	if _, err := get(ctx, c.Client, ticket(map[string]any{"dataset": "MIX", "series": []string{"A.ONE"}})); err != nil {
		t.Errorf("plain ticket on the SQL port: %v", err)
	}
}

// BenchmarkSQLOneSeries: one 150-row series per query, in process on
// loopback, sequentially: the plain ticket (DoGet), the ticket as a
// command (GetFlightInfo + DoGet), a Flight SQL statement (GetFlightInfo +
// DoGet, as every Flight SQL client runs one) and a prepared statement
// with the id bound (DoPut + GetFlightInfo + DoGet, as ADBC runs a bound
// parameter). Reports latency percentiles; compare the p50s.
func BenchmarkSQLOneSeries(b *testing.B) {
	r := benchRoot(b, 10_000, 150)
	srv := startServer(b, Config{Root: r})
	plain := dial(b, srv)
	c := &flightsql.Client{Client: plain} // one connection for every variant
	ids := testlake.UniformIDs(10_000)
	ctx := context.Background()
	rows := func(info *flight.FlightInfo, err error) (int64, error) {
		if err != nil {
			return 0, err
		}
		return doGetRows(ctx, plain, info.Endpoint[0].Ticket.Ticket)
	}
	ps, err := c.Prepare(ctx, "SELECT value FROM B WHERE series_id = ?")
	if err != nil {
		b.Fatal(err)
	}
	defer ps.Close(ctx)
	mem := memory.NewGoAllocator()
	psc := arrow.NewSchema([]arrow.Field{{Name: "p1", Type: arrow.BinaryTypes.String}}, nil)
	for _, tc := range []struct {
		name string
		run  func(id string) (int64, error)
	}{
		{"ticket", func(id string) (int64, error) {
			return doGetRows(ctx, plain, []byte(`{"dataset":"B","series":["`+id+`"]}`))
		}},
		{"ticket-info", func(id string) (int64, error) {
			return rows(plain.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"dataset":"B","series":["` + id + `"]}`)}))
		}},
		{"sql", func(id string) (int64, error) {
			return rows(c.Execute(ctx, "SELECT value FROM B WHERE series_id = '"+id+"'"))
		}},
		{"sql-doget", func(id string) (int64, error) { // a statement ticket made by the client: one round trip
			tk, err := flightsql.CreateStatementQueryTicket([]byte(`{"sql":"SELECT value FROM B WHERE series_id = '` + id + `'"}`))
			if err != nil {
				return 0, err
			}
			return doGetRows(ctx, plain, tk)
		}},
		{"sql-prepared", func(id string) (int64, error) {
			bld := array.NewRecordBuilder(mem, psc)
			bld.Field(0).(*array.StringBuilder).Append(id)
			rec := bld.NewRecordBatch()
			bld.Release()
			defer rec.Release()
			ps.SetParameters(rec)
			return rows(ps.Execute(ctx))
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < 200; i++ { // warm up
				tc.run(ids[i])
			}
			lat := make([]time.Duration, 0, 1<<16)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				n, err := tc.run(ids[i%len(ids)])
				lat = append(lat, time.Since(t0))
				if err != nil || n != 150 {
					b.Fatalf("%d rows, %v", n, err)
				}
				i++
			}
			percentiles(b, lat)
		})
	}
}

// TestSQLDispatch: JSON tickets and commands never look like Flight SQL
// commands, and Flight SQL's do.
func TestSQLDispatch(t *testing.T) {
	for _, b := range [][]byte{
		ticket(map[string]any{"dataset": "MIX", "prefix": ""}), []byte(" {}"), {}, []byte("\n\x05hello"),
		[]byte("\n+type.googleapis.com/arrow.flight.protocol.sq"), // truncated
	} {
		if isSQLCommand(b) {
			t.Errorf("%q taken for a Flight SQL command", b)
		}
	}
	tk, err := flightsql.CreateStatementQueryTicket([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if !isSQLCommand(tk) {
		t.Errorf("a statement ticket is not taken for a Flight SQL command")
	}
}

// TestFlightSQLReleasesEverything: statements, prepared statements and
// catalog answers allocate from the service's allocator and release it
// all.
func TestFlightSQLReleasesEverything(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	lim := DefaultLimits
	lim.BatchBytes = 2048
	srv := startServer(t, Config{Options: Options{Allocator: mem, Limits: lim}})
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, sql := range []string{"SELECT * FROM SYN", "SELECT * FROM latest(MIX)", "SELECT value, note FROM MIX WHERE category = 'Gas' LIMIT 5"} {
		info, err := c.Execute(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		sqlGet(t, ctx, c, info)
	}
	info, err := c.Execute(ctx, "SELECT count(*), min(period), max(period) FROM MIX WHERE series_id LIKE 'A.%'")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(ctx, c.Client, info.Endpoint[0].Ticket.Ticket); err != nil {
		t.Fatal(err)
	}
	tabs, err := c.GetTables(ctx, &flightsql.GetTablesOpts{IncludeSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(ctx, c.Client, tabs.Endpoint[0].Ticket.Ticket); err != nil {
		t.Fatal(err)
	}
	mem.AssertSize(t, 0)
}

// TestFlightSQLNeedsTheToken: the SQL surface is behind the same auth.
func TestFlightSQLNeedsTheToken(t *testing.T) {
	toks, err := NewTokens("sql-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, Config{Tokens: toks})
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Execute(ctx, "SELECT * FROM MIX"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("statement without a token: %v, want Unauthenticated", err)
	}
	if _, err := c.GetTables(ctx, &flightsql.GetTablesOpts{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("GetTables without a token: %v, want Unauthenticated", err)
	}
}

// TestFlightSQLNames: bare names (tables, columns, keywords, qualifiers)
// match in any case, quoted ones exactly; qualifiers naming the catalog
// and schema GetCatalogs and GetDbSchemas report are accepted.
func TestFlightSQLNames(t *testing.T) {
	srv := startServer(t, Config{})
	c := dialSQL(t, srv.FlightAddr().String())
	plain := dial(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want, err := get(ctx, plain, ticket(map[string]any{"dataset": "MIX", "series": []string{"A.TWO"}, "columns": []string{"value", "note"}}))
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"select VALUE, Note from mix where SERIES_ID = 'A.TWO'",
		`SELECT "value", NOTE FROM "MIX" WHERE "series_id" = 'A.TWO' ORDER BY Series_Id, Period`,
		"SELECT value, note FROM servingsnap.main.MIX WHERE series_id = 'A.TWO'",
		"SELECT value, note FROM SERVINGSNAP.Main.Mix WHERE series_id = 'A.TWO'",
		`SELECT value, note FROM "servingsnap"."main"."MIX" WHERE series_id = 'A.TWO'`,
		"SELECT value, note FROM main.mix WHERE series_id = 'A.TWO'",
	} {
		info, err := c.Execute(ctx, sql)
		if err != nil {
			t.Errorf("%s: %v", sql, err)
			continue
		}
		got := sqlGet(t, ctx, c, info)
		sameAnswer(t, sql, got, want)
		sc, err := executeSchema(ctx, c, sql)
		if err != nil {
			t.Errorf("%s: schema: %v", sql, err)
		} else if !sc.Equal(got.schema) {
			t.Errorf("%s: GetExecuteSchema %v, the answer's %v", sql, sc, got.schema)
		}
	}
}

func executeSchema(ctx context.Context, c *flightsql.Client, sql string) (*arrow.Schema, error) {
	res, err := c.GetExecuteSchema(ctx, sql)
	if err != nil {
		return nil, err
	}
	return flight.DeserializeSchema(res.GetSchema(), memory.DefaultAllocator)
}

// TestFlightSQLAggregates: count(*), count(DISTINCT series_id),
// min(period) and max(period) agree with the rows the same WHERE selects,
// in one row of int64 and date32 columns.
func TestFlightSQLAggregates(t *testing.T) {
	srv := startServer(t, Config{})
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const aggs = "SELECT count(*), count(DISTINCT series_id) AS n_series, min(period), MAX(period) AS last"
	for _, where := range []string{
		"FROM MIX",
		"FROM mix WHERE series_id = 'A.TWO' AND period >= '2018-06'",
		"FROM MIX WHERE series_id IN ('C.LONG', 'A.ONE') AND period BETWEEN '2018Q2' AND '2019'",
		"FROM MIX WHERE series_id LIKE 'B.%'",
		"FROM MIX WHERE category = 'Gas' AND period <= '2018-03'",
		"FROM latest(MIX)",
		"FROM latest(MIX) WHERE period < '2018-03'",
		"FROM SYN WHERE period > '2030'",
		"FROM servingsnap.main.SYN",
	} {
		info, err := c.Execute(ctx, "SELECT * "+where)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		rows := sqlGet(t, ctx, c, info)
		info, err = c.Execute(ctx, aggs+" "+where)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if info.TotalRecords != 1 {
			t.Errorf("%s: FlightInfo says %d rows", where, info.TotalRecords)
		}
		got, err := get(ctx, c.Client, info.Endpoint[0].Ticket.Ticket)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		var names, types []string
		for _, f := range got.schema.Fields() {
			names, types = append(names, f.Name), append(types, f.Type.String())
		}
		if g := strings.Join(names, ",") + " " + strings.Join(types, ","); g != "count(*),n_series,min(period),last int64,int64,date32,date32" {
			t.Fatalf("%s: schema %s", where, g)
		}
		series := map[string]bool{}
		var first, last any
		for i, id := range rows.ids {
			series[id] = true
			if p := arrow.Date32(rows.periods[i]); first == nil || p < first.(arrow.Date32) {
				first = p
			}
			if p := arrow.Date32(rows.periods[i]); last == nil || p > last.(arrow.Date32) {
				last = p
			}
		}
		want := map[string][]any{"count(*)": {int64(len(rows.ids))}, "n_series": {int64(len(series))}, "min(period)": {first}, "last": {last}}
		if !reflect.DeepEqual(got.cols, want) {
			t.Errorf("%s: totals %v, the rows give %v", where, got.cols, want)
		}
		sc, err := executeSchema(ctx, c, aggs+" "+where)
		if err != nil || !sc.Equal(got.schema) {
			t.Errorf("%s: GetExecuteSchema %v, %v; the answer's %v", where, sc, err, got.schema)
		}
	}

	// prepared, with the series bound
	ps, err := c.Prepare(ctx, "SELECT count(*) FROM mix WHERE series_id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close(ctx)
	if f := ps.DatasetSchema().Field(0); f.Name != "count(*)" || f.Type.ID() != arrow.INT64 {
		t.Errorf("prepared aggregate's schema: %v", ps.DatasetSchema())
	}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema([]arrow.Field{{Name: "p1", Type: arrow.BinaryTypes.String}}, nil))
	b.Field(0).(*array.StringBuilder).Append("A.TWO")
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	ps.SetParameters(rec)
	info, err := ps.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(ctx, c.Client, info.Endpoint[0].Ticket.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := get(ctx, c.Client, ticket(map[string]any{"dataset": "MIX", "series": []string{"A.TWO"}}))
	if err != nil {
		t.Fatal(err)
	}
	if n := got.cols["count(*)"]; len(n) != 1 || n[0] != int64(len(rows.ids)) || len(rows.ids) == 0 {
		t.Errorf("prepared count(*) of A.TWO: %v, the series has %d rows", n, len(rows.ids))
	}
	if _, err := c.Prepare(ctx, "SELECT count(*) FROM other.main.MIX"); status.Code(err) != codes.NotFound {
		t.Errorf("prepare over an unknown catalog: %v, want NotFound", err)
	}
}

// TestFlightSQLNullParameters: a null bound to a prepared statement or
// carried by a statement ticket is refused naming its position.
func TestFlightSQLNullParameters(t *testing.T) {
	srv := startServer(t, Config{})
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tk := range []string{
		`{"sql":"SELECT value FROM MIX WHERE series_id = ?","params":[null]}`,
		`{"sql":"SELECT value FROM MIX WHERE series_id = ? AND period >= ?","params":["A.ONE",null]}`,
	} {
		b, err := flightsql.CreateStatementQueryTicket([]byte(tk))
		if err != nil {
			t.Fatal(err)
		}
		pos := strings.Count(tk, ",") // the null is the last parameter
		_, err = get(ctx, c.Client, b)
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "parameter "+strconv.Itoa(pos)+" is null") {
			t.Errorf("ticket %s: %v, want InvalidArgument naming parameter %d", tk, err, pos)
		}
	}

	ps, err := c.Prepare(ctx, "SELECT value FROM MIX WHERE series_id = ? AND period >= ?")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close(ctx)
	mem := memory.NewGoAllocator()
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	for null := 0; null < 2; null++ {
		b := array.NewRecordBuilder(mem, sc)
		for i := 0; i < 2; i++ {
			if i == null {
				b.Field(i).AppendNull()
			} else {
				b.Field(i).(*array.StringBuilder).Append([]string{"A.ONE", "2018"}[i])
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		ps.SetParameters(rec)
		_, err := ps.Execute(ctx)
		rec.Release()
		want := "parameter " + strconv.Itoa(null+1) + " is null"
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), want) {
			t.Errorf("null parameter %d: %v, want InvalidArgument with %q", null+1, err, want)
		}
	}
}

// TestParamText: parameters as bound, a dense union's value read at its
// offset in the child the type id names, and a null anywhere refused.
func TestParamText(t *testing.T) {
	mem := memory.NewGoAllocator()
	strs := array.NewStringBuilder(mem)
	strs.AppendValues([]string{"x", "A.ONE"}, nil)
	s := strs.NewArray()
	defer s.Release()
	ints := array.NewInt64Builder(mem)
	ints.AppendNull()
	i64 := ints.NewArray()
	defer i64.Release()
	types := []arrow.UnionTypeCode{0, 1}
	u, err := array.NewDenseUnionFromArrays(
		array.MakeFromData(array.NewData(arrow.PrimitiveTypes.Int8, 2, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int8Traits.CastToBytes([]int8{0, 1}))}, nil, 0, 0)),
		array.MakeFromData(array.NewData(arrow.PrimitiveTypes.Int32, 2, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes([]int32{1, 0}))}, nil, 0, 0)),
		[]arrow.Array{s, i64}, types...)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Release()
	if got, err := paramText(u, 0, 0); err != nil || got != "A.ONE" {
		t.Errorf("union row 0: %q, %v; want the string child's row 1", got, err)
	}
	if _, err := paramText(u, 1, 2); err == nil || !strings.Contains(err.Error(), "parameter 3 is null") {
		t.Errorf("union row 1 (a null int64): %v", err)
	}
}

// BenchmarkSQLTotals: count(*), min(period) and max(period) of a whole
// dataset of 10,000 series and 1.5M rows (from the index alone), the same
// with a period range that cuts every series (two binary searches each),
// and, for scale, reading the periods such a count stands for; each as a
// Flight SQL client runs a statement (GetFlightInfo + DoGet), in process
// on loopback.
func BenchmarkSQLTotals(b *testing.B) {
	r := benchRoot(b, 10_000, 150)
	srv := startServer(b, Config{Root: r})
	plain := dial(b, srv)
	c := &flightsql.Client{Client: plain}
	ctx := context.Background()
	totals := func(sql string) (*result, error) {
		info, err := c.Execute(ctx, sql)
		if err != nil {
			return nil, err
		}
		return get(ctx, plain, info.Endpoint[0].Ticket.Ticket)
	}
	all, err := totals("SELECT count(*), min(period), max(period) FROM B")
	if err != nil {
		b.Fatal(err)
	}
	first, last := all.cols["min(period)"][0].(arrow.Date32), all.cols["max(period)"][0].(arrow.Date32)
	mid := period.Format(int32(first + (last-first)/2))
	for _, tc := range []struct {
		name string
		run  func() (int64, error)
	}{
		{"count-index", func() (int64, error) {
			r, err := totals("SELECT count(*), min(period), max(period) FROM B")
			if err != nil {
				return 0, err
			}
			return r.cols["count(*)"][0].(int64), nil
		}},
		{"count-cut", func() (int64, error) {
			r, err := totals("SELECT count(*), min(period), max(period) FROM B WHERE period >= '" + mid + "'")
			if err != nil {
				return 0, err
			}
			return r.cols["count(*)"][0].(int64), nil
		}},
		{"rows", func() (int64, error) {
			info, err := c.Execute(ctx, "SELECT period FROM B")
			if err != nil {
				return 0, err
			}
			return doGetRows(ctx, plain, info.Endpoint[0].Ticket.Ticket)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if n, err := tc.run(); err != nil || n == 0 {
					b.Fatalf("%d, %v", n, err)
				}
			}
		})
	}
}
