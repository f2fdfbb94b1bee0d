package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sqlq"
)

// TestFlightSQLSharded: a statement on the sharded PET answers one
// endpoint per shard it touches, each at its shard's location with a
// ticket routed there, and their rows are the same statement's on the
// unsharded ALL; aggregates keep one endpoint whose row combines every
// shard's totals.
func TestFlightSQLSharded(t *testing.T) {
	clients, locs := cluster(t, nil)
	byLoc := map[string]flight.Client{}
	for i := range locs {
		byLoc[locs[i]] = clients[i]
	}
	// server 0 holds shard 0 and knows where 1 and 2 are
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := strings.TrimPrefix(locs[0], "grpc://")
	c := dialSQL(t, addr)
	whole, err := get(ctx, clients[0], ticket(map[string]any{"dataset": "ALL", "prefix": ""}))
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Compact(slices.Clone(whole.ids))
	prefix, _, _ := strings.Cut(ids[len(ids)/2], ".")
	picked := []string{ids[0], ids[7], ids[33], ids[90]}
	in := "('" + strings.Join(picked, "', '") + "')"
	shardsOf := func(list []string) []int {
		var out []int
		for _, id := range list {
			out = append(out, shard.Of(id, 3))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for _, tc := range []struct {
		name, where string
		shards      []int
	}{
		{"whole", "FROM %s", []int{0, 1, 2}},
		{"range", "FROM %s WHERE period BETWEEN '2018' AND '2019-06'", []int{0, 1, 2}},
		{"prefix", "FROM %s WHERE series_id LIKE '" + prefix + ".%'", []int{0, 1, 2}},
		{"series", "FROM %s WHERE series_id IN " + in, shardsOf(picked)},
		{"one series", "FROM %s WHERE series_id = '" + ids[5] + "'", shardsOf(ids[5:6])},
		{"latest", "FROM latest(%s)", []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := c.Execute(ctx, "SELECT * "+strings.Replace(tc.where, "%s", "ALL", 1))
			if err != nil {
				t.Fatal(err)
			}
			want := sqlGet(t, ctx, c, ref)
			info, err := c.Execute(ctx, "SELECT * "+strings.Replace(tc.where, "%s", "PET", 1))
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			var rows []rowKey
			var sum int64
			for _, ep := range info.Endpoint {
				var m endpointMeta
				if err := json.Unmarshal(ep.AppMetadata, &m); err != nil || m.Rows < 0 || m.Dataset != "PET" {
					t.Fatalf("endpoint metadata %s: %v", ep.AppMetadata, err)
				}
				got = append(got, m.Shard)
				sum += m.Rows
				if len(ep.Location) != 1 || ep.Location[0].Uri != locs[m.Shard] {
					t.Errorf("shard %d's endpoint at %v, want %s", m.Shard, ep.Location, locs[m.Shard])
				}
				r, err := get(ctx, byLoc[ep.Location[0].Uri], ep.Ticket.Ticket)
				if err != nil {
					t.Fatalf("DoGet of shard %d at its location: %v", m.Shard, err)
				}
				if int64(len(r.ids)) != m.Rows {
					t.Errorf("shard %d: endpoint says %d rows, the stream has %d", m.Shard, m.Rows, len(r.ids))
				}
				for _, id := range r.ids {
					if shard.Of(id, 3) != m.Shard {
						t.Fatalf("shard %d's endpoint streamed %s of shard %d", m.Shard, id, shard.Of(id, 3))
					}
				}
				rows = append(rows, keys(r)...)
			}
			if !slices.Equal(got, tc.shards) {
				t.Errorf("endpoints of shards %v, want %v", got, tc.shards)
			}
			if info.TotalRecords != sum || sum != int64(len(want.ids)) {
				t.Errorf("total_records %d, endpoints %d, unsharded %d", info.TotalRecords, sum, len(want.ids))
			}
			if info.Ordered != (len(tc.shards) == 1) {
				t.Errorf("ordered %v with %d endpoints", info.Ordered, len(tc.shards))
			}
			sortKeys(rows)
			if !slices.Equal(rows, keys(want)) {
				t.Errorf("the endpoints gave %d rows, the unsharded dataset %d", len(rows), len(want.ids))
			}
		})
	}

	// LIMIT n is n rows in all: the first shards' first rows.
	all := map[rowKey]bool{}
	for _, k := range keys(whole) {
		all[k] = true
	}
	for _, tc := range []struct {
		limit, want int
		endpoints   int
	}{
		{1, 1, 1},
		{len(whole.ids) / 2, len(whole.ids) / 2, -1},
		{len(whole.ids) + 5, len(whole.ids), 3},
	} {
		t.Run(fmt.Sprintf("limit %d", tc.limit), func(t *testing.T) {
			info, err := c.Execute(ctx, fmt.Sprintf("SELECT * FROM PET LIMIT %d", tc.limit))
			if err != nil {
				t.Fatal(err)
			}
			if info.TotalRecords != int64(tc.want) || (tc.endpoints > 0 && len(info.Endpoint) != tc.endpoints) {
				t.Fatalf("total_records %d at %d endpoints, want %d", info.TotalRecords, len(info.Endpoint), tc.want)
			}
			seen := map[rowKey]bool{}
			for _, ep := range info.Endpoint {
				r, err := get(ctx, byLoc[ep.Location[0].Uri], ep.Ticket.Ticket)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range keys(r) {
					if seen[k] || !all[k] {
						t.Fatalf("row %v twice, or not in the dataset", k)
					}
					seen[k] = true
				}
			}
			if len(seen) != tc.want {
				t.Errorf("%d rows streamed, want %d", len(seen), tc.want)
			}
		})
	}

	const aggs = "SELECT count(*), count(DISTINCT series_id) AS n, min(period), max(period) AS last "
	for _, where := range []string{
		"FROM %s",
		"FROM %s WHERE series_id IN " + in + " AND period >= '2019'",
		"FROM %s WHERE series_id LIKE '" + prefix + ".%'",
		"FROM latest(%s) WHERE period < '2018-03'",
		"FROM %s WHERE period > '2090'", // no row: count 0, null periods
	} {
		t.Run("aggregate "+where, func(t *testing.T) {
			var answers []map[string][]any
			for _, name := range []string{"ALL", "PET"} {
				info, err := c.Execute(ctx, aggs+strings.Replace(where, "%s", name, 1))
				if err != nil {
					t.Fatal(err)
				}
				if len(info.Endpoint) != 1 || info.TotalRecords != 1 {
					t.Fatalf("%s: %d endpoints, %d rows; want one row at one endpoint", name, len(info.Endpoint), info.TotalRecords)
				}
				r, err := get(ctx, c.Client, info.Endpoint[0].Ticket.Ticket)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				answers = append(answers, r.cols)
			}
			if !reflect.DeepEqual(answers[0], answers[1]) {
				t.Errorf("PET's totals %v, ALL's %v", answers[1], answers[0])
			}
		})
	}

	for _, tc := range []struct {
		name, sql string
		code      codes.Code
		msg       string
	}{
		{"vintage", "SELECT * FROM PET FOR VERSION AS OF 1", codes.InvalidArgument, "the shards of \"PET\" have their own"},
		{"unknown series", "SELECT * FROM PET WHERE series_id = 'NO.SUCH'", codes.NotFound, "NO.SUCH"},
		{"unknown series, aggregate", "SELECT count(*) FROM PET WHERE series_id IN ('NO.SUCH', '" + ids[0] + "')", codes.NotFound, "NO.SUCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, err := c.Execute(ctx, tc.sql)
			if err == nil {
				_, err = get(ctx, c.Client, info.Endpoint[0].Ticket.Ticket)
			}
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s: %v, want %v %q", tc.sql, err, tc.code, tc.msg)
			}
		})
	}
	// Statement tickets written by hand: what is wrong is named.
	for _, tc := range []struct {
		handle string
		code   codes.Code
		msg    string
	}{
		{`{"sql": "SELECT * FROM PET", "shard": 7}`, codes.InvalidArgument, `dataset "PET" has 3 shards (0 to 2)`},
		{`{"sql": "SELECT * FROM PET", "shard": -1}`, codes.InvalidArgument, `"shard" must be a shard index`},
		{`{"sql": "SELECT * FROM PET", "limit": 5}`, codes.InvalidArgument, `"limit" is a shard's share of the LIMIT`},
		{`{"sql": "SELECT * FROM ALL", "shard": 0}`, codes.InvalidArgument, `dataset "ALL" is not sharded`},
		{`{"sql": "SELECT * FROM PET"}`, codes.FailedPrecondition, "touches 3 of them: call GetFlightInfo"},
		{`{"sql": "SELECT * FROM PET WHERE series_id = '` + ids[0] + `'", "shard": ` + fmt.Sprint((shard.Of(ids[0], 3)+1)%3) + `}`, codes.InvalidArgument, "no series the statement lists lives in shard"},
	} {
		tkt, err := flightsql.CreateStatementQueryTicket([]byte(tc.handle))
		if err != nil {
			t.Fatal(err)
		}
		_, err = get(ctx, clients[0], tkt)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("DoGet of %s: %v, want %v %q", tc.handle, err, tc.code, tc.msg)
		}
	}
	// An endpoint's ticket at a server without its shard says so.
	info, err := c.Execute(ctx, "SELECT * FROM PET")
	if err != nil {
		t.Fatal(err)
	}
	_, err = get(ctx, clients[2], info.Endpoint[1].Ticket.Ticket)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "shard 1 is not served here") {
		t.Errorf("shard 1's ticket on server 2: %v", err)
	}
}

func sortKeys(rows []rowKey) {
	slices.SortFunc(rows, func(a, b rowKey) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return int(a.period - b.period)
	})
}

// TestCombineAggs: counts add up; min and max skip the shards without
// rows, and are null when no shard has any.
func TestCombineAggs(t *testing.T) {
	aggs := []sqlq.Agg{{Func: sqlq.AggCount}, {Func: sqlq.AggCount, Distinct: true}, {Func: sqlq.AggMin}, {Func: sqlq.AggMax}}
	v := func(n int64) aggValue { return aggValue{n: n} }
	null := aggValue{null: true}
	for _, tc := range []struct {
		name  string
		parts [][]aggValue
		want  []aggValue
	}{
		{"one shard", [][]aggValue{{v(5), v(2), v(10), v(20)}}, []aggValue{v(5), v(2), v(10), v(20)}},
		{"three shards", [][]aggValue{{v(5), v(2), v(10), v(20)}, {v(7), v(3), v(-4), v(15)}, {v(1), v(1), v(12), v(30)}},
			[]aggValue{v(13), v(6), v(-4), v(30)}},
		{"a shard without rows", [][]aggValue{{v(0), v(0), null, null}, {v(7), v(3), v(4), v(15)}}, []aggValue{v(7), v(3), v(4), v(15)}},
		{"no rows anywhere", [][]aggValue{{v(0), v(0), null, null}, {v(0), v(0), null, null}}, []aggValue{v(0), v(0), null, null}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := combineAggs(aggs, tc.parts); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("combined %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestFlightSQLShardedOneServer: a server holding every shard, without a
// cluster file, answers endpoints without locations (read them from it).
func TestFlightSQLShardedOneServer(t *testing.T) {
	srv := startServer(t, Config{Root: shardedRoot(t)})
	c := dialSQL(t, srv.FlightAddr().String())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, where := range []string{"", " WHERE period >= '2019'"} {
		ref, err := c.Execute(ctx, "SELECT * FROM ALL"+where)
		if err != nil {
			t.Fatal(err)
		}
		want := sqlGet(t, ctx, c, ref)
		info, err := c.Execute(ctx, "SELECT * FROM pet"+where) // a bare name matches in any case
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Endpoint) != 3 || info.TotalRecords != int64(len(want.ids)) {
			t.Fatalf("%d endpoints, %d rows; want 3, %d", len(info.Endpoint), info.TotalRecords, len(want.ids))
		}
		var rows []rowKey
		for _, ep := range info.Endpoint {
			if len(ep.Location) != 0 {
				t.Errorf("endpoint at %v without a cluster file", ep.Location)
			}
			r, err := get(ctx, c.Client, ep.Ticket.Ticket)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, keys(r)...)
		}
		sortKeys(rows)
		if !slices.Equal(rows, keys(want)) {
			t.Errorf("%d rows from the endpoints, %d unsharded", len(rows), len(want.ids))
		}
	}
	// the schema of a statement on PET is its shards'
	sc, err := c.GetExecuteSchema(ctx, "SELECT value FROM PET")
	if err != nil {
		t.Fatalf("GetSchema of a statement on PET: %v", err)
	}
	schema, err := flight.DeserializeSchema(sc.Schema, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"series_id", "period", "value"}) {
		t.Errorf("schema of SELECT value FROM PET: %v", names)
	}
}
