package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// PrefetchAuto as Options.PrefetchBytes: read ahead within a quarter of
// the memory the kernel reports available at start (MemAvailable).
const PrefetchAuto = -1

// autoPrefetchBudget is the budget PrefetchAuto gives: a quarter of
// MemAvailable, so reading ahead never pushes out much of what else the
// machine caches, and a snapshot larger than that is read on demand.
func autoPrefetchBudget(memAvailable int64) int64 { return memAvailable / 4 }

// prefetchDelay is how long after start the read-ahead waits for a first
// answer before it begins anyway (a variable for the tests).
var prefetchDelay = time.Second

// prefetcher reads the served snapshots' files ahead at start
// (snapshot.PlanPrefetch), in the background, beginning once the server
// has answered its first query (or a second after start without one): the
// first answer's own reads from disk never share the device with it.
type prefetcher struct {
	stop     context.CancelFunc // ends the read-ahead
	done     chan struct{}      // closed when the goroutine has returned
	begin    chan struct{}      // closed at the first answer
	answered func()             // closes begin, once
}

// answer tells a prefetcher waiting to begin that a query was answered.
// A nil prefetcher (none) ignores it; after the first call it costs an
// atomic load.
func (p *prefetcher) answer() {
	if p != nil {
		p.answered()
	}
}

// startPrefetch starts the read-ahead of the served snapshots' files
// within budget bytes (PrefetchAuto: the auto budget; 0: none). Reloads
// need none of it: they checksum the new snapshot, which reads it whole.
func (s *Service) startPrefetch(budget int64) {
	if budget == PrefetchAuto {
		avail, err := memAvailable()
		if err != nil {
			s.log.Warn("not reading snapshots ahead", "err", err)
			return
		}
		budget = autoPrefetchBudget(avail)
	}
	if budget <= 0 || len(s.names) == 0 {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &prefetcher{stop: stop, done: make(chan struct{}), begin: make(chan struct{})}
	p.answered = sync.OnceFunc(func() { close(p.begin) })
	s.prefetch = p
	go func() {
		defer close(p.done)
		wait := time.NewTimer(prefetchDelay)
		defer wait.Stop()
		select {
		case <-p.begin:
		case <-wait.C:
		case <-ctx.Done():
			return
		}
		s.readAhead(ctx, budget)
	}()
}

// readAhead reads, within budget bytes, the files of the snapshots served
// now (snapshot.PlanPrefetch: every dataset's index, then data files), one
// after another, holding a reference on each snapshot until it is done.
func (s *Service) readAhead(ctx context.Context, budget int64) {
	var views []*served.View
	defer func() {
		for _, v := range views {
			v.Release()
		}
	}()
	var sizes [][2]int64
	for _, name := range s.names {
		v, err := s.datasets[name].Acquire()
		if err != nil {
			continue // failing: nothing served to read ahead
		}
		snap := v.Snapshot()
		views = append(views, v)
		sizes = append(sizes, [2]int64{snapshot.PartIndex: snap.Bytes(snapshot.PartIndex), snapshot.PartData: snap.Bytes(snapshot.PartData)})
	}
	plan := snapshot.PlanPrefetch(sizes, budget)
	t0 := time.Now()
	var bytes int64
	for _, f := range plan {
		v := views[f.N]
		if err := v.Snapshot().ReadAhead(ctx, f.Part); err != nil {
			if !errors.Is(err, context.Canceled) {
				s.log.Warn("read ahead failed", "dataset", v.Dataset(), "err", err)
			}
			return
		}
		bytes += f.Bytes
	}
	s.log.Info("read ahead", "files", len(plan), "bytes", bytes, "budget", budget,
		"seconds", time.Since(t0).Seconds())
}

// stopPrefetch ends a read-ahead still running and waits for it.
func (s *Service) stopPrefetch() {
	if p := s.prefetch; p != nil {
		p.stop()
		<-p.done
	}
}

// memAvailable is the kernel's estimate of the memory available for new
// work without swapping (MemAvailable in /proc/meminfo), in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("memory available: %w", err)
	}
	defer f.Close()
	return parseMemAvailable(f)
}

// parseMemAvailable reads the MemAvailable line of a /proc/meminfo.
func parseMemAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("memory available: unexpected line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("memory available: unexpected line %q", sc.Text())
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("memory available: %w", err)
	}
	return 0, errors.New("memory available: no MemAvailable line in /proc/meminfo")
}
