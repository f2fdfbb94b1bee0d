package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

var (
	shardOnce sync.Once
	shardRoot string
)

// shardedRoot is a root with ALL (120 series, unsharded) and PET, the same
// lake in 3 shards, built once and only read.
func shardedRoot(t *testing.T) string {
	t.Helper()
	shardOnce.Do(func() {
		root(t) // makes fixtureDir, which TestMain removes
		r := filepath.Join(fixtureDir, "sharded-root")
		lake, _ := testsnap.Sample(t, r, "ALL", 120, 5, nil)
		for i := 0; i < 3; i++ {
			testsnap.Build(t, lake, filepath.Join(r, shard.DirName("PET", i)), func(o *sortwrite.Options) { o.Shard = shard.Spec{Index: i, Count: 3} })
		}
		if _, err := shard.Ensure(filepath.Join(r, "PET"), 3, ""); err != nil {
			t.Fatal(err)
		}
		shardRoot = r
	})
	if shardRoot == "" {
		t.Fatal("sharded fixture failed earlier")
	}
	return shardRoot
}

// cluster starts one server per shard of PET (shards 1 and 2 first, then
// shard 0 knowing all three) and returns their clients and locations.
func cluster(t *testing.T, extra map[int]string) ([]flight.Client, []string) {
	root := shardedRoot(t)
	locs := make([]string, 3)
	clients := make([]flight.Client, 3)
	for _, i := range []int{1, 2} {
		srv := startServer(t, Config{Root: root, Options: Options{Shards: []int{i}}})
		clients[i], locs[i] = dial(t, srv), "grpc://"+srv.FlightAddr().String()
	}
	cl := &shard.Cluster{Shards: shard.Locations{}}
	for i := range locs {
		cl.Shards[i] = []string{locs[i]}
		if l, ok := extra[i]; ok {
			cl.Shards[i] = []string{l}
		}
	}
	srv := startServer(t, Config{Root: root, Options: Options{Shards: []int{0}, Cluster: cl}})
	clients[0], locs[0] = dial(t, srv), "grpc://"+srv.FlightAddr().String()
	cl.Shards[0] = []string{locs[0]} // known once it listens; only shard 0's server reads it
	return clients, locs
}

type rowKey struct {
	id     string
	period int32
}

func keys(r *result) []rowKey {
	out := make([]rowKey, len(r.ids))
	for i := range r.ids {
		out[i] = rowKey{r.ids[i], r.periods[i]}
	}
	slices.SortFunc(out, func(a, b rowKey) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return int(a.period - b.period)
	})
	return out
}

// follow reads every endpoint of info at its location (or on c when it
// has none) and returns all rows.
func follow(t *testing.T, c flight.Client, byLoc map[string]flight.Client, info *flight.FlightInfo) []rowKey {
	t.Helper()
	var all []rowKey
	for _, ep := range info.Endpoint {
		cc := c
		if len(ep.Location) > 0 {
			cc = byLoc[ep.Location[0].Uri]
		}
		r, err := get(context.Background(), cc, ep.Ticket.Ticket)
		if err != nil {
			t.Fatalf("DoGet %s: %v", ep.Ticket.Ticket, err)
		}
		all = append(all, keys(r)...)
	}
	slices.SortFunc(all, func(a, b rowKey) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return int(a.period - b.period)
	})
	return all
}

func TestShardedEndpointsMatchUnsharded(t *testing.T) {
	clients, locs := cluster(t, nil)
	byLoc := map[string]flight.Client{}
	for i := range locs {
		byLoc[locs[i]] = clients[i]
	}
	ctx := context.Background()
	whole, err := get(ctx, clients[1], ticket(map[string]any{"dataset": "ALL", "prefix": ""}))
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Compact(slices.Clone(whole.ids))
	picked := []string{ids[0], ids[7], ids[33], ids[90]}
	for _, tc := range []struct {
		name  string
		q     map[string]any
		ref   map[string]any
		parts int
	}{
		{"whole", map[string]any{"dataset": "PET", "prefix": ""}, map[string]any{"dataset": "ALL", "prefix": ""}, 3},
		{"range", map[string]any{"dataset": "PET", "prefix": "", "start": "2018", "end": "2019-06"}, map[string]any{"dataset": "ALL", "prefix": "", "start": "2018", "end": "2019-06"}, 3},
		{"one series", map[string]any{"dataset": "PET", "series": picked[:1]}, map[string]any{"dataset": "ALL", "series": picked[:1]}, 1},
		{"series", map[string]any{"dataset": "PET", "series": picked}, map[string]any{"dataset": "ALL", "series": picked}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := get(ctx, clients[0], ticket(tc.ref))
			if err != nil {
				t.Fatal(err)
			}
			for entry, c := range clients {
				info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: ticket(tc.q)})
				if entry != 0 {
					// servers 1 and 2 have no cluster file: they can count only their own shard
					if tc.parts == 1 && shard.Of(picked[0], 3) == entry {
						if err != nil {
							t.Fatalf("server %d: %v", entry, err)
						}
					}
					continue
				}
				if err != nil {
					t.Fatalf("GetFlightInfo: %v", err)
				}
				want := map[int]bool{}
				for _, id := range slices.Compact(slices.Sorted(slices.Values(ref.ids))) {
					want[shard.Of(id, 3)] = true
				}
				if tc.parts > 0 && len(info.Endpoint) != tc.parts || len(info.Endpoint) != len(want) {
					t.Fatalf("%d endpoints, want %d (shards %v)", len(info.Endpoint), len(want), want)
				}
				if info.TotalRecords != int64(len(ref.ids)) {
					t.Errorf("total_records %d, want %d", info.TotalRecords, len(ref.ids))
				}
				var sum int64
				for _, ep := range info.Endpoint {
					var m endpointMeta
					if err := json.Unmarshal(ep.AppMetadata, &m); err != nil || m.Rows < 0 {
						t.Fatalf("endpoint metadata %s: %v", ep.AppMetadata, err)
					}
					if got := ep.Location[0].Uri; got != locs[m.Shard] {
						t.Errorf("shard %d at %s, want %s", m.Shard, got, locs[m.Shard])
					}
					sum += m.Rows
				}
				if sum != info.TotalRecords {
					t.Errorf("endpoint rows add up to %d, total_records %d", sum, info.TotalRecords)
				}
				if got, want := follow(t, c, byLoc, info), keys(ref); !slices.Equal(got, want) {
					t.Errorf("following the endpoints gave %d rows, the unsharded dataset %d", len(got), len(want))
				}
			}
		})
	}
}

func TestShardedErrors(t *testing.T) {
	clients, locs := cluster(t, nil)
	ctx := context.Background()
	whole, err := get(ctx, clients[0], ticket(map[string]any{"dataset": "ALL", "prefix": ""}))
	if err != nil {
		t.Fatal(err)
	}
	var in2 string
	for _, id := range whole.ids {
		if shard.Of(id, 3) == 2 {
			in2 = id
			break
		}
	}
	for _, tc := range []struct {
		name string
		tk   map[string]any
		code codes.Code
		msg  string
	}{
		{"shard elsewhere", map[string]any{"dataset": "PET", "prefix": "", "shard": 1}, codes.FailedPrecondition,
			fmt.Sprintf(`dataset "PET" shard 1 is not served here (this server holds shards: 0); it is served at %s`, locs[1])},
		{"series elsewhere", map[string]any{"dataset": "PET", "series": []string{in2}}, codes.FailedPrecondition, "shard 2 is not served here"},
		{"several shards", map[string]any{"dataset": "PET", "prefix": ""}, codes.FailedPrecondition, "call GetFlightInfo with it"},
		{"no such shard", map[string]any{"dataset": "PET", "prefix": "", "shard": 3}, codes.InvalidArgument, `dataset "PET" has 3 shards (0 to 2); "shard" is 3`},
		{"wrong shard for id", map[string]any{"dataset": "PET", "series": []string{in2}, "shard": 0}, codes.InvalidArgument, "lives in shard 2"},
		{"unsharded", map[string]any{"dataset": "ALL", "prefix": "", "shard": 0}, codes.InvalidArgument, `dataset "ALL" is not sharded`},
		{"negative", map[string]any{"dataset": "PET", "prefix": "", "shard": -1}, codes.InvalidArgument, "shard index"},
		{"not a number", map[string]any{"dataset": "PET", "prefix": "", "shard": "0"}, codes.InvalidArgument, `field "shard" must be a shard index`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := get(ctx, clients[0], ticket(tc.tk))
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("DoGet: %v; want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
	// Calls on one dataset refuse the whole, naming the shards; reload
	// reloads the shards held here.
	stream, err := clients[0].DoAction(ctx, &flight.Action{Type: "compact", Body: []byte("PET")})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "PET.shard-0000 … PET.shard-0002") {
		t.Errorf("compact of the whole: %v", err)
	}
	stream, err = clients[0].DoAction(ctx, &flight.Action{Type: "reload", Body: []byte("PET")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil || !strings.Contains(string(res.Body), `"dataset":"PET.shard-0000"`) || strings.Contains(string(res.Body), "PET.shard-0001") {
		t.Errorf("reload of the whole on server 0: %v %s", err, res.GetBody())
	}
	// A shard-scoped GetFlightInfo is answered from local shards only.
	_, err = clients[1].GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: ticket(map[string]any{"dataset": "PET", "prefix": "", "shard": 2})})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no location is known") {
		t.Errorf("shard-scoped GetFlightInfo elsewhere: %v", err)
	}
}

// A shard whose server does not answer keeps its endpoint, with an
// unknown count, and the FlightInfo's total is unknown.
func TestShardedRemoteDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "grpc://" + l.Addr().String()
	l.Close()
	clients, _ := cluster(t, map[int]string{2: dead})
	info, err := clients[0].GetFlightInfo(context.Background(), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"PET"}})
	if err != nil {
		t.Fatal(err)
	}
	if info.TotalRecords != -1 || len(info.Endpoint) != 3 {
		t.Fatalf("total %d with %d endpoints, want -1 with 3", info.TotalRecords, len(info.Endpoint))
	}
	var m endpointMeta
	json.Unmarshal(info.Endpoint[2].AppMetadata, &m)
	if m.Rows != -1 || info.Endpoint[2].Location[0].Uri != dead {
		t.Errorf("endpoint 2: %+v at %v", m, info.Endpoint[2].Location)
	}
	json.Unmarshal(info.Endpoint[1].AppMetadata, &m)
	if m.Rows <= 0 {
		t.Errorf("endpoint 1 (its server is up): %+v", m)
	}
}

func TestShardedOpenErrors(t *testing.T) {
	root := shardedRoot(t)
	for _, tc := range []struct {
		shards []int
		msg    string
	}{
		{[]int{3}, "no sharded dataset under"},
	} {
		_, err := Open(root, Options{Shards: tc.shards})
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Open with shards %v: %v, want %q", tc.shards, err, tc.msg)
		}
	}
	// A listed shard that is not published is an error, not a gap.
	empty := t.TempDir()
	if _, err := shard.Ensure(filepath.Join(empty, "PET"), 2, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty, Options{Shards: []int{1}}); err == nil || !strings.Contains(err.Error(), "PET.shard-0001 is not a published dataset") {
		t.Errorf("Open with a missing shard: %v", err)
	}
	if _, err := Open(filepath.Join(root, "ALL"), Options{Shards: []int{0}}); err == nil || !strings.Contains(err.Error(), "no directory under") {
		t.Errorf("Open with --shards and no shard map: %v", err)
	}
	// Without --shards every shard found is served, and the map holder
	// is not a dataset.
	s, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.Datasets(), []string{"ALL", "PET.shard-0000", "PET.shard-0001", "PET.shard-0002"}; !slices.Equal(got, want) {
		t.Errorf("datasets %v, want %v", got, want)
	}
	// One server of every shard, no cluster file: endpoints without
	// locations (read them here), exact counts that add up to the whole.
	ctx := context.Background()
	info, err := s.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"PET"}})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"ALL"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoint) != 3 || info.TotalRecords != all.TotalRecords || info.Ordered {
		t.Errorf("PET: %d endpoints, %d rows, ordered %v; want 3, %d, false", len(info.Endpoint), info.TotalRecords, info.Ordered, all.TotalRecords)
	}
	for _, ep := range info.Endpoint {
		if len(ep.Location) != 0 {
			t.Errorf("endpoint %s has locations %v without a cluster file", ep.Ticket.Ticket, ep.Location)
		}
	}
	sc, err := s.GetSchema(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"PET"}})
	if err != nil || len(sc.Schema) == 0 {
		t.Errorf("GetSchema of PET: %v", err)
	}
}
