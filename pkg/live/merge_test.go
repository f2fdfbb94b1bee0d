package live

import (
	"testing"
	"time"
)

// TestPauseMerge: the merger's pause waits while a write is in flight,
// until it passes or mergeWaitMax is up, and does not wait otherwise.
func TestPauseMerge(t *testing.T) {
	w := &Writer{idle: make(chan struct{}, 1), stop: make(chan struct{})}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	w.idle <- struct{}{} // a stale signal from writes long gone
	w.inflight.Add(1)
	t0 := time.Now()
	w.pauseMerge(timer)
	if d := time.Since(t0); d < mergeWaitMax {
		t.Errorf("paused %v with a write in flight; want mergeWaitMax %v (the stale signal ended it)", d, mergeWaitMax)
	}
	go func() {
		time.Sleep(mergeWaitMax / 4)
		if w.inflight.Add(-1) == 0 {
			w.idle <- struct{}{}
		}
	}()
	w.pauseMerge(timer) // ends when the write passes (or at mergeWaitMax)
	if n := w.inflight.Load(); n != 0 {
		t.Fatalf("inflight %d", n)
	}
	t0 = time.Now()
	w.pauseMerge(timer)
	if d := time.Since(t0); d > mergeWaitMax/2 {
		t.Errorf("paused %v with no write in flight", d)
	}
	close(w.stop)
	w.inflight.Add(1)
	t0 = time.Now()
	w.pauseMerge(timer)
	if d := time.Since(t0); d > mergeWaitMax/2 {
		t.Errorf("paused %v once the writer stopped", d)
	}
}
