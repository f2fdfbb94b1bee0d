package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// Sharded datasets (docs/FLIGHT.md "Sharded datasets").
//
// A sharded dataset PET is N ordinary datasets PET.shard-0000 … beside a
// directory PET holding the shard map. The shards a server holds are
// served as datasets of their own (so reload, status, DoPut and Flight SQL
// work on each unchanged); on top of them, the name PET answers
// GetFlightInfo with one endpoint per shard the query touches, each with a
// ticket scoped by "shard" and the locations the cluster file gives, and
// DoGet of such a ticket runs it on the local shard or says where the
// shard lives.
//
// Row counts: a local shard is counted exactly by planning the query on
// it; a remote one by asking its servers (GetFlightInfo of the shard's
// ticket, which a server answers from its own shards only, so a wrong
// cluster file cannot make servers ask each other in a loop). When no
// server of a remote shard answers, its count is unknown (-1 in the
// endpoint's app_metadata, and FlightInfo.total_records is -1).

// shardedDataset is one sharded dataset under the root.
type shardedDataset struct {
	name  string
	m     *shard.Map
	local map[int]*served.Dataset // the shards this server holds
}

// remoteTimeout bounds one GetFlightInfo to another shard server. A call
// to a shard's last location waits for the connection (WaitForReady)
// rather than failing at once while gRPC backs off from a refused dial, so
// a server that starts a moment after this one is counted; the reconnect
// backoff is capped at a second for the same reason. A call to any other
// location fails at once on a refused dial, and the next one is asked.
const (
	remoteTimeout    = 5 * time.Second
	remoteMaxBackoff = time.Second
)

// shardState is the Service's sharding state, set once by Open.
type shardState struct {
	sharded map[string]*shardedDataset
	cluster *shard.Cluster

	clientsMu sync.Mutex
	clients   map[string]flight.Client // by location URI

	checker *locationChecker // nil: no cluster file, or checks off
}

// startLocationChecks starts the health checks of the cluster file's
// locations (locations.go), when there are any.
func (s *Service) startLocationChecks(opt Options) {
	st := &s.shards
	if st.cluster == nil || len(st.sharded) == 0 || opt.LocationCheckInterval < 0 {
		return
	}
	interval, timeout := opt.LocationCheckInterval, opt.LocationCheckTimeout
	if interval == 0 {
		interval = DefaultLocationCheckInterval
	}
	if timeout <= 0 {
		timeout = DefaultLocationCheckTimeout
	}
	lc := newLocationChecker(st.sharded, st.cluster, interval, timeout)
	if len(lc.targets) == 0 {
		return
	}
	lc.log = s.log
	st.checker = lc
	if m := s.metrics; m != nil {
		m.Registry.MustRegister(locationCollector{lc})
	}
	lc.start()
}

// locations are the locations of shard i of sd to offer: the cluster
// file's, in its order, without those found down (all when every one is).
func (s *Service) locations(sd *shardedDataset, i int) []string {
	return s.shards.checker.live(sd.name, i, s.shards.cluster.For(sd.name, i))
}

// findShardMaps reads the shard map of every directory under root that has
// one, and returns the directories Open must not open as datasets: the
// map holders themselves, and shard directories not in opt.Shards.
func (s *Service) findShardMaps(root string, ents []os.DirEntry, opt Options) (map[string]bool, error) {
	s.shards.sharded = map[string]*shardedDataset{}
	s.shards.cluster = opt.Cluster
	s.shards.clients = map[string]flight.Client{}
	skip := map[string]bool{}
	listed := map[int]bool{}
	for _, i := range opt.Shards {
		listed[i] = true
	}
	for _, ent := range ents {
		dir := filepath.Join(root, ent.Name())
		m, err := shard.ReadMap(dir)
		if errors.Is(err, shard.ErrNoMap) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("serve: %w", err)
		}
		skip[ent.Name()] = true
		s.shards.sharded[m.Dataset] = &shardedDataset{name: m.Dataset, m: m, local: map[int]*served.Dataset{}}
		for _, r := range m.Shards {
			if opt.Shards != nil && !listed[r.Index] {
				skip[r.Dataset] = true
			}
		}
	}
	if opt.Shards != nil && len(s.shards.sharded) == 0 {
		return nil, fmt.Errorf("serve: --shards given, but no directory under %s holds a shard map (%s)", root, shard.MapFile)
	}
	return skip, nil
}

// linkShards attaches the opened shard datasets to their sharded dataset,
// after Open opened them. Every shard listed in opt.Shards must be open: a
// server never starts with a shard it was told to serve silently missing.
func (s *Service) linkShards(opt Options) error {
	names := make([]string, 0, len(s.shards.sharded))
	for n := range s.shards.sharded {
		names = append(names, n)
	}
	sort.Strings(names)
	used := map[int]bool{}
	for _, n := range names {
		sd := s.shards.sharded[n]
		for _, r := range sd.m.Shards {
			if d, ok := s.datasets[r.Dataset]; ok {
				sd.local[r.Index] = d
			}
		}
		for _, i := range opt.Shards {
			if i >= sd.m.Count {
				continue
			}
			used[i] = true
			if sd.local[i] == nil {
				return fmt.Errorf("serve: --shards lists shard %d of %s, but %s is not a published dataset under %s",
					i, n, shard.DirName(n, i), s.root)
			}
		}
		for i := 0; i < sd.m.Count; i++ {
			if sd.local[i] == nil && len(s.shards.cluster.For(n, i)) == 0 {
				s.log.Warn("shard neither served here nor located by the cluster file", "dataset", n, "shard", i)
			}
		}
		s.log.Info("sharded dataset", "dataset", n, "shards", sd.m.Count, "local", sd.localList())
	}
	for _, i := range opt.Shards {
		if !used[i] {
			return fmt.Errorf("serve: --shards lists shard %d, but no sharded dataset under %s has that many shards", i, s.root)
		}
	}
	return nil
}

func (sd *shardedDataset) localList() string {
	var l []string
	for i := 0; i < sd.m.Count; i++ {
		if sd.local[i] != nil {
			l = append(l, strconv.Itoa(i))
		}
	}
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ",")
}

// wholeQuery is the query of a whole dataset (its ticketFor): every
// series, no period bounds.
func wholeQuery(name string) *Query {
	return &Query{Dataset: name, HasPrefix: true, From: math.MinInt32, To: math.MaxInt32}
}

// localNames are the dataset names of the shards held here, in order.
func (sd *shardedDataset) localNames() []string {
	var out []string
	for i := 0; i < sd.m.Count; i++ {
		if d := sd.local[i]; d != nil {
			out = append(out, d.Name())
		}
	}
	return out
}

// wholeNotAllowed is the answer to a call that acts on one dataset (DoPut,
// compact, Flight SQL) naming a sharded dataset as a whole.
func (s *Service) wholeNotAllowed(name string) error {
	sd := s.shards.sharded[name]
	return errf(codes.FailedPrecondition, "dataset %q is split into %d shards: this call takes one shard dataset (%s … %s; series id x lives in shard xxhash64(x) mod %d); queries of the whole go through GetFlightInfo",
		name, sd.m.Count, shard.DirName(name, 0), shard.DirName(name, sd.m.Count-1), sd.m.Count)
}

// shardPart is one shard a query touches, with the ids that live there
// (nil for a prefix, category or whole-dataset selector).
type shardPart struct {
	index  int
	series []string
}

// parts are the shards q touches, in shard order. A shard-scoped ticket
// touches its shard only, and every id it lists must live there.
func (sd *shardedDataset) parts(q *Query) ([]shardPart, error) {
	n := sd.m.Count
	if q.HasShard {
		if q.Shard >= n {
			return nil, invalid("dataset %q has %d shards (0 to %d); \"shard\" is %d", sd.name, n, n-1, q.Shard)
		}
		for _, id := range q.Series {
			if i := sd.m.Of(id); i != q.Shard {
				return nil, invalid("series %q lives in shard %d of dataset %q, not in shard %d", truncate(id, 128), i, sd.name, q.Shard)
			}
		}
		return []shardPart{{index: q.Shard, series: q.Series}}, nil
	}
	if q.HasPrefix || q.HasCategory {
		ps := make([]shardPart, n)
		for i := range ps {
			ps[i].index = i
		}
		return ps, nil
	}
	by := map[int][]string{}
	for _, id := range q.Series {
		i := sd.m.Of(id)
		by[i] = append(by[i], id)
	}
	ps := make([]shardPart, 0, len(by))
	for i, ids := range by {
		ps = append(ps, shardPart{index: i, series: ids})
	}
	sort.Slice(ps, func(a, b int) bool { return ps[a].index < ps[b].index })
	return ps, nil
}

// shardTicket is the ticket of one part: raw (a valid ticket) with "shard"
// set and, for an id selector, "series" narrowed to the part's ids.
func shardTicket(raw []byte, p shardPart) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, invalid("not a JSON object: %s", jsonMsg(err)) // ParseTicket accepted it, so never
	}
	fields["shard"], _ = json.Marshal(p.index)
	if p.series != nil {
		fields["series"], _ = json.Marshal(p.series)
	}
	return json.Marshal(fields)
}

// notServedHere is DoGet's answer for a shard another server holds.
func (s *Service) notServedHere(sd *shardedDataset, i int) error {
	locs := s.shards.cluster.For(sd.name, i)
	where := "no location is known for it (add it to the --cluster file)"
	if len(locs) > 0 {
		where = "it is served at " + strings.Join(locs, ", ")
	}
	return errf(codes.FailedPrecondition, "dataset %q shard %d is not served here (this server holds shards: %s); %s",
		sd.name, i, sd.localList(), where)
}

// isShardQuery reports whether q must take the sharded path.
func (s *Service) isShardQuery(q *Query) bool {
	return q.HasShard || s.shards.sharded[q.Dataset] != nil
}

// shardedDoGet runs a ticket of a sharded dataset: one shard, here.
func (s *Service) shardedDoGet(q *Query, stream flight.FlightService_DoGetServer) error {
	sd := s.shards.sharded[q.Dataset]
	if sd == nil {
		return invalid("dataset %q is not sharded: leave out \"shard\"", q.Dataset)
	}
	ps, err := sd.parts(q)
	if err != nil {
		return err
	}
	if len(ps) != 1 {
		return errf(codes.FailedPrecondition, "dataset %q is split into %d shards and this ticket touches %d of them: call GetFlightInfo with it and DoGet each endpoint's ticket",
			sd.name, sd.m.Count, len(ps))
	}
	d := sd.local[ps[0].index]
	if d == nil {
		return s.notServedHere(sd, ps[0].index)
	}
	v, err := d.Acquire()
	if err != nil {
		return err
	}
	defer v.Release()
	p, err := s.plan(v, q)
	if err != nil {
		return err
	}
	return s.stream(v, p, stream)
}

// endpointMeta is each endpoint's app_metadata (docs/FLIGHT.md).
type endpointMeta struct {
	Dataset    string `json:"dataset"`
	Shard      int    `json:"shard"`
	Rows       int64  `json:"rows"`                  // -1: unknown (no server of the shard answered)
	SnapshotID uint64 `json:"snapshot_id,omitempty"` // the shard's snapshot, when counted
}

// shardedInfo is GetFlightInfo of a sharded dataset: raw is the ticket
// (for a path descriptor, the whole-dataset ticket).
func (s *Service) shardedInfo(ctx context.Context, q *Query, raw []byte, desc *flight.FlightDescriptor) (*flight.FlightInfo, *arrow.Schema, error) {
	sd := s.shards.sharded[q.Dataset]
	if sd == nil {
		return nil, nil, invalid("dataset %q is not sharded: leave out \"shard\"", q.Dataset)
	}
	ps, err := sd.parts(q)
	if err != nil {
		return nil, nil, err
	}
	// Remote shards are asked all at once, so that servers that are down
	// cost one timeout, not one each.
	tickets := make([][]byte, len(ps))
	remote := make([]*flight.FlightInfo, len(ps))
	remoteErr := make([]error, len(ps))
	var wg sync.WaitGroup
	for k, part := range ps {
		if tickets[k], err = shardTicket(raw, part); err != nil {
			return nil, nil, err
		}
		locs := s.locations(sd, part.index)
		if sd.local[part.index] != nil || q.HasShard || len(locs) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			remote[k], remoteErr[k] = s.remoteInfo(ctx, locs, tickets[k])
		}()
	}
	wg.Wait()
	var schema *arrow.Schema
	total := int64(0)
	info := &flight.FlightInfo{FlightDescriptor: desc, TotalBytes: -1, Ordered: len(ps) <= 1}
	for k, part := range ps {
		ticket := tickets[k]
		locs := s.locations(sd, part.index)
		meta := endpointMeta{Dataset: sd.name, Shard: part.index, Rows: -1}
		if d := sd.local[part.index]; d != nil {
			pq := *q
			pq.Series, pq.Shard, pq.HasShard = part.series, part.index, true
			sc, rows, id, err := s.countLocal(d, &pq)
			if err != nil {
				return nil, nil, err
			}
			if schema == nil {
				schema = sc
			}
			meta.Rows, meta.SnapshotID = rows, id
		} else if q.HasShard {
			// A shard-scoped ticket is answered from local shards only.
			return nil, nil, s.notServedHere(sd, part.index)
		} else if len(locs) == 0 {
			return nil, nil, errf(codes.FailedPrecondition, "dataset %q shard %d is not served here and the cluster file names no location for it", sd.name, part.index)
		} else {
			ri, err := remote[k], remoteErr[k]
			if err != nil && !errors.Is(err, errRemoteDown) {
				return nil, nil, err
			}
			if err != nil {
				s.log.Warn("shard count unknown", "dataset", sd.name, "shard", part.index, "err", err)
			} else {
				meta.Rows = ri.TotalRecords
				var rm endpointMeta
				if len(ri.Endpoint) == 1 && json.Unmarshal(ri.Endpoint[0].AppMetadata, &rm) == nil {
					meta.SnapshotID = rm.SnapshotID
				}
				if schema == nil {
					if sc, err := flight.DeserializeSchema(ri.Schema, s.mem); err == nil {
						schema = sc
					}
				}
			}
		}
		if meta.Rows < 0 || total < 0 {
			total = -1
		} else {
			total += meta.Rows
		}
		mb, _ := json.Marshal(meta)
		ep := &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: ticket}, AppMetadata: mb}
		for _, l := range locs {
			ep.Location = append(ep.Location, &flight.Location{Uri: l})
		}
		info.Endpoint = append(info.Endpoint, ep)
	}
	if schema == nil {
		return nil, nil, errf(codes.Unavailable, "dataset %q: no shard the query touches is served here and none of their servers answered", sd.name)
	}
	info.Schema = flight.SerializeSchema(schema, s.mem)
	info.TotalRecords = total
	b, _ := json.Marshal(map[string]any{"dataset": sd.name, "shards": sd.m.Count})
	info.AppMetadata = b
	return info, schema, nil
}

// countLocal plans q on a local shard: its schema, exact rows, snapshot.
func (s *Service) countLocal(d *served.Dataset, q *Query) (*arrow.Schema, int64, uint64, error) {
	v, err := d.Acquire()
	if err != nil {
		return nil, 0, 0, err
	}
	defer v.Release()
	p, err := s.plan(v, q)
	if err != nil {
		return nil, 0, 0, err
	}
	return p.Schema(), p.Rows(), v.ID(), nil
}

// errRemoteDown marks a remote count that failed in transport (no server
// of the shard answered), as opposed to an answer such as NotFound.
var errRemoteDown = errors.New("no server of the shard answered")

// remoteInfo asks the servers of a remote shard, in order, for the
// FlightInfo of its ticket, passing on the caller's authorization (see
// askLocations).
func (s *Service) remoteInfo(ctx context.Context, locs []string, ticket []byte) (*flight.FlightInfo, error) {
	return askLocations(ctx, s, locs, func(ctx context.Context, c flight.Client, last bool) (*flight.FlightInfo, error) {
		cctx, cancel := context.WithTimeout(ctx, remoteTimeout)
		defer cancel()
		return c.GetFlightInfo(cctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: ticket}, grpc.WaitForReady(last))
	})
}

// askLocations makes call on the servers of a remote shard, in order,
// with the caller's authorization passed on; last is true for the last
// location (which may wait for its connection). An answer that is an
// error about the query (NotFound, InvalidArgument, …) is returned as it
// is, named by its location; transport failures try the next location,
// and when every one failed the error wraps errRemoteDown.
func askLocations[T any](ctx context.Context, s *Service, locs []string, call func(ctx context.Context, c flight.Client, last bool) (T, error)) (T, error) {
	var zero T
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if a := md.Get("authorization"); len(a) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", a[0])
		}
	}
	var errs []error
	for k, loc := range locs {
		c, err := s.remoteClient(loc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := call(ctx, c, k == len(locs)-1)
		if err == nil {
			return v, nil
		}
		if tryNextLocation(err) {
			errs = append(errs, fmt.Errorf("%s: %w", loc, err))
			continue
		}
		st, _ := status.FromError(err)
		return zero, status.Error(st.Code(), truncate(fmt.Sprintf("%s: %s", loc, st.Message()), 1024))
	}
	return zero, fmt.Errorf("%w: %w", errRemoteDown, errors.Join(errs...))
}

// tryNextLocation reports whether a call to one location of a shard
// failed in a way the next location may not: in transport, or because
// that server does not hold the shard (a stale cluster file).
func tryNextLocation(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal,
		codes.FailedPrecondition:
		return true
	}
	return false
}

// remoteClient is the cached Flight client of a location.
func (s *Service) remoteClient(loc string) (flight.Client, error) {
	st := &s.shards
	st.clientsMu.Lock()
	defer st.clientsMu.Unlock()
	if c, ok := st.clients[loc]; ok {
		return c, nil
	}
	host, opts, err := locationDial(loc, remoteTimeout)
	if err != nil {
		return nil, err
	}
	c, err := flight.NewClientWithMiddleware(host, nil, nil, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", loc, err)
	}
	st.clients[loc] = c
	return c, nil
}

// closeRemotes closes the clients of remote shard servers.
func (s *Service) closeRemotes() {
	st := &s.shards
	st.clientsMu.Lock()
	defer st.clientsMu.Unlock()
	for loc, c := range st.clients {
		c.Close()
		delete(st.clients, loc)
	}
}

// listSharded sends ListFlights' entries of the sharded datasets: one
// FlightInfo each, with an endpoint per shard.
func (s *Service) listSharded(ctx context.Context, prefix string, stream flight.FlightService_ListFlightsServer) error {
	names := make([]string, 0, len(s.shards.sharded))
	g := grantOf(ctx)
	for n := range s.shards.sharded {
		if strings.HasPrefix(n, prefix) && (g == nil || g.Permits(n)) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		info, _, err := s.shardedInfo(ctx, wholeQuery(n), ticketFor(n), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{n}})
		if err != nil {
			s.log.Warn("list sharded dataset", "dataset", n, "err", err)
			continue
		}
		if err := stream.Send(info); err != nil {
			return err
		}
	}
	return nil
}
