package livedelta

import "time"

// A merge of the largest runs copies about a million rows and, in one go,
// holds a core for tens of milliseconds; on a 2-core server the write path
// then runs on the other core alone, and the Go scheduler preempts the
// merge only every ~10 ms. A pacer lets the merge stop at a point about
// every paceEvery of work and call the caller's pause (live's merger:
// wait while writes are in flight), so a write never waits long behind a
// merge. Reading the clock costs ~50 ns, so it is read once per paceRows
// rows of work, which every loop of a merge does in well under paceEvery.
const (
	paceEvery = time.Millisecond
	paceRows  = 16 << 10
)

// pacer calls pause once at least paceEvery has passed since the last
// pause (or since it began), checked every paceRows rows of work. A nil
// *pacer does nothing, so a merge without a pause (replay, Apply) only
// pays a nil check per chunk of rows.
type pacer struct {
	pause func()
	every time.Duration // paceEvery (tests: 0, a pause per paceRows)
	rows  int
	since time.Time
}

func newPacer(pause func()) *pacer {
	if pause == nil {
		return nil
	}
	return &pacer{pause: pause, every: paceEvery, since: time.Now()}
}

// step counts rows of work done and pauses if it is time to.
func (p *pacer) step(rows int) {
	if p == nil {
		return
	}
	p.rows += rows
	if p.rows < paceRows {
		return
	}
	p.rows = 0
	if time.Since(p.since) >= p.every {
		p.pause()
		p.since = time.Now()
	}
}

// chunks calls fn on consecutive ranges [i, j) of n rows, at most
// paceRows long, stepping p after each.
func (p *pacer) chunks(n int, fn func(i, j int)) {
	for i := 0; i < n; i += paceRows {
		j := min(i+paceRows, n)
		fn(i, j)
		p.step(j - i)
	}
}
