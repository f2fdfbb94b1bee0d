package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, headroom int64
		want           int
	}{
		{0, 256 * mib, 6400},       // before the first collection: as if 4 MiB live
		{1 * mib, 256 * mib, 6400}, // an idle server: its goal the runtime's minimum, 4 MiB × 64
		{50 * mib, 256 * mib, 512}, // the ingest benchmarks' live heap
		{1 * mib, 16 * mib, 400},   // the read headroom: a 16 MiB goal
		{8 * mib, 16 * mib, 200},
		{1 * mib, 1 << 40, maxPercent},
		{256 * mib, 256 * mib, 100},
		{2048 * mib, 256 * mib, 100}, // a large heap: the runtime's own goal
	} {
		if got := percentFor(tc.live, tc.headroom); got != tc.want {
			t.Errorf("live %d MiB, headroom %d MiB: GOGC %d, want %d", tc.live/mib, tc.headroom/mib, got, tc.want)
		}
	}
}

// TestTunerFollowsLiveHeap: under writes, with a small live heap the tuner
// sets a GOGC whose goal is the headroom above it; once the live heap
// passes the headroom, GOGC 100; Stop restores what there was.
func TestTunerFollowsLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	orig := debug.SetGCPercent(100)
	debug.SetGCPercent(orig)
	tu := Start(128<<20, 0)
	if tu == nil {
		t.Fatal("Start returned nil without GOGC set")
	}
	defer tu.Stop()
	Wrote()
	waitPercent(t, tu, func(p int) bool { return p > 1000 }, "a small heap")
	hold := make([][]byte, 0, 12)
	for i := 0; i < 12; i++ { // 192 MiB live, past the headroom
		hold = append(hold, make([]byte, 16<<20))
		for j := 0; j < len(hold[i]); j += 4096 {
			hold[i][j] = 1
		}
	}
	waitPercent(t, tu, func(p int) bool { return p == 100 }, "a heap past the headroom")
	runtime.KeepAlive(hold)
	hold = nil
	tu.Stop()
	if got := debug.SetGCPercent(orig); got != orig {
		t.Errorf("GOGC after Stop: %d, want %d", got, orig)
	}
}

// waitPercent collects until the tuner's GOGC satisfies ok (its hook
// runs after a collection, from the finalizer goroutine), or fails.
func waitPercent(t *testing.T, tu *Tuner, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(tu.Percent()) {
		if time.Now().After(deadline) {
			t.Fatalf("with %s: GOGC %d", what, tu.Percent())
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	set := debug.SetGCPercent(tu.Percent())
	if set != tu.Percent() {
		t.Fatalf("with %s: the runtime's GOGC is %d, the tuner says %d", what, set, tu.Percent())
	}
}

// TestStartRespectsGOGC: an operator's GOGC stands; zero headrooms are off.
func TestStartRespectsGOGC(t *testing.T) {
	t.Setenv("GOGC", "200")
	if tu := Start(256<<20, 16<<20); tu != nil {
		tu.Stop()
		t.Fatal("started with GOGC set")
	}
	t.Setenv("GOGC", "")
	if tu := Start(0, 0); tu != nil {
		tu.Stop()
		t.Fatal("started with a zero headroom")
	}
}

// TestTunerIdle: without writes the runtime's own GOGC stands (a server
// answering queries alone holds no headroom of garbage); a write gives the
// headroom, and writing nothing for IdleAfter takes it back.
func TestTunerIdle(t *testing.T) {
	t.Setenv("GOGC", "")
	oldIdle, oldCheck := IdleAfter, checkEvery
	IdleAfter, checkEvery = 100*time.Millisecond, 10*time.Millisecond
	defer func() { IdleAfter, checkEvery = oldIdle, oldCheck }()
	tu := Start(128<<20, 0)
	defer tu.Stop()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if p := tu.Percent(); p != 100 {
		t.Fatalf("no write yet: GOGC %d, want 100", p)
	}
	Wrote()
	waitPercent(t, tu, func(p int) bool { return p > 1000 }, "a write")
	waitPercent(t, tu, func(p int) bool { return p == 100 }, "no write for IdleAfter")
}

// TestTunerReadHeadroom: without writes the read headroom sets the goal
// (a percent above 100 for a small heap, below the write headroom's); a
// write gives the larger write headroom, and IdleAfter without one takes
// it back to the read headroom's.
func TestTunerReadHeadroom(t *testing.T) {
	t.Setenv("GOGC", "")
	oldIdle, oldCheck := IdleAfter, checkEvery
	IdleAfter, checkEvery = 100*time.Millisecond, 10*time.Millisecond
	defer func() { IdleAfter, checkEvery = oldIdle, oldCheck }()
	hold := make([]byte, 4<<20) // a live heap of about 4 MiB, like an idle server's
	defer runtime.KeepAlive(hold)
	tu := Start(1<<30, 16<<20)
	if tu == nil {
		t.Fatal("Start returned nil without GOGC set")
	}
	defer tu.Stop()
	waitPercent(t, tu, func(p int) bool { return p > 100 && p < 1000 }, "reads only")
	read := tu.Percent()
	Wrote()
	waitPercent(t, tu, func(p int) bool { return p > read }, "a write")
	waitPercent(t, tu, func(p int) bool { return p > 100 && p <= read*11/10+1 }, "no write for IdleAfter")
}
