package live

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/pkg/livedelta"
)

// TestPauseMerge: the merger's pause, and GiveWay (the same pause for a
// compaction), wait while a write is in flight, until it passes or the
// bound is up, and do not wait otherwise. (The cases that must not wait
// use a bound of an hour, so a wrong wait hangs the test rather than
// passing on a loaded machine's timing.)
func TestPauseMerge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pause func(w *Writer)
	}{
		{"pauseMerge", func(w *Writer) {
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			w.pauseMerge(timer)
		}},
		{"GiveWay", (*Writer).GiveWay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bound = 20 * time.Millisecond
			w := &Writer{idle: make(chan struct{}, 1), stop: make(chan struct{}), mergeWait: bound}
			w.idle <- struct{}{} // a stale signal from writes long gone
			w.inflight.Add(1)
			t0 := time.Now()
			tc.pause(w)
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
			tc.pause(w) // ends when the write passes
			if n := w.inflight.Load(); n != 0 {
				t.Fatalf("inflight %d", n)
			}
			tc.pause(w) // no write in flight: no wait
			close(w.stop)
			w.inflight.Add(1)
			tc.pause(w) // stopped: no wait
		})
	}
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

// TestHoldMerges: while merges are held every write's run stays (the
// held State's runs are a prefix of every later State's), and once
// released the merger folds them again.
func TestHoldMerges(t *testing.T) {
	s := testSchema(t)
	rng := rand.New(rand.NewPCG(3, 4))
	tg := &nullTarget{}
	w, _, err := Open(t.TempDir(), s, 0, tg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	put := func(n int) {
		for i := 0; i < n; i++ {
			rec := testWrite(s, rng, 50, float64(i))
			_, err := w.Put(ctx, rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	put(3)
	pre, release := w.HoldMerges()
	const writes = 4 * livedelta.MergeFanIn
	put(writes)
	time.Sleep(20 * time.Millisecond) // the merger's chance to (wrongly) merge
	st := w.State()
	if n := len(pre.Runs()); len(st.Runs()) != n+writes || !slices.Equal(st.Runs()[:n], pre.Runs()) {
		t.Fatalf("held: %d runs after %d writes over %d, or the held ones replaced", len(st.Runs()), writes, n)
	}
	release()
	deadline := time.Now().Add(10 * time.Second)
	for len(w.State().Runs()) >= len(st.Runs()) {
		if time.Now().After(deadline) {
			t.Fatalf("released: still %d runs", len(w.State().Runs()))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPrepareRebasePanic: a rebase that panics does not leave merges held.
func TestPrepareRebasePanic(t *testing.T) {
	w, _, err := Open(t.TempDir(), testSchema(t), 0, &nullTarget{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	func() {
		defer func() { _ = recover() }()
		w.PrepareRebase(func(*livedelta.State) *livedelta.State { panic("rebase") })
	}()
	w.mu.Lock()
	held := w.held
	w.mu.Unlock()
	if held != 0 {
		t.Fatalf("merges held %d times after a rebase panicked", held)
	}
}
