package serve

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/shard"
)

func deadLocation(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return "grpc://" + l.Addr().String()
}

// endpointLocations are the location URIs of each endpoint of an info.
func endpointLocations(info *flight.FlightInfo) [][]string {
	out := make([][]string, len(info.Endpoint))
	for i, ep := range info.Endpoint {
		for _, l := range ep.Location {
			out[i] = append(out[i], l.Uri)
		}
	}
	return out
}

// TestShardReplicaLocations: shard 1 has three locations in the cluster
// file: a dead one, a server holding it and a read-only replica on the
// same shard directory. GetFlightInfo lists the live ones in the file's
// order, drops a replica once it stops, lists every location when all
// are down, and the rows read from the live locations stay the
// unsharded dataset's.
func TestShardReplicaLocations(t *testing.T) {
	root := shardedRoot(t)
	dead := deadLocation(t)
	a, stopA := stoppableServer(t, Config{Root: root, Options: Options{Shards: []int{1}}})
	b, stopB := stoppableServer(t, Config{Root: root, Options: Options{Shards: []int{1}, ReadOnly: true}})
	c := startServer(t, Config{Root: root, Options: Options{Shards: []int{2}}})
	locA, locB, locC := "grpc://"+a.FlightAddr().String(), "grpc://"+b.FlightAddr().String(), "grpc://"+c.FlightAddr().String()
	// shard 2's second location is server A, which does not hold it: the
	// check asks for the shard, so a stale cluster file shows as down.
	cl := &shard.Cluster{Shards: shard.Locations{1: {dead, locA, locB}, 2: {locC, locA}}}
	s := startServer(t, Config{Root: root, Options: Options{Shards: []int{0}, Cluster: cl, LocationCheckInterval: 20 * time.Millisecond, LocationCheckTimeout: 200 * time.Millisecond}})
	cs := dial(t, s)
	byLoc := map[string]flight.Client{locA: dial(t, a), locB: dial(t, b), locC: dial(t, c)}
	ctx := context.Background()
	ref, err := get(ctx, dial(t, a), ticket(map[string]any{"dataset": "ALL", "prefix": ""}))
	if err != nil {
		t.Fatal(err)
	}
	want := keys(ref)

	// waitFor polls GetFlightInfo until the endpoints' locations are
	// wantLocs (the checks run every 20 ms).
	waitFor := func(t *testing.T, wantLocs [][]string) *flight.FlightInfo {
		t.Helper()
		var info *flight.FlightInfo
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var err error
			info, err = cs.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"PET"}})
			if err != nil {
				t.Fatal(err)
			}
			got := endpointLocations(info)
			if slices.EqualFunc(got[1:], wantLocs, slices.Equal) {
				return info
			}
		}
		t.Fatalf("endpoint locations %v, want %v for shards 1 and 2", endpointLocations(info), wantLocs)
		return nil
	}
	for _, tc := range []struct {
		name  string
		stop  func()
		locs  [][]string // shards 1 and 2
		state map[string]string
		rows  bool // the rows can be read from the first location
	}{
		{"dead and stale left out", nil, [][]string{{locA, locB}, {locC}},
			map[string]string{"1 " + dead: LocationDown, "1 " + locA: LocationUp, "1 " + locB: LocationUp, "2 " + locC: LocationUp, "2 " + locA: LocationDown}, true},
		{"writer stopped: the replica", stopA, [][]string{{locB}, {locC}},
			map[string]string{"1 " + locA: LocationDown, "1 " + locB: LocationUp}, true},
		{"every location down: all listed", stopB, [][]string{{dead, locA, locB}, {locC}},
			map[string]string{"1 " + locB: LocationDown}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stop != nil {
				tc.stop()
			}
			info := waitFor(t, tc.locs)
			st := s.Service().Status()
			got := map[string]string{}
			for _, l := range st.Locations {
				got[shardLabelKey(l.Shard, l.Location)] = l.State
			}
			for k, v := range tc.state {
				if got[k] != v {
					t.Errorf("status: location %s is %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if !tc.rows {
				return
			}
			var rows []rowKey
			for _, ep := range info.Endpoint {
				cc := cs
				if len(ep.Location) > 0 {
					cc = byLoc[ep.Location[0].Uri]
				}
				r, err := get(ctx, cc, ep.Ticket.Ticket)
				if err != nil {
					t.Fatalf("DoGet at %v: %v", ep.Location, err)
				}
				rows = append(rows, keys(r)...)
			}
			slices.SortFunc(rows, func(a, b rowKey) int {
				if a.id != b.id {
					if a.id < b.id {
						return -1
					}
					return 1
				}
				return int(a.period - b.period)
			})
			if !slices.Equal(rows, want) {
				t.Errorf("rows from the live locations: %d, the unsharded dataset's %d", len(rows), len(want))
			}
			var m endpointMeta
			if err := json.Unmarshal(info.Endpoint[1].AppMetadata, &m); err != nil || m.Rows <= 0 {
				t.Errorf("shard 1 counted through its live location: %s", info.Endpoint[1].AppMetadata)
			}
		})
	}
}

func shardLabelKey(i int, loc string) string { return strconv.Itoa(i) + " " + loc }

// TestHealthService: the gRPC health service answers without a token,
// SERVING for the server and each dataset it serves, NOT_FOUND for a
// dataset it does not, while Flight calls still need the token.
func TestHealthService(t *testing.T) {
	toks, err := NewTokens("health-token-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, Config{Root: shardedRoot(t), Tokens: toks, Options: Options{Shards: []int{1}}})
	conn, err := grpc.NewClient(srv.FlightAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	for _, tc := range []struct {
		service string
		want    healthpb.HealthCheckResponse_ServingStatus
		code    codes.Code
	}{
		{"", healthpb.HealthCheckResponse_SERVING, codes.OK},
		{"PET.shard-0001", healthpb.HealthCheckResponse_SERVING, codes.OK},
		{"ALL", healthpb.HealthCheckResponse_SERVING, codes.OK},
		{"PET.shard-0002", 0, codes.NotFound}, // not held here
		{"PET", 0, codes.NotFound},            // the whole is no one server's
	} {
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: tc.service})
		if status.Code(err) != tc.code || (err == nil && res.GetStatus() != tc.want) {
			t.Errorf("Check(%q): %v %v, want %v %v", tc.service, res.GetStatus(), err, tc.want, tc.code)
		}
	}
	if _, err := dial(t, srv).GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"ALL"}}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("GetFlightInfo without a token: %v", err)
	}
}

// checkHealth asks the gRPC health service at addr for each service.
func checkHealth(t *testing.T, addr string, want map[string]healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for svc, w := range want {
		res, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.GetStatus() != w {
			t.Errorf("health of %q: %v %v, want %v", svc, res.GetStatus(), err, w)
		}
	}
}

// TestLiveLocations: the locations offered for a shard are the cluster
// file's in order, less those found down; all of them when every one is.
func TestLiveLocations(t *testing.T) {
	locs := []string{"grpc://a:1", "grpc://b:1", "grpc://c:1"}
	for _, tc := range []struct {
		name  string
		state map[string]string // location → state; absent: unknown
		want  []string
	}{
		{"never checked", nil, locs},
		{"all up", map[string]string{"grpc://a:1": LocationUp, "grpc://b:1": LocationUp, "grpc://c:1": LocationUp}, locs},
		{"first down", map[string]string{"grpc://a:1": LocationDown, "grpc://b:1": LocationUp}, []string{"grpc://b:1", "grpc://c:1"}},
		{"middle down", map[string]string{"grpc://b:1": LocationDown}, []string{"grpc://a:1", "grpc://c:1"}},
		{"one left", map[string]string{"grpc://a:1": LocationDown, "grpc://c:1": LocationDown}, []string{"grpc://b:1"}},
		{"all down", map[string]string{"grpc://a:1": LocationDown, "grpc://b:1": LocationDown, "grpc://c:1": LocationDown}, locs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &locationChecker{state: map[locTarget]*locState{}}
			for _, l := range locs {
				st := &locState{state: LocationUnknown}
				if s, ok := tc.state[l]; ok {
					st.state = s
				}
				lc.state[locTarget{dataset: "PET", shard: 1, loc: l}] = st
			}
			if got := lc.live("PET", 1, locs); !slices.Equal(got, tc.want) {
				t.Errorf("live %v, want %v", got, tc.want)
			}
			// another shard's states do not count
			if got := lc.live("PET", 2, locs); !slices.Equal(got, locs) {
				t.Errorf("shard 2: live %v, want every location", got)
			}
		})
	}
	var none *locationChecker // no cluster file, or checks off
	if got := none.live("PET", 1, locs); !slices.Equal(got, locs) {
		t.Errorf("without checks: %v", got)
	}
}
