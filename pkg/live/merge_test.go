package live

import (
	"testing"
	"time"
)

// TestPauseMerge: the merger's pause waits while a write is in flight,
// until it passes or the bound is up, and does not wait otherwise. (The
// cases that must not wait use a bound of an hour, so a wrong wait hangs
// the test rather than passing on a loaded machine's timing.)
func TestPauseMerge(t *testing.T) {
	const bound = 20 * time.Millisecond
	w := &Writer{idle: make(chan struct{}, 1), stop: make(chan struct{}), mergeWait: bound}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	w.idle <- struct{}{} // a stale signal from writes long gone
	w.inflight.Add(1)
	t0 := time.Now()
	w.pauseMerge(timer)
	if d := time.Since(t0); d < bound {
		t.Errorf("paused %v with a write in flight; want the bound %v (the stale signal ended it)", d, bound)
	}

	w.mergeWait = time.Hour
	go func() {
		time.Sleep(time.Millisecond)
		if w.inflight.Add(-1) == 0 {
			w.idle <- struct{}{}
		}
	}()
	w.pauseMerge(timer) // ends when the write passes
	if n := w.inflight.Load(); n != 0 {
		t.Fatalf("inflight %d", n)
	}
	w.pauseMerge(timer) // no write in flight: no wait
	close(w.stop)
	w.inflight.Add(1)
	w.pauseMerge(timer) // stopped: no wait
}

// TestIncoming: a write announced with Incoming is in flight until done,
// once however often done is called, and its end signals idle.
func TestIncoming(t *testing.T) {
	w := &Writer{idle: make(chan struct{}, 1)}
	done := w.Incoming()
	if n := w.inflight.Load(); n != 1 {
		t.Fatalf("inflight %d after Incoming; want 1", n)
	}
	done()
	done()
	if n := w.inflight.Load(); n != 0 {
		t.Fatalf("inflight %d after done twice; want 0", n)
	}
	select {
	case <-w.idle:
	default:
		t.Fatal("no idle signal at zero writes in flight")
	}
}

// TestPauseMergeBacklog: with more runs than mergeBacklogRuns the merges
// are behind, and the merger does not wait for writes in flight.
func TestPauseMergeBacklog(t *testing.T) {
	w := &Writer{idle: make(chan struct{}, 1), stop: make(chan struct{}), mergeWait: time.Hour}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	w.inflight.Add(1)
	w.runs.Store(mergeBacklogRuns + 1)
	w.pauseMerge(timer) // behind: no wait (a wrong one hangs the test)
}
