package serve

// Flight SQL over sharded datasets (docs/FLIGHT.md "Sharded datasets").
//
// A statement whose table is a sharded dataset PET answers GetFlightInfo
// as a plain Flight ticket does: one endpoint per shard the statement
// touches, in shard order, each with the shard's live locations and a
// statement ticket whose handle carries "shard": i. DoGet of such a ticket
// runs the statement on local shard i (a "series_id IN" list narrowed to
// the ids that live there). The rows of each endpoint are counted where
// the shard is: locally, or by asking its servers GetFlightInfo of the
// endpoint's ticket, which a server answers from its own shards only.
//
// An aggregate statement keeps one endpoint: its DoGet asks every shard
// for its totals (locally, or DoGet of the shard's ticket at its live
// locations in order) and answers their combination (counts add up, the
// shards' series being disjoint; min and max of the non-null periods).

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	pb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sqlq"
)

// shardStatementTicket decodes cmd as the statement ticket of one shard's
// endpoint (what a server counting a remote shard sends as a
// GetFlightInfo command).
func shardStatementTicket(cmd []byte) (handle, bool) {
	a, ok := sqlCommand(cmd)
	if !ok || a.TypeUrl != sqlTypePrefix+"TicketStatementQuery" {
		return handle{}, false
	}
	var t pb.TicketStatementQuery
	if a.UnmarshalTo(&t) != nil {
		return handle{}, false
	}
	h, err := decodeHandle(t.GetStatementHandle())
	if err != nil || h.Shard == nil {
		return handle{}, false
	}
	return h, true
}

// shardInfo is GetFlightInfo of one shard's statement ticket: answered
// from the shards held here only.
func (ss *sqlServer) shardInfo(ctx context.Context, h handle, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return ss.flightInfo(ctx, h, desc)
}

// sqlParts are the shards a bound statement touches, in order: those of
// its series ids, or every shard.
func sqlParts(sd *shardedDataset, q *sqlq.Query) []int {
	if q.Request.Select.Kind != query.ByIDs {
		out := make([]int, sd.m.Count)
		for i := range out {
			out[i] = i
		}
		return out
	}
	seen := map[int]bool{}
	var out []int
	for _, id := range q.Request.Select.IDs {
		if i := sd.m.Of(id); !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

// refuseVintage: a sharded dataset has no vintages of its own.
func refuseVintage(sd *shardedDataset, q *sqlq.Query) error {
	if q.Vintage == 0 {
		return nil
	}
	return invalid("sql: FOR VERSION AS OF reads one dataset's vintage; the shards of %q have their own: name a shard's dataset (%s … %s)",
		sd.name, shard.DirName(sd.name, 0), shard.DirName(sd.name, sd.m.Count-1))
}

// acquireShard is the view of the local shard a statement on a sharded
// dataset reads: the handle's shard, or without one the only shard the
// statement touches. A series list is narrowed to the shard's ids.
func (ss *sqlServer) acquireShard(sd *shardedDataset, name string, h handle, q *sqlq.Query) (*served.View, error) {
	if sd == nil {
		return nil, invalid("dataset %q is not sharded: a statement ticket's \"shard\" is for the endpoints of a sharded dataset", name)
	}
	if err := refuseVintage(sd, q); err != nil {
		return nil, err
	}
	var i int
	if h.Shard != nil {
		if i = *h.Shard; i >= sd.m.Count {
			return nil, invalid("dataset %q has %d shards (0 to %d); the statement ticket's \"shard\" is %d", sd.name, sd.m.Count, sd.m.Count-1, i)
		}
	} else {
		parts := sqlParts(sd, q)
		if len(parts) != 1 {
			return nil, errf(codes.FailedPrecondition, "dataset %q is split into %d shards and this statement touches %d of them: call GetFlightInfo with it and DoGet each endpoint's ticket",
				sd.name, sd.m.Count, len(parts))
		}
		i = parts[0]
	}
	if h.Limit > 0 && (q.Request.Limit == 0 || h.Limit < q.Request.Limit) {
		q.Request.Limit = h.Limit
	}
	if sel := &q.Request.Select; sel.Kind == query.ByIDs {
		var ids []string
		for _, id := range sel.IDs {
			if sd.m.Of(id) == i {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil, invalid("no series the statement lists lives in shard %d of dataset %q", i, sd.name)
		}
		sel.IDs = ids
	}
	d := sd.local[i]
	if d == nil {
		return nil, ss.svc.notServedHere(sd, i)
	}
	return d.Acquire()
}

// withShard is h scoped to shard i.
func withShard(h handle, i int) handle {
	h.Shard = &i
	return h
}

// shardedInfo is GetFlightInfo of a statement on a sharded dataset.
func (ss *sqlServer) shardedInfo(ctx context.Context, sd *shardedDataset, h handle, q *sqlq.Query, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if err := refuseVintage(sd, q); err != nil {
		return nil, err
	}
	meta, _ := json.Marshal(map[string]any{"dataset": sd.name, "shards": sd.m.Count})
	if len(q.Aggs) > 0 {
		tkt, err := statementTicket(h)
		if err != nil {
			return nil, err
		}
		return &flight.FlightInfo{
			Schema:           flight.SerializeSchema(aggSchema(query.Info{Dataset: sd.name}, q.Aggs), ss.svc.mem),
			FlightDescriptor: desc,
			Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
			TotalRecords:     1,
			TotalBytes:       -1,
			Ordered:          true,
			AppMetadata:      meta,
		}, nil
	}
	parts := sqlParts(sd, q)
	// every shard is asked at once: servers that are down cost one
	// timeout, not one each
	infos := make([]*flight.FlightInfo, len(parts))
	errs := make([]error, len(parts))
	locs := make([][]string, len(parts))
	var wg sync.WaitGroup
	for k, i := range parts {
		hi := withShard(h, i)
		locs[k] = ss.svc.locations(sd, i)
		if sd.local[i] == nil && len(locs[k]) == 0 {
			return nil, errf(codes.FailedPrecondition, "dataset %q shard %d is not served here and the cluster file names no location for it", sd.name, i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sd.local[i] != nil {
				infos[k], errs[k] = ss.flightInfo(ctx, hi, nil)
				return
			}
			tkt, err := statementTicket(hi)
			if err != nil {
				errs[k] = err
				return
			}
			infos[k], errs[k] = ss.svc.remoteInfo(ctx, locs[k], tkt)
		}()
	}
	wg.Wait()
	info := &flight.FlightInfo{FlightDescriptor: desc, TotalBytes: -1, Ordered: len(parts) <= 1, AppMetadata: meta}
	var schema []byte
	total := int64(0)
	for k, i := range parts {
		tkt, err := statementTicket(withShard(h, i))
		if err != nil {
			return nil, err
		}
		ep := &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: tkt}}
		for _, l := range locs[k] {
			ep.Location = append(ep.Location, &flight.Location{Uri: l})
		}
		sub, err := infos[k], errs[k]
		switch {
		case err != nil && !errors.Is(err, errRemoteDown):
			return nil, err
		case err != nil:
			ss.svc.log.Warn("shard count unknown", "dataset", sd.name, "shard", i, "err", err)
			ep.AppMetadata, _ = json.Marshal(endpointMeta{Dataset: sd.name, Shard: i, Rows: -1})
			total = -1
		default:
			if schema == nil {
				schema = sub.Schema
			}
			ep.AppMetadata = sub.AppMetadata // the shard's endpointMeta (flightInfo of a handle with a shard)
			if total >= 0 && sub.TotalRecords >= 0 {
				total += sub.TotalRecords
			} else {
				total = -1
			}
		}
		info.Endpoint = append(info.Endpoint, ep)
	}
	if schema == nil {
		return nil, errf(codes.Unavailable, "dataset %q: no shard the statement touches is served here and none of their servers answered", sd.name)
	}
	info.Schema, info.TotalRecords = schema, total
	if n := q.Request.Limit; n > 0 && total > n {
		if err := shareLimit(info, h, parts, n); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// shareLimit makes the endpoints of a statement with LIMIT n (whose
// shards are all counted, together more than n rows) return n rows in
// all: the first rows of the first shards, in shard order. An endpoint
// left with fewer rows than its shard has gets a ticket with that share;
// one left with none is dropped.
func shareLimit(info *flight.FlightInfo, h handle, parts []int, n int64) error {
	kept := info.Endpoint[:0]
	left := n
	for k, ep := range info.Endpoint {
		var m endpointMeta
		if err := json.Unmarshal(ep.AppMetadata, &m); err != nil {
			return status.Errorf(codes.Internal, "shard %d's count: %v", parts[k], err)
		}
		take := min(m.Rows, left)
		if take == 0 {
			continue
		}
		left -= take
		if take < m.Rows {
			hk := withShard(h, parts[k])
			hk.Limit = take
			tkt, err := statementTicket(hk)
			if err != nil {
				return err
			}
			m.Rows = take
			ep.Ticket = &flight.Ticket{Ticket: tkt}
			ep.AppMetadata, _ = json.Marshal(m)
		}
		kept = append(kept, ep)
	}
	info.Endpoint, info.TotalRecords = kept, n
	info.Ordered = len(kept) <= 1
	return nil
}

// sendShardedTotals answers an aggregate statement on a sharded dataset:
// every shard's totals, combined.
func (ss *sqlServer) sendShardedTotals(ctx context.Context, sd *shardedDataset, h handle, q *sqlq.Query, stream flight.FlightService_DoGetServer) error {
	if err := refuseVintage(sd, q); err != nil {
		return err
	}
	parts := sqlParts(sd, q)
	vals := make([][]aggValue, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for k, i := range parts {
		hi := withShard(h, i)
		locs := ss.svc.locations(sd, i)
		if sd.local[i] == nil && len(locs) == 0 {
			return errf(codes.FailedPrecondition, "dataset %q shard %d is not served here and the cluster file names no location for it", sd.name, i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sd.local[i] != nil {
				vals[k], errs[k] = ss.localTotals(ctx, hi)
			} else {
				vals[k], errs[k] = ss.remoteTotals(ctx, locs, hi, len(q.Aggs))
			}
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if errors.Is(err, errRemoteDown) {
			return errf(codes.Unavailable, "dataset %q shard %d: %v", sd.name, parts[k], err)
		}
		if err != nil {
			return err
		}
	}
	return ss.sendAggRow(aggSchema(query.Info{Dataset: sd.name}, q.Aggs), combineAggs(q.Aggs, vals), stream)
}

// localTotals are the aggregates of h (scoped to a shard held here).
func (ss *sqlServer) localTotals(ctx context.Context, h handle) ([]aggValue, error) {
	name, q, err := ss.bindHandle(ctx, h)
	if err != nil {
		return nil, err
	}
	v, err := ss.openBound(name, h, q)
	if err != nil {
		return nil, err
	}
	defer v.Release()
	t, err := query.Aggregate(v.Reader(), &q.Request, ss.limits())
	if err != nil {
		return nil, err
	}
	return aggValues(t, q.Aggs), nil
}

// remoteTotals reads the one-row answer of h (scoped to a remote shard)
// from its locations in order, passing on the caller's authorization.
func (ss *sqlServer) remoteTotals(ctx context.Context, locs []string, h handle, n int) ([]aggValue, error) {
	tkt, err := statementTicket(h)
	if err != nil {
		return nil, err
	}
	return askLocations(ctx, ss.svc, locs, func(ctx context.Context, c flight.Client, last bool) ([]aggValue, error) {
		return readTotals(ctx, c, tkt, n, last)
	})
}

// readTotals is one DoGet of an aggregate's ticket: n values in one row.
// wait: wait for the connection (remoteInfo says when).
func readTotals(ctx context.Context, c flight.Client, tkt []byte, n int, wait bool) ([]aggValue, error) {
	cctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	stream, err := c.DoGet(cctx, &flight.Ticket{Ticket: tkt}, grpc.WaitForReady(wait))
	if err != nil {
		return nil, err
	}
	r, err := flight.NewRecordReader(stream)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	var out []aggValue
	for r.Next() {
		rec := r.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		if out != nil || rec.NumRows() != 1 || int(rec.NumCols()) != n {
			return nil, status.Errorf(codes.Internal, "a shard's totals: want one row of %d columns, got %d rows of %d", n, rec.NumRows(), rec.NumCols())
		}
		out = make([]aggValue, n)
		for j, col := range rec.Columns() {
			switch a := col.(type) {
			case *array.Int64:
				out[j].n = a.Value(0)
			case *array.Date32:
				out[j].null = a.IsNull(0)
				if !out[j].null {
					out[j].n = int64(a.Value(0))
				}
			default:
				return nil, status.Errorf(codes.Internal, "a shard's totals: column %d has type %s", j, col.DataType())
			}
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, status.Error(codes.Internal, "a shard's totals: no row")
	}
	return out, nil
}

// combineAggs combines the shards' answers: counts add up (a series lives
// in one shard), min and max are taken over the non-null periods.
func combineAggs(aggs []sqlq.Agg, parts [][]aggValue) []aggValue {
	out := make([]aggValue, len(aggs))
	for i, a := range aggs {
		if a.Func == sqlq.AggCount {
			for _, p := range parts {
				out[i].n += p[i].n
			}
			continue
		}
		out[i].null = true
		for _, p := range parts {
			v := p[i]
			if v.null {
				continue
			}
			if out[i].null || (a.Func == sqlq.AggMin && v.n < out[i].n) || (a.Func == sqlq.AggMax && v.n > out[i].n) {
				out[i] = v
			}
		}
	}
	return out
}

// schemaShard is the view of a local shard of sd, for the schema of a
// statement on the whole (every shard's is the same).
func (s *Service) schemaShard(sd *shardedDataset) (*served.View, error) {
	for i := 0; i < sd.m.Count; i++ {
		if d := sd.local[i]; d != nil {
			return d.Acquire()
		}
	}
	return nil, errf(codes.FailedPrecondition, "dataset %q: this server holds none of its shards, so it cannot say a statement's schema without running it: prepare the statement on a server holding a shard, or execute it (GetFlightInfo)", sd.name)
}
