package serve

// Flight SQL beside plain Flight, on the same port and service.
//
// flightMux is what the gRPC server registers: a call whose descriptor or
// ticket holds a Flight SQL command (a protobuf Any of the
// arrow.flight.protocol.sql package) goes to arrow-go's flightsql routing
// over sqlServer; anything else (JSON tickets, path descriptors, our
// actions, DoPut of rows) to the Service exactly as before. A JSON ticket
// never decodes as such an Any ('{' is not a valid first tag), so the two
// surfaces cannot be confused.
//
// Statements plan through the same read layer as tickets (pkg/sqlq turns
// the text into a query.Request) and their rows stream through
// Service.stream: same batching, limits, allocator, shutdown and metrics.
// Names are resolved here: the catalog and schema qualifiers must be the
// ones GetCatalogs and GetDbSchemas report, and a bare table or column
// name matches the dataset's in any case. Aggregates answer one row of
// query.Aggregate's totals.
// The tickets of statements are self-contained (the SQL and its bound
// parameters), so a DoGet needs no server state; prepared statements keep
// their text and bound parameters in a store bounded in bytes, per
// connection and in all, released when closed, when their connection ends
// or when unused for a while (prepared.go). A statement on a sharded
// dataset answers one endpoint per shard (shards_sql.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/sqlq"
)

// The one catalog and schema GetCatalogs/GetDbSchemas report; every
// dataset is a table of it.
const (
	sqlCatalog = "servingsnap"
	sqlSchema  = "main"
)

const sqlTypePrefix = "type.googleapis.com/arrow.flight.protocol.sql."

// isSQLCommand reports whether b is a Flight SQL command or ticket.
func isSQLCommand(b []byte) bool {
	_, ok := sqlCommand(b)
	return ok
}

// sqlCommand decodes b as a Flight SQL command or ticket.
func sqlCommand(b []byte) (*anypb.Any, bool) {
	if len(b) == 0 || b[0] != 0x0a { // field 1 (type_url), length-delimited
		return nil, false
	}
	a := new(anypb.Any)
	if proto.Unmarshal(b, a) != nil || !strings.HasPrefix(a.TypeUrl, sqlTypePrefix) {
		return nil, false
	}
	return a, true
}

// flightMux serves plain Flight and Flight SQL on one service.
type flightMux struct {
	*Service
	sql    flight.FlightServer // flightsql routing over sqlSrv
	sqlSrv *sqlServer
}

func newFlightMux(s *Service) *flightMux {
	ss := newSQLServer(s)
	return &flightMux{Service: s, sql: flightsql.NewFlightServerWithAllocator(ss, s.mem), sqlSrv: ss}
}

// The scope each call needs is checked here, before anything runs
// (authz.go): ListFlights, GetFlightInfo, GetSchema, DoGet and the
// non-admin actions need read, DoPut of rows write, the admin actions
// admin; Handshake and ListActions only a valid token.

func (m *flightMux) ListFlights(c *flight.Criteria, stream flight.FlightService_ListFlightsServer) error {
	if err := needScope(stream.Context(), ScopeRead, "ListFlights"); err != nil {
		return toStatus(err)
	}
	return m.Service.ListFlights(c, stream)
}

func (m *flightMux) GetFlightInfo(ctx context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if err := needScope(ctx, ScopeRead, "GetFlightInfo"); err != nil {
		return nil, toStatus(err)
	}
	if desc.GetType() == flight.DescriptorCMD && isSQLCommand(desc.Cmd) {
		if h, ok := shardStatementTicket(desc.Cmd); ok {
			return m.sqlSrv.shardInfo(ctx, h, desc)
		}
		return m.sql.GetFlightInfo(ctx, desc)
	}
	return m.Service.GetFlightInfo(ctx, desc)
}

func (m *flightMux) GetSchema(ctx context.Context, desc *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	if err := needScope(ctx, ScopeRead, "GetSchema"); err != nil {
		return nil, toStatus(err)
	}
	if desc.GetType() == flight.DescriptorCMD && isSQLCommand(desc.Cmd) {
		return m.sql.GetSchema(ctx, desc)
	}
	return m.Service.GetSchema(ctx, desc)
}

// DoGet streams statement answers itself (through Service.stream, so the
// batches are the read layer's, released as soon as written); catalog
// commands go through flightsql's routing.
func (m *flightMux) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	if err := needScope(stream.Context(), ScopeRead, "DoGet"); err != nil {
		return toStatus(err)
	}
	a, ok := sqlCommand(t.GetTicket())
	if !ok {
		return m.Service.DoGet(t, stream)
	}
	msg, err := a.UnmarshalNew()
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "flight sql ticket: %v", err)
	}
	switch cmd := msg.(type) {
	case *pb.TicketStatementQuery:
		return sqlStatus(m.sqlSrv.doGetHandle(cmd.GetStatementHandle(), stream))
	case *pb.CommandPreparedStatementQuery:
		h, err := m.sqlSrv.bound(stream.Context(), cmd.GetPreparedStatementHandle())
		if err != nil {
			return sqlStatus(err)
		}
		return sqlStatus(m.sqlSrv.doGetHandle(h, stream))
	}
	return m.sql.DoGet(t, stream)
}

// peekedPut replays the first message of a DoPut to the handler chosen
// by its descriptor.
type peekedPut struct {
	flight.FlightService_DoPutServer
	first *flight.FlightData
}

func (p *peekedPut) Recv() (*flight.FlightData, error) {
	if f := p.first; f != nil {
		p.first = nil
		return f, nil
	}
	return p.FlightService_DoPutServer.Recv()
}

func (m *flightMux) DoPut(stream flight.FlightService_DoPutServer) error {
	first, err := stream.Recv()
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "DoPut: no first message: %v", err)
	}
	p := &peekedPut{FlightService_DoPutServer: stream, first: first}
	if d := first.GetFlightDescriptor(); d.GetType() == flight.DescriptorCMD && isSQLCommand(d.Cmd) {
		// binding a prepared query's parameters is part of reading;
		// any other Flight SQL DoPut would write
		a, _ := sqlCommand(d.Cmd)
		need := ScopeWrite
		if a.TypeUrl == sqlTypePrefix+"CommandPreparedStatementQuery" {
			need = ScopeRead
		}
		if err := needScope(stream.Context(), need, "DoPut of "+strings.TrimPrefix(a.TypeUrl, sqlTypePrefix)); err != nil {
			return toStatus(err)
		}
		return m.sql.DoPut(p)
	}
	if err := needScope(stream.Context(), ScopeWrite, "DoPut"); err != nil {
		return toStatus(err)
	}
	return m.Service.DoPut(p)
}

// sqlActions are the action types flightsql's routing answers.
var sqlActions = map[string]bool{
	flightsql.CreatePreparedStatementActionType: true, flightsql.ClosePreparedStatementActionType: true,
	flightsql.CreatePreparedSubstraitPlanActionType: true, flightsql.BeginTransactionActionType: true,
	flightsql.BeginSavepointActionType: true, flightsql.EndTransactionActionType: true,
	flightsql.EndSavepointActionType: true, flightsql.CancelQueryActionType: true,
	flight.CancelFlightInfoActionType: true, flight.RenewFlightEndpointActionType: true,
	flight.SetSessionOptionsActionType: true, flight.GetSessionOptionsActionType: true, flight.CloseSessionActionType: true,
}

func (m *flightMux) DoAction(a *flight.Action, stream flight.FlightService_DoActionServer) error {
	if err := needScope(stream.Context(), actionScope(a.GetType()), "action "+strconv.Quote(truncate(a.GetType(), 64))); err != nil {
		return toStatus(err)
	}
	if sqlActions[a.GetType()] {
		return m.sql.DoAction(a, stream)
	}
	return m.Service.DoAction(a, stream)
}

func (m *flightMux) ListActions(e *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	if err := m.Service.ListActions(e, stream); err != nil {
		return err
	}
	for _, a := range []*flight.ActionType{
		{Type: flightsql.CreatePreparedStatementActionType, Description: "Flight SQL: prepare a statement (docs/FLIGHT.md \"Flight SQL\")"},
		{Type: flightsql.ClosePreparedStatementActionType, Description: "Flight SQL: close a prepared statement"},
	} {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return nil
}

// sqlStatus maps errors of the SQL surface to status codes: as toStatus,
// but a statement's errors are not a ticket's.
func sqlStatus(err error) error {
	var e *Error
	if err != nil && !errors.As(err, &e) && errors.Is(err, query.ErrInvalid) {
		return status.Error(codes.InvalidArgument, truncate(err.Error(), 2048))
	}
	return toStatus(err)
}

// sqlServer is the Flight SQL domain server over a Service.
type sqlServer struct {
	flightsql.BaseServer
	svc      *Service
	prepared *preparedStore
}

// handle is a statement ticket's content: the SQL and its parameters,
// and for one endpoint of a sharded dataset the shard it reads.
type handle struct {
	SQL    string   `json:"sql"`
	Params []string `json:"params,omitempty"`
	Shard  *int     `json:"shard,omitempty"`
	// Limit, with Shard, is the shard's share of the statement's LIMIT
	// (shards_sql.go).
	Limit int64 `json:"limit,omitempty"`
}

func newSQLServer(s *Service) *sqlServer {
	ss := &sqlServer{svc: s, prepared: newPreparedStore(s.limits)}
	ss.Alloc = s.mem
	for id, v := range map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:         "servingsnap",
		flightsql.SqlInfoFlightSqlServerVersion:      s.version,
		flightsql.SqlInfoFlightSqlServerArrowVersion: "18",
		flightsql.SqlInfoFlightSqlServerReadOnly:     true,
		flightsql.SqlInfoFlightSqlServerSql:          true,
		flightsql.SqlInfoFlightSqlServerSubstrait:    false,
		flightsql.SqlInfoFlightSqlServerTransaction:  int32(flightsql.SqlTransactionNone),
		flightsql.SqlInfoFlightSqlServerCancel:       false,
		flightsql.SqlInfoDDLCatalog:                  false,
		flightsql.SqlInfoDDLSchema:                   false,
		flightsql.SqlInfoDDLTable:                    false,
		flightsql.SqlInfoIdentifierQuoteChar:         `"`,
	} {
		if err := ss.RegisterSqlInfo(id, v); err != nil {
			panic(fmt.Sprintf("serve: sql info %v: %v", id, err)) // a programming error: the types above are fixed
		}
	}
	return ss
}

// parse parses a statement within the ticket size limit.
func (ss *sqlServer) parse(sql string) (*sqlq.Statement, error) {
	if n := ss.svc.limits.MaxTicketBytes; n > 0 && len(sql) > n {
		return nil, errf(codes.ResourceExhausted, "sql: statement is %d bytes, limit %d", len(sql), n)
	}
	return sqlq.Parse(sql)
}

// tableNames are the names a statement's table may resolve to: the
// datasets served, and the sharded ones (whose lookup says how to read
// them).
func (ss *sqlServer) tableNames() []string {
	names := ss.svc.names
	if len(ss.svc.shards.sharded) > 0 {
		names = append([]string(nil), names...)
		for n := range ss.svc.shards.sharded {
			names = append(names, n)
		}
	}
	return names
}

// resolveTable checks a statement's qualifiers against the one catalog
// and schema GetCatalogs and GetDbSchemas report, and finds the dataset
// its table names: exactly, or for a bare name ignoring case. A name
// that matches none is returned as written, for the lookup to refuse.
func (ss *sqlServer) resolveTable(catalog, schema, table sqlq.Ident) (string, error) {
	if catalog != (sqlq.Ident{}) {
		if _, ok, _ := catalog.Resolve([]string{sqlCatalog}); !ok {
			return "", errf(codes.NotFound, "sql: catalog %q not found (this server has one catalog, %q, with one schema, %q)",
				query.Truncate(catalog.Name, 128), sqlCatalog, sqlSchema)
		}
	}
	if schema != (sqlq.Ident{}) {
		if _, ok, _ := schema.Resolve([]string{sqlSchema}); !ok {
			return "", errf(codes.NotFound, "sql: schema %q not found in catalog %q (its one schema is %q)",
				query.Truncate(schema.Name, 128), sqlCatalog, sqlSchema)
		}
	}
	name, ok, err := table.Resolve(ss.tableNames())
	if err != nil || !ok {
		return table.Name, err
	}
	return name, nil
}

// resolveColumns replaces the column names of req, as written, by the
// dataset's columns they stand for; one that matches none stays, for the
// plan to refuse naming the columns there are.
func resolveColumns(sh *query.Shape, cols []sqlq.Ident, req *query.Request) error {
	if len(cols) == 0 {
		return nil
	}
	names := sh.Names()
	for i, c := range cols {
		n, ok, err := c.Resolve(names)
		if err != nil {
			return err
		}
		if ok {
			req.Columns[i] = n
		}
	}
	return nil
}

// bindHandle parses and binds a statement and resolves the dataset its
// table names (which the caller's token must permit).
func (ss *sqlServer) bindHandle(ctx context.Context, h handle) (string, *sqlq.Query, error) {
	st, err := ss.parse(h.SQL)
	if err != nil {
		return "", nil, err
	}
	if h.Params == nil && st.Params > 0 {
		return "", nil, query.Errorf(query.ErrInvalid, "sql: the statement has %d parameters (?); bind them through a prepared statement", st.Params)
	}
	q, err := st.Bind(h.Params)
	if err != nil {
		return "", nil, err
	}
	name, err := ss.resolveTable(q.Catalog, q.Schema, q.Table)
	if err != nil {
		return "", nil, err
	}
	if err := ss.svc.permitDataset(ctx, name); err != nil {
		return "", nil, err
	}
	return name, q, nil
}

// openBound acquires the view a bound statement reads (for a sharded
// dataset, the local shard the handle names: shards_sql.go) and resolves
// its columns; the caller releases the view.
func (ss *sqlServer) openBound(name string, h handle, q *sqlq.Query) (*served.View, error) {
	var v *served.View
	var err error
	if sd := ss.svc.shards.sharded[name]; sd != nil || h.Shard != nil {
		v, err = ss.acquireShard(sd, name, h, q)
	} else {
		v, err = ss.svc.acquireFor(name, q.Vintage)
	}
	if err != nil {
		return nil, err
	}
	if err := resolveColumns(v.Reader().Shape(), q.Columns, &q.Request); err != nil {
		v.Release()
		return nil, err
	}
	return v, nil
}

func (ss *sqlServer) limits() query.Limits {
	return query.Limits{MaxSeries: ss.svc.limits.MaxSeries, MaxRows: ss.svc.limits.MaxRows}
}

// flightInfo plans h and describes it: schema, exact rows, and a ticket
// holding h.
func (ss *sqlServer) flightInfo(ctx context.Context, h handle, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	name, q, err := ss.bindHandle(ctx, h)
	if err != nil {
		return nil, sqlStatus(err)
	}
	if sd := ss.svc.shards.sharded[name]; sd != nil && h.Shard == nil {
		info, err := ss.shardedInfo(ctx, sd, h, q, desc)
		return info, sqlStatus(err)
	}
	v, err := ss.openBound(name, h, q)
	if err != nil {
		return nil, sqlStatus(err)
	}
	defer v.Release()
	var sc *arrow.Schema
	rows := int64(1)
	if len(q.Aggs) > 0 {
		if _, err := query.Aggregate(v.Reader(), &q.Request, ss.limits()); err != nil {
			return nil, sqlStatus(err)
		}
		sc = aggSchema(v.Reader().Info(), q.Aggs)
	} else {
		p, err := query.NewPlan(v.Reader(), &q.Request, ss.limits())
		if err != nil {
			return nil, sqlStatus(err)
		}
		sc, rows = p.Schema(), p.Rows()
	}
	tkt, err := statementTicket(h)
	if err != nil {
		return nil, err
	}
	am := appMetadata(v)
	if h.Shard != nil {
		am, _ = json.Marshal(endpointMeta{Dataset: name, Shard: *h.Shard, Rows: rows, SnapshotID: v.ID()})
	}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(sc, ss.svc.mem),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		TotalRecords:     rows,
		TotalBytes:       -1,
		Ordered:          true,
		AppMetadata:      am,
	}, nil
}

// statementTicket is the Flight SQL ticket holding h.
func statementTicket(h handle) ([]byte, error) {
	b, _ := json.Marshal(h)
	tkt, err := flightsql.CreateStatementQueryTicket(b)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return tkt, nil
}

// doGetHandle streams the answer of a statement ticket's handle.
func (ss *sqlServer) doGetHandle(b []byte, stream flight.FlightService_DoGetServer) error {
	h, err := decodeHandle(b)
	if err != nil {
		return err
	}
	name, q, err := ss.bindHandle(stream.Context(), h)
	if err != nil {
		return err
	}
	if sd := ss.svc.shards.sharded[name]; sd != nil && h.Shard == nil && len(q.Aggs) > 0 {
		return ss.sendShardedTotals(stream.Context(), sd, h, q, stream)
	}
	v, err := ss.openBound(name, h, q)
	if err != nil {
		return err
	}
	defer v.Release()
	if len(q.Aggs) > 0 {
		return ss.sendTotals(v, q, stream)
	}
	p, err := query.NewPlan(v.Reader(), &q.Request, ss.limits())
	if err != nil {
		return err
	}
	return ss.svc.stream(v, p, stream)
}

// decodeHandle reads a statement ticket's handle. A parameter must be a
// string: null (JSON's null) is refused naming its position, never read
// as the empty string.
func decodeHandle(b []byte) (handle, error) {
	var raw struct {
		SQL    string            `json:"sql"`
		Params []json.RawMessage `json:"params"`
		Shard  *int              `json:"shard"`
		Limit  int64             `json:"limit"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return handle{}, errf(codes.InvalidArgument, "flight sql ticket: not a statement handle of this server")
	}
	if raw.Shard != nil && *raw.Shard < 0 {
		return handle{}, errf(codes.InvalidArgument, "flight sql ticket: \"shard\" must be a shard index (an integer ≥ 0), got %d", *raw.Shard)
	}
	if raw.Limit < 0 || (raw.Limit > 0 && raw.Shard == nil) {
		return handle{}, errf(codes.InvalidArgument, "flight sql ticket: \"limit\" is a shard's share of the LIMIT: an integer ≥ 1, with \"shard\"")
	}
	h := handle{SQL: raw.SQL, Shard: raw.Shard, Limit: raw.Limit}
	if raw.Params != nil {
		h.Params = make([]string, len(raw.Params))
	}
	for i, m := range raw.Params {
		if string(m) == "null" {
			return handle{}, errf(codes.InvalidArgument, "sql: parameter %d is null; bind a value (a string, an integer or a date)", i+1)
		}
		if err := json.Unmarshal(m, &h.Params[i]); err != nil {
			return handle{}, errf(codes.InvalidArgument, "sql: parameter %d of the statement ticket is not a string", i+1)
		}
	}
	return h, nil
}

// aggSchema is the schema of an aggregate's one row: a count is int64, a
// min or max of period a date32 (null when no row matched), with the
// dataset and snapshot in the metadata as on every answer.
func aggSchema(info query.Info, aggs []sqlq.Agg) *arrow.Schema {
	fields := make([]arrow.Field, len(aggs))
	for i, a := range aggs {
		if a.Func == sqlq.AggCount {
			fields[i] = arrow.Field{Name: a.Name, Type: arrow.PrimitiveTypes.Int64}
		} else {
			fields[i] = arrow.Field{Name: a.Name, Type: arrow.FixedWidthTypes.Date32, Nullable: true}
		}
	}
	md := arrow.NewMetadata([]string{query.MetaSnapshotID, query.MetaDataset}, []string{strconv.FormatUint(info.SnapshotID, 10), info.Dataset})
	if info.SnapshotID == 0 { // a sharded dataset's totals: its shards' snapshots differ
		md = arrow.NewMetadata([]string{query.MetaDataset}, []string{info.Dataset})
	}
	return arrow.NewSchema(fields, &md)
}

// sendTotals answers an aggregate statement: one row of totals.
func (ss *sqlServer) sendTotals(v *served.View, q *sqlq.Query, stream flight.FlightService_DoGetServer) error {
	t, err := query.Aggregate(v.Reader(), &q.Request, ss.limits())
	if err != nil {
		return err
	}
	err = ss.sendAggRow(aggSchema(v.Reader().Info(), q.Aggs), aggValues(t, q.Aggs), stream)
	ss.svc.log.Debug("doget sql totals", "dataset", v.Dataset(), "snapshot_id", v.ID(), "rows", t.Rows, "series", t.Series)
	return err
}

// aggValue is one aggregate's answer: a count, or a period (null: no
// row matched).
type aggValue struct {
	n    int64
	null bool
}

// aggValues are the answers of aggs from the totals t.
func aggValues(t query.Totals, aggs []sqlq.Agg) []aggValue {
	out := make([]aggValue, len(aggs))
	for i, a := range aggs {
		switch {
		case a.Func == sqlq.AggCount && a.Distinct:
			out[i].n = t.Series
		case a.Func == sqlq.AggCount:
			out[i].n = t.Rows
		case t.Rows == 0:
			out[i].null = true
		case a.Func == sqlq.AggMin:
			out[i].n = int64(t.First)
		default:
			out[i].n = int64(t.Last)
		}
	}
	return out
}

// sendAggRow writes the one row of an aggregate's answer.
func (ss *sqlServer) sendAggRow(sc *arrow.Schema, vals []aggValue, stream flight.FlightService_DoGetServer) error {
	b := array.NewRecordBuilder(ss.svc.mem, sc)
	defer b.Release()
	for i, v := range vals {
		switch f := b.Field(i).(type) {
		case *array.Int64Builder:
			f.Append(v.n)
		case *array.Date32Builder:
			if v.null {
				f.AppendNull()
			} else {
				f.Append(arrow.Date32(v.n))
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc), ipc.WithAllocator(ss.svc.mem))
	err := w.Write(rec)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// schemaOf is the answer schema of a statement, parameters unbound: the
// columns and the dataset decide it, the selection does not.
func (ss *sqlServer) schemaOf(ctx context.Context, st *sqlq.Statement) (*arrow.Schema, error) {
	name, err := ss.resolveTable(st.Catalog, st.Schema, st.Table)
	if err != nil {
		return nil, err
	}
	if err := ss.svc.permitDataset(ctx, name); err != nil {
		return nil, err
	}
	sd := ss.svc.shards.sharded[name]
	if sd != nil && len(st.Aggs) > 0 {
		return aggSchema(query.Info{Dataset: name}, st.Aggs), nil
	}
	var v *served.View
	if sd != nil {
		v, err = ss.svc.schemaShard(sd)
	} else {
		v, err = ss.svc.acquire(name)
	}
	if err != nil {
		return nil, err
	}
	defer v.Release()
	if len(st.Aggs) > 0 {
		return aggSchema(v.Reader().Info(), st.Aggs), nil
	}
	req := query.Request{Select: query.Selector{Kind: query.ByPrefix, Prefix: "\xff\xff\xff\xff"}, Range: query.AllPeriods,
		Latest: st.Latest, Attributes: st.Star}
	if !st.Star {
		req.Columns = make([]string, len(st.Columns))
		for i, c := range st.Columns {
			req.Columns[i] = c.Name
		}
		if err := resolveColumns(v.Reader().Shape(), st.Columns, &req); err != nil {
			return nil, err
		}
	}
	p, err := query.NewPlan(v.Reader(), &req, query.Limits{})
	if err != nil {
		return nil, err
	}
	return p.Schema(), nil
}

func (ss *sqlServer) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return ss.flightInfo(ctx, handle{SQL: cmd.GetQuery()}, desc)
}

func (ss *sqlServer) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	st, err := ss.parse(cmd.GetQuery())
	if err != nil {
		return nil, sqlStatus(err)
	}
	sc, err := ss.schemaOf(ctx, st)
	if err != nil {
		return nil, sqlStatus(err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sc, ss.svc.mem)}, nil
}

func (ss *sqlServer) CreatePreparedStatement(ctx context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	var res flightsql.ActionCreatePreparedStatementResult
	st, err := ss.parse(req.GetQuery())
	if err != nil {
		return res, sqlStatus(err)
	}
	sc, err := ss.schemaOf(ctx, st)
	if err != nil {
		return res, sqlStatus(err)
	}
	fields := make([]arrow.Field, st.Params)
	for i := range fields {
		fields[i] = arrow.Field{Name: "p" + strconv.Itoa(i+1), Type: arrow.BinaryTypes.String, Nullable: true}
	}
	h, err := ss.prepared.add(ctx, req.GetQuery(), st)
	if err != nil {
		return res, toStatus(err)
	}
	isUpdate := false
	return flightsql.ActionCreatePreparedStatementResult{Handle: []byte(h), DatasetSchema: sc,
		ParameterSchema: arrow.NewSchema(fields, nil), IsUpdate: &isUpdate}, nil
}

// ClosePreparedStatement releases a statement of the caller's connection;
// closing an unknown one (closed already, released, another connection's)
// succeeds and does nothing.
func (ss *sqlServer) ClosePreparedStatement(ctx context.Context, req flightsql.ActionClosePreparedStatementRequest) error {
	ss.prepared.close(ctx, req.GetPreparedStatementHandle())
	return nil
}

// bound is the statement handle of a prepared statement with its
// current parameters.
func (ss *sqlServer) bound(ctx context.Context, h []byte) ([]byte, error) {
	ps, err := ss.prepared.lookup(ctx, h)
	if err != nil {
		return nil, err
	}
	hd := handle{SQL: ps.sql, Params: ss.prepared.params(ps)}
	if hd.Params == nil {
		hd.Params = []string{}
	}
	return json.Marshal(hd)
}

// DoPutPreparedStatementQuery binds parameters: one row, one column per
// ?, each a string, an integer or a date.
func (ss *sqlServer) DoPutPreparedStatementQuery(ctx context.Context, cmd flightsql.PreparedStatementQuery, r flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
	h := cmd.GetPreparedStatementHandle()
	ps, err := ss.prepared.lookup(ctx, h)
	if err != nil {
		return nil, toStatus(err)
	}
	name, err := ss.resolveTable(ps.st.Catalog, ps.st.Schema, ps.st.Table)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := ss.svc.permitDataset(ctx, name); err != nil {
		return nil, toStatus(err)
	}
	var params []string
	rows := 0
	for r.Next() {
		rec := r.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rows += int(rec.NumRows())
		if rows > 1 {
			return nil, status.Error(codes.InvalidArgument, "sql: bind one row of parameters per execution")
		}
		if int(rec.NumCols()) != ps.st.Params {
			return nil, status.Errorf(codes.InvalidArgument, "sql: the statement has %d parameters, %d bound", ps.st.Params, rec.NumCols())
		}
		params = make([]string, rec.NumCols())
		for i, col := range rec.Columns() {
			p, err := paramText(col, 0, i)
			if err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			params[i] = strings.Clone(p) // a string column's value shares the message's buffer: keep only the value
		}
	}
	if err := r.Err(); err != nil {
		return nil, toStatus(err)
	}
	if params == nil {
		params = []string{}
	}
	if err := ss.prepared.bind(ps, params); err != nil {
		return nil, toStatus(err)
	}
	return h, nil
}

// paramText is a bound parameter (row j of a, the i-th column) as the
// statement text it stands for. A null is refused naming its position:
// no statement of the grammar can match one.
func paramText(a arrow.Array, j, i int) (string, error) {
	if u, ok := a.(*array.DenseUnion); ok { // ADBC binds some values as a union of types
		return paramText(u.Field(u.ChildID(j)), int(u.ValueOffset(j)), i)
	}
	if a.IsNull(j) {
		return "", fmt.Errorf("sql: parameter %d is null; bind a value (a string, an integer or a date)", i+1)
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(j), nil
	case *array.LargeString:
		return a.Value(j), nil
	case *array.Int64:
		return strconv.FormatInt(a.Value(j), 10), nil
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(j)), 10), nil
	case *array.Date32:
		return period.Format(int32(a.Value(j))), nil
	}
	return "", fmt.Errorf("sql: parameter %d has type %s; bind a string, an integer or a date", i+1, a.DataType())
}

func (ss *sqlServer) GetFlightInfoPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	b, err := ss.bound(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, toStatus(err)
	}
	var h handle
	json.Unmarshal(b, &h)
	return ss.flightInfo(ctx, h, desc)
}

func (ss *sqlServer) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	ps, err := ss.prepared.lookup(ctx, cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, toStatus(err)
	}
	sc, err := ss.schemaOf(ctx, ps.st)
	if err != nil {
		return nil, sqlStatus(err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(sc, ss.svc.mem)}, nil
}

// metaInfo describes a catalog command: its ticket is the command.
func (ss *sqlServer) metaInfo(desc *flight.FlightDescriptor, sc *arrow.Schema) *flight.FlightInfo {
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(sc, ss.svc.mem),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
}

// oneBatch sends one record of string columns (and a binary one, for
// table schemas) built from rows.
func (ss *sqlServer) oneBatch(sc *arrow.Schema, rows [][]any) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	b := array.NewRecordBuilder(ss.svc.mem, sc)
	defer b.Release()
	for _, row := range rows {
		for i, v := range row {
			switch f := b.Field(i).(type) {
			case *array.StringBuilder:
				f.Append(v.(string))
			case *array.BinaryBuilder:
				f.Append(v.([]byte))
			}
		}
	}
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: b.NewRecordBatch()}
	close(ch)
	return sc, ch, nil
}

func (ss *sqlServer) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return ss.metaInfo(desc, schema_ref.Catalogs), nil
}

func (ss *sqlServer) DoGetCatalogs(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return ss.oneBatch(schema_ref.Catalogs, [][]any{{sqlCatalog}})
}

func (ss *sqlServer) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return ss.metaInfo(desc, schema_ref.DBSchemas), nil
}

func (ss *sqlServer) DoGetDBSchemas(_ context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	var rows [][]any
	if matchCatalog(cmd.GetCatalog()) && likeMatch(cmd.GetDBSchemaFilterPattern(), sqlSchema) {
		rows = append(rows, []any{sqlCatalog, sqlSchema})
	}
	return ss.oneBatch(schema_ref.DBSchemas, rows)
}

func (ss *sqlServer) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return ss.metaInfo(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return ss.metaInfo(desc, schema_ref.Tables), nil
}

// DoGetTables lists the datasets as tables; with schemas, each is the
// schema of SELECT * (data columns and attributes).
func (ss *sqlServer) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	sc := schema_ref.Tables
	if cmd.GetIncludeSchema() {
		sc = schema_ref.TablesWithIncludedSchema
	}
	typeOK := len(cmd.GetTableTypes()) == 0
	for _, t := range cmd.GetTableTypes() {
		typeOK = typeOK || strings.EqualFold(t, "TABLE")
	}
	var rows [][]any
	if typeOK && matchCatalog(cmd.GetCatalog()) && likeMatch(cmd.GetDBSchemaFilterPattern(), sqlSchema) {
		names := ss.tableNames()
		sort.Strings(names)
		for _, name := range ss.svc.visible(ctx, names) {
			if !likeMatch(cmd.GetTableNameFilterPattern(), name) {
				continue
			}
			row := []any{sqlCatalog, sqlSchema, name, "TABLE"}
			if cmd.GetIncludeSchema() {
				tsc, err := ss.schemaOf(ctx, &sqlq.Statement{Table: sqlq.Ident{Name: name, Quoted: true}, Star: true})
				if err != nil && ss.svc.shards.sharded[name] != nil {
					continue // a sharded dataset none of whose shards is held here: no schema to give
				}
				if err != nil {
					return nil, nil, sqlStatus(err)
				}
				row = append(row, flight.SerializeSchema(tsc, ss.svc.mem))
			}
			rows = append(rows, row)
		}
	}
	return ss.oneBatch(sc, rows)
}

func (ss *sqlServer) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return ss.metaInfo(desc, schema_ref.TableTypes), nil
}

func (ss *sqlServer) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	return ss.oneBatch(schema_ref.TableTypes, [][]any{{"TABLE"}})
}

func matchCatalog(c *string) bool { return c == nil || *c == "" || *c == sqlCatalog }

// likeMatch matches s against a catalog filter pattern (SQL LIKE: % any
// run, _ one character); nil matches everything.
func likeMatch(pat *string, s string) bool {
	if pat == nil {
		return true
	}
	return like(*pat, s)
}

func like(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '%':
			for i := len(s); i >= 0; i-- {
				if like(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '_':
			if s == "" {
				return false
			}
			p, s = p[1:], s[1:]
		default:
			if s == "" || p[0] != s[0] {
				return false
			}
			p, s = p[1:], s[1:]
		}
	}
	return s == ""
}
