// Package gctune keeps the Go collector's heap goal at least a fixed
// headroom above the live heap, for a process whose live heap is small
// next to the memory it may use.
//
// The server maps its snapshots (page cache, not Go heap), so its live
// heap is only the live-write delta and the requests in flight: 40-60 MB
// in the ingest benchmarks. At the runtime's default GOGC=100 the heap
// goal is twice that, and a write load of 60 MB/s of short-lived buffers
// collects every ~0.7 s; each collection's mark takes a core of two for
// 10-20 ms, and the acknowledgements that overlap it (2-3% of them) wait
// for it: more than the 1% a p99 is made of. A fixed GOGC large enough
// to matter (400) multiplies the heap by 5 whatever its size, and the
// delta's share of it grows up to the compaction thresholds. A headroom
// sets the goal to max(2 × live, live + headroom) instead: a bounded
// amount of extra memory while the heap is small, the runtime's own
// behaviour once it is large.
//
// Under a write load the headroom is large (DefaultHeadroom, 256 MiB):
// the delta's batches arrive fast and briefly live. A server answering
// queries alone allocates little that lives, and with that much headroom
// it would hold up to that much garbage (RssAnon) for nothing; but not
// nothing at all: its requests' garbage (tickets, plans, gRPC's buffers,
// 50-100 KB a latest-values request) at a live heap of a few MiB is a
// collection every 40-80 requests at GOGC=100, and the 1-2% of answers
// that overlap one are the p99. So reads get a read headroom
// (DefaultReadHeadroom, 16 MiB: a collection every few hundred requests,
// out of the p99, for at most that much garbage held). The write headroom
// applies while the process writes (Wrote, called for each write, marks it
// busy) and until it has written nothing for IdleAfter; then the read
// headroom does, and the garbage the write headroom let pile up is
// returned to the OS once (debug.FreeOSMemory).
//
// The runtime has no such setting, so the package sets GOGC itself after
// every collection (debug.SetGCPercent), from the live heap the
// collection found (runtime/metrics /gc/heap/live:bytes). A GOMEMLIMIT
// still bounds the heap: the runtime collects earlier as it nears the
// limit, whatever GOGC says.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHeadroom is the server's default under writes (serve
// --gc-headroom); DefaultReadHeadroom its default otherwise (serve
// --gc-read-headroom).
const (
	DefaultHeadroom     = 256 << 20
	DefaultReadHeadroom = 16 << 20
)

// maxPercent bounds the GOGC set: a live heap of a few megabytes (an idle
// server) would otherwise ask for a percent in the tens of thousands.
const maxPercent = 10_000

// IdleAfter is how long after the last write the headroom is given up;
// checkEvery is how often the tuner looks (variables for the tests).
var (
	IdleAfter  = 30 * time.Second
	checkEvery = 5 * time.Second
)

// writes counts Wrote's calls; current is the running Tuner (nil: none).
var (
	writes  atomic.Uint64
	current atomic.Pointer[Tuner]
)

// Wrote notes a write (a DoPut batch): the process is under a write load,
// and the headroom applies until it has been idle for IdleAfter. It costs
// an atomic add while the tuner already knows.
func Wrote() {
	writes.Add(1)
	if t := current.Load(); t != nil && !t.busy.Load() {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Tuner keeps the heap goal at least its headroom above the live heap
// while the process writes, and its read headroom otherwise, until stopped.
type Tuner struct {
	headroom int64
	read     int64
	orig     int // GOGC before Start, restored by Stop
	stopped  atomic.Bool
	busy     atomic.Bool   // a write within IdleAfter: the headroom applies
	wake     chan struct{} // Wrote's signal to a tuner that is not busy
	done     chan struct{} // closed by Stop: the watcher ends
	mu       sync.Mutex    // serialises adjust and Stop
	percent  int           // what adjust set last
	sample   []metrics.Sample
}

// Start starts a Tuner with headroom bytes under writes and read bytes
// otherwise. It does nothing (and returns nil) when neither is positive or
// when the environment sets GOGC: an operator's explicit choice stands.
func Start(headroom, read int64) *Tuner {
	if (headroom <= 0 && read <= 0) || os.Getenv("GOGC") != "" {
		return nil
	}
	t := &Tuner{headroom: max(headroom, 0), read: max(read, 0), sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	t.orig = debug.SetGCPercent(100)
	t.percent = 100
	t.adjust()
	t.arm()
	seen := writes.Load() // before current is set: a write from now on is news
	current.Store(t)
	go t.watch(seen)
	return t
}

// watch marks the tuner busy when writes arrive and idle when none came
// for IdleAfter, retuning at each change; on becoming idle it returns the
// garbage the headroom let accumulate to the OS.
func (t *Tuner) watch(seen uint64) {
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-t.done:
			return
		case <-t.wake:
		case <-tick.C:
		}
		now := time.Now()
		if n := writes.Load(); n != seen {
			seen, last = n, now
			if !t.busy.Swap(true) {
				t.adjust()
			}
			continue
		}
		if t.busy.Load() && now.Sub(last) >= IdleAfter {
			t.busy.Store(false)
			t.adjust()
			debug.FreeOSMemory()
		}
	}
}

// Percent is the GOGC the tuner set last (0 for a nil Tuner).
func (t *Tuner) Percent() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Stop stops tuning and restores the GOGC there was before Start.
func (t *Tuner) Stop() {
	if t == nil || t.stopped.Swap(true) {
		return
	}
	current.CompareAndSwap(t, nil)
	close(t.done)
	t.mu.Lock()
	defer t.mu.Unlock()
	debug.SetGCPercent(t.orig)
}

// sentinel is an object whose finalizer runs once a collection found it
// unreachable: a hook after every cycle. (It holds a pointer and is
// larger than 16 bytes so it is not a tiny allocation, whose finalizers
// wait for a whole 16-byte block.)
type sentinel struct {
	t *Tuner
	_ [16]byte
}

// arm allocates the next cycle's sentinel.
func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

// adjust sets GOGC from the live heap the last collection found, unless it
// is within 10% of what it is already (SetGCPercent recomputes the pacer's
// goal under the heap lock; no need to every cycle).
func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	headroom := t.read
	if t.busy.Load() {
		headroom = max(t.headroom, t.read)
	}
	p := 100
	if v := t.sample[0].Value; v.Kind() == metrics.KindUint64 && headroom > 0 {
		p = percentFor(int64(v.Uint64()), headroom)
	}
	if p < t.percent*9/10 || p > t.percent*11/10 {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// percentFor is the GOGC whose goal is max(2 × live, live + headroom)
// for a live heap of live bytes, capped at maxPercent. The runtime's goal
// is never below its heap minimum, 4 MiB scaled by GOGC/100, so a live
// heap below 4 MiB (or none measured yet, before the first collection)
// counts as 4 MiB: otherwise an idle server's 1 MiB heap with a 16 MiB
// headroom would ask for GOGC 1600, whose minimum alone is 64 MiB.
func percentFor(live, headroom int64) int {
	return int(min(max(100, headroom*100/max(live, heapMinimum)), maxPercent))
}

// heapMinimum is the runtime's smallest heap goal at GOGC=100.
const heapMinimum = 4 << 20
