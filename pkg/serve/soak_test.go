//go:build soak

package serve

// The soak test (make soak; not in CI): a server process under 8 clients
// for SOAK_DURATION (default 10m) while dataset FLIP is reloaded every 2 s
// (new builds, rollbacks, gc) and clients that stop reading keep opening
// DoGets of dataset BIG. It must end with 0 failed requests that should
// have succeeded, every answer whole from one snapshot, and the server's
// file descriptors and snapshot mappings back to their baseline; it
// reports the slope of the server's RssAnon.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/energyscope/servingsnap/internal/testsnap"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
)

// procCounts is what /proc says of a process: descriptors and mappings of
// snapshot files under root.
func procCounts(t *testing.T, pid int, root string) (fds, maps int) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, root) && strings.Contains(l, "/"+dsdir.SnapshotsDir+"/") {
			maps++
		}
	}
	return len(ents), maps
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	if d := n*sxx - sx*sx; d != 0 {
		return (n*sxy - sx*sy) / d
	}
	return 0
}

func TestSoak(t *testing.T) {
	dur := 10 * time.Minute
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SOAK_DURATION: %v", err)
		}
		dur = d
	}
	f := newFlipFixture(t, "FLIP")
	testsnap.Sample(t, f.root, "BIG", 12000, 3, nil)
	os.RemoveAll(filepath.Join(f.root, "lake-BIG"))
	p := startProc(t, f.root, 200*time.Millisecond,
		helperEnv+"_STREAM_TIMEOUT=2s", helperEnv+"_LEASE_TIMEOUT=5s")
	pid := p.cmd.Process.Pid
	{ // warm up on a connection that is closed before the baseline
		c := dialAddr(t, p.flight)
		get(context.Background(), c, allOf("BIG"))
		get(context.Background(), c, allOf("FLIP"))
	}
	time.Sleep(time.Second)
	baseFDs, baseMaps := procCounts(t, pid, f.root)

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var ok, failed, stalled, flips atomic.Int64
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []string
	fail := func(format string, a ...any) {
		failed.Add(1)
		errMu.Lock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
		errMu.Unlock()
	}
	// 8 clients: series lists, prefixes, categories, latest; every answer
	// must hold one snapshot's marker
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cl, err := flight.NewClientWithMiddleware(p.flight, nil, nil, insecureDial()...)
			if err != nil {
				fail("dial: %v", err)
				return
			}
			defer cl.Close()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				var q map[string]any
				switch rng.IntN(4) {
				case 0:
					q = map[string]any{"dataset": "FLIP", "series": []string{fmt.Sprintf("S%03d", rng.IntN(flipSeries)), fmt.Sprintf("S%03d", rng.IntN(flipSeries))}}
				case 1:
					q = map[string]any{"dataset": "FLIP", "prefix": fmt.Sprintf("S0%d", rng.IntN(4)), "start": "2016"}
				case 2:
					q = map[string]any{"dataset": "FLIP", "category": "Cat/Odd", "attributes": true}
				default:
					q = map[string]any{"dataset": "FLIP", "prefix": "", "latest": true}
				}
				r, err := get(context.Background(), cl, ticket(q))
				if err != nil {
					fail("client %d %v: %v", i, q, err)
					continue
				}
				id := metaOf(r.schema, MetaSnapshotID)
				var sid uint64
				fmt.Sscan(id, &sid)
				var want float64
				// a build's marker is recorded just after it publishes,
				// and the poller may serve it first
				waitFor(5*time.Second, func() bool {
					f.mu.Lock()
					defer f.mu.Unlock()
					want = f.marker[sid]
					return want != 0
				})
				bad := len(r.values) == 0
				for _, v := range r.values {
					if v == nil || *v != want {
						bad = true
						break
					}
				}
				if bad {
					fail("client %d %v: answer of snapshot %s is not all marker %v", i, q, id, want)
					continue
				}
				ok.Add(1)
			}
		}(i)
	}
	// stalled clients: every second one more opens a DoGet of BIG and
	// never reads; the stream timeout ends them
	wg.Add(1)
	go func() {
		defer wg.Done()
		var open []*flight.Client
		defer func() {
			for _, c := range open {
				(*c).Close()
			}
		}()
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			cl, err := flight.NewClientWithMiddleware(p.flight, nil, nil, insecureDial()...)
			if err != nil {
				continue
			}
			if st, err := cl.DoGet(ctx, &flight.Ticket{Ticket: allOf("BIG")}); err == nil {
				st.Recv()
				stalled.Add(1)
			}
			open = append(open, &cl)
			if len(open) > 20 { // the oldest were cut by the server long ago
				(*open[0]).Close()
				open = open[1:]
			}
		}
	}()
	// every 2 s a flip: a new build, or a rollback to an older vintage;
	// gc (keeping 3) every fifth
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(2 * time.Second)
		defer tk.Stop()
		for n := 0; ctx.Err() == nil; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			switch {
			case n%5 == 4:
				f.gc(t, 3)
			case n%2 == 0:
				f.build(t, 1+n/2%2)
			default:
				ds, _ := dsdir.Open(f.dir)
				ids, _ := ds.IDs()
				cur, _ := ds.CurrentID()
				for i := len(ids) - 1; i >= 0; i-- {
					if ids[i] < cur {
						f.rollback(t, ids[i])
						break
					}
				}
			}
			flips.Add(1)
		}
	}()
	// sample the server's RssAnon every 2 s
	var xs, ys []float64
	start := time.Now()
	for ctx.Err() == nil {
		_, anon := rss(t, pid)
		xs, ys = append(xs, time.Since(start).Minutes()), append(ys, float64(anon)/(1<<20))
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		p.alive(t)
	}
	wg.Wait()
	// settle: stalled streams cut, the last flip served, gc of the rest
	time.Sleep(3 * time.Second)
	f.gc(t, 1)
	var endFDs, endMaps int
	settled := waitFor(30*time.Second, func() bool {
		endFDs, endMaps = procCounts(t, pid, f.root)
		return endFDs <= baseFDs && endMaps <= baseMaps
	})
	// skip the first minute's samples for the slope (heap warming up) when
	// there are enough
	from := 0
	for from < len(xs) && xs[from] < 1 && len(xs)-from > 30 {
		from++
	}
	sl := slope(xs[from:], ys[from:])
	rep, _ := json.Marshal(map[string]any{
		"duration": dur.String(), "ok": ok.Load(), "failed": failed.Load(), "flips": flips.Load(), "stalled_clients": stalled.Load(),
		"rss_anon_mib_first": ys[0], "rss_anon_mib_last": ys[len(ys)-1], "rss_anon_slope_mib_per_min": sl,
		"fds_base": baseFDs, "fds_end": endFDs, "snapshot_maps_base": baseMaps, "snapshot_maps_end": endMaps,
	})
	fmt.Printf("SOAK %s\n", rep)
	t.Logf("soak: %s", rep)
	if failed.Load() > 0 {
		t.Errorf("%d failed requests: %s", failed.Load(), strings.Join(errs, "; "))
	}
	if !settled {
		t.Errorf("fds %d (base %d), snapshot mappings %d (base %d): not back to baseline", endFDs, baseFDs, endMaps, baseMaps)
	}
}
