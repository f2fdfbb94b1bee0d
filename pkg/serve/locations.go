package serve

// Health of the cluster file's locations (docs/FLIGHT.md "Replicas").
//
// A server with a cluster file checks, every LocationCheckInterval, each
// location of each shard with the standard gRPC health protocol
// (grpc.health.v1.Health/Check, which every servingsnap server answers
// on its Flight port, health.go), asking for the shard's dataset name as
// the service: SERVING means that server is up and holds the shard, so a
// stale cluster file shows as well as a server that is down. GetFlightInfo
// lists a shard's locations in the file's order leaving out those found
// down, and counting asks the live ones first. A location never checked
// yet counts as live; when every location of a shard is down, all are
// listed (the client may still reach one the check could not).
//
// Lock order: locationChecker.mu alone; a check runs without it.

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/pkg/shard"
)

// Defaults of the location check (--cluster-check-interval, --cluster-check-timeout).
const (
	DefaultLocationCheckInterval = 2 * time.Second
	DefaultLocationCheckTimeout  = time.Second
)

// Location states in status and the metric.
const (
	LocationUnknown = "unknown" // not checked yet: listed
	LocationUp      = "up"
	LocationDown    = "down"
)

// locTarget is one location of one shard.
type locTarget struct {
	dataset string // the sharded dataset
	shard   int
	loc     string
}

// service is the health service name asked for: the shard's dataset.
func (t locTarget) service() string { return shard.DirName(t.dataset, t.shard) }

type locState struct {
	state   string
	checked time.Time
	since   time.Time // when state last changed
	err     string
}

// locationChecker checks the locations of every shard of the sharded
// datasets under the root.
type locationChecker struct {
	interval, timeout time.Duration
	targets           []locTarget
	log               *slog.Logger

	mu    sync.Mutex
	state map[locTarget]*locState // guarded by mu
	conns map[string]*grpc.ClientConn

	cancel context.CancelFunc
	done   chan struct{}
}

// newLocationChecker lists the targets of the cluster file for the
// sharded datasets (every location of every shard, in file order).
func newLocationChecker(sharded map[string]*shardedDataset, c *shard.Cluster, interval, timeout time.Duration) *locationChecker {
	lc := &locationChecker{interval: interval, timeout: timeout, state: map[locTarget]*locState{}, conns: map[string]*grpc.ClientConn{}}
	names := make([]string, 0, len(sharded))
	for n := range sharded {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for i := 0; i < sharded[n].m.Count; i++ {
			for _, l := range c.For(n, i) {
				t := locTarget{dataset: n, shard: i, loc: l}
				lc.targets = append(lc.targets, t)
				lc.state[t] = &locState{state: LocationUnknown}
			}
		}
	}
	return lc
}

// start checks once now, then every interval, until stop.
func (lc *locationChecker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	lc.cancel, lc.done = cancel, make(chan struct{})
	go func() {
		defer close(lc.done)
		t := time.NewTicker(lc.interval)
		defer t.Stop()
		for {
			lc.checkAll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stop ends the checks and closes their connections.
func (lc *locationChecker) stop() {
	if lc.cancel != nil {
		lc.cancel()
		<-lc.done
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for l, c := range lc.conns {
		c.Close()
		delete(lc.conns, l)
	}
}

// checkAll checks every target at once, so that down servers cost one
// timeout a round, not one each.
func (lc *locationChecker) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, t := range lc.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := lc.check(ctx, t)
			if ctx.Err() == nil {
				lc.record(t, err)
			}
		}()
	}
	wg.Wait()
}

// check asks t's server whether it serves t's shard.
func (lc *locationChecker) check(ctx context.Context, t locTarget) error {
	conn, err := lc.conn(t.loc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, lc.timeout)
	defer cancel()
	// Not WaitForReady: a refused dial fails the check at once (the
	// location is down now, not after the timeout); the connection
	// redials at most remoteMaxBackoff apart, so a server back up passes
	// a check within about a second of it.
	res, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{Service: t.service()})
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return &checkError{msg: st.Code().String() + ": " + st.Message()}
		}
		return err
	}
	if s := res.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return &checkError{msg: s.String()}
	}
	return nil
}

type checkError struct{ msg string }

func (e *checkError) Error() string { return e.msg }

// conn is the cached health connection of a location.
func (lc *locationChecker) conn(loc string) (*grpc.ClientConn, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if c, ok := lc.conns[loc]; ok {
		return c, nil
	}
	host, opts, err := locationDial(loc, lc.timeout)
	if err != nil {
		return nil, err
	}
	c, err := grpc.NewClient(host, opts...)
	if err != nil {
		return nil, err
	}
	lc.conns[loc] = c
	return c, nil
}

// locationDial is how this server connects to a cluster file location
// (validated by shard.ParseCluster), to count a shard or check it: its
// host and port, and the dial options: grpc+tls with the system's roots,
// the others in clear text, redialling at most remoteMaxBackoff apart so
// that a server back up is reached within about a second.
func locationDial(loc string, connectTimeout time.Duration) (string, []grpc.DialOption, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", loc, err)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "grpc+tls" {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	bo := backoff.DefaultConfig
	bo.MaxDelay = remoteMaxBackoff
	return u.Host, []grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: connectTimeout})}, nil
}

// record sets t's state from a check's error (nil: up), logging changes.
func (lc *locationChecker) record(t locTarget, err error) {
	now := time.Now()
	state, msg := LocationUp, ""
	if err != nil {
		state, msg = LocationDown, err.Error()
	}
	lc.mu.Lock()
	st := lc.state[t]
	prev := st.state
	st.checked, st.err = now, msg
	if prev != state {
		st.state, st.since = state, now
	}
	lc.mu.Unlock()
	if prev == state {
		return
	}
	if lc.log == nil {
		return
	}
	if state == LocationDown {
		lc.log.Warn("shard location down", "dataset", t.dataset, "shard", t.shard, "location", t.loc, "error", msg)
	} else if prev == LocationDown {
		lc.log.Info("shard location up again", "dataset", t.dataset, "shard", t.shard, "location", t.loc)
	}
}

// live filters locs (shard i of dataset, in the cluster file's order) to
// the ones not found down; all of them when every one is down.
func (lc *locationChecker) live(dataset string, i int, locs []string) []string {
	if lc == nil || len(locs) == 0 {
		return locs
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	out := make([]string, 0, len(locs))
	for _, l := range locs {
		if st := lc.state[locTarget{dataset: dataset, shard: i, loc: l}]; st == nil || st.state != LocationDown {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return locs
	}
	return out
}

// LocationStatus is one location of one shard in the status action's
// answer.
type LocationStatus struct {
	Dataset  string `json:"dataset"`
	Shard    int    `json:"shard"`
	Location string `json:"location"`
	State    string `json:"state"` // up, down or unknown (not checked yet)
	Checked  string `json:"checked,omitempty"`
	Since    string `json:"since,omitempty"` // when the state last changed
	Error    string `json:"error,omitempty"` // why the last check failed
}

// status lists every target in order.
func (lc *locationChecker) status() []LocationStatus {
	if lc == nil {
		return nil
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	out := make([]LocationStatus, 0, len(lc.targets))
	for _, t := range lc.targets {
		st := lc.state[t]
		ls := LocationStatus{Dataset: t.dataset, Shard: t.shard, Location: t.loc, State: st.state, Error: st.err}
		if !st.checked.IsZero() {
			ls.Checked = st.checked.UTC().Format(time.RFC3339Nano)
		}
		if !st.since.IsZero() {
			ls.Since = st.since.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, ls)
	}
	return out
}

// locationCollector exports the checks' results at scrape time.
type locationCollector struct{ lc *locationChecker }

var descLocationUp = prometheus.NewDesc("servingsnap_shard_location_up",
	"Health of each cluster file location of each shard, by dataset, shard and location: 1 up (its server holds the shard), 0 down (left out of GetFlightInfo's endpoints), -1 not checked yet.",
	[]string{"dataset", "shard", "location"}, nil)

func (c locationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descLocationUp }

func (c locationCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ls := range c.lc.status() {
		v := -1.0
		switch ls.State {
		case LocationUp:
			v = 1
		case LocationDown:
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(descLocationUp, prometheus.GaugeValue, v, ls.Dataset, strconv.Itoa(ls.Shard), ls.Location)
	}
}
