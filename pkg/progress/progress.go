// Package progress is the seam between long-running phases (generate a
// lake, build, verify against a lake, convert) and whatever shows their
// progress. Phases call this small interface and never import a terminal
// library: the commands choose the implementation (internal/progressui
// draws bars on a terminal with mpb, JSON writes one line per update for
// cron logs, Nop shows nothing), so a library caller or a test pays
// nothing for it.
package progress

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Reporter starts phases. Implementations are safe for concurrent use.
type Reporter interface {
	// Phase starts a named phase expecting rows and bytes of work (0 when
	// unknown: no percentage or ETA is then shown for that measure).
	Phase(name string, rows, bytes int64) Phase
}

// Phase is one running phase. Add may be called from several goroutines.
type Phase interface {
	// Add records rows and bytes of work done since the last call.
	Add(rows, bytes int64)
	// Done ends the phase (idempotent).
	Done()
}

// Nop is a Reporter that shows nothing.
var Nop Reporter = nop{}

type nop struct{}

func (nop) Phase(string, int64, int64) Phase { return nop{} }
func (nop) Add(int64, int64)                 {}
func (nop) Done()                            {}

// Or returns r, or Nop when r is nil.
func Or(r Reporter) Reporter {
	if r == nil {
		return Nop
	}
	return r
}

// Update is one JSON progress line. Field names are a contract (docs/CLI.md).
type Update struct {
	Task       string  `json:"task"`  // the command: gen, build, verify, convert
	Phase      string  `json:"phase"` // e.g. read, sort, write
	Rows       int64   `json:"rows"`
	RowsTotal  int64   `json:"rows_total,omitempty"`
	Bytes      int64   `json:"bytes"`
	BytesTotal int64   `json:"bytes_total,omitempty"`
	Elapsed    float64 `json:"elapsed_s"`       // seconds since the phase began
	ETA        float64 `json:"eta_s,omitempty"` // seconds left, from the rate so far; 0 if unknown
	Done       bool    `json:"done"`
}

// JSON returns a Reporter writing one JSON line per update to w, at most
// one per interval per phase (plus the first and the last).
func JSON(w io.Writer, task string, interval time.Duration) Reporter {
	return &jsonReporter{enc: json.NewEncoder(w), task: task, every: interval, now: time.Now}
}

type jsonReporter struct {
	mu    sync.Mutex
	enc   *json.Encoder
	task  string
	every time.Duration
	now   func() time.Time
}

func (j *jsonReporter) Phase(name string, rows, bytes int64) Phase {
	p := &jsonPhase{j: j, u: Update{Task: j.task, Phase: name, RowsTotal: rows, BytesTotal: bytes}, start: j.now()}
	j.mu.Lock()
	p.emitLocked()
	j.mu.Unlock()
	return p
}

type jsonPhase struct {
	j     *jsonReporter
	u     Update
	start time.Time
	last  time.Time
}

func (p *jsonPhase) Add(rows, bytes int64) {
	p.j.mu.Lock()
	defer p.j.mu.Unlock()
	if p.u.Done {
		return
	}
	p.u.Rows += rows
	p.u.Bytes += bytes
	if p.j.now().Sub(p.last) >= p.j.every {
		p.emitLocked()
	}
}

func (p *jsonPhase) Done() {
	p.j.mu.Lock()
	defer p.j.mu.Unlock()
	if p.u.Done {
		return
	}
	p.u.Done = true
	p.emitLocked()
}

func (p *jsonPhase) emitLocked() {
	now := p.j.now()
	p.last = now
	p.u.Elapsed = now.Sub(p.start).Seconds()
	p.u.ETA = 0
	if !p.u.Done {
		p.u.ETA = eta(p.u.Elapsed, p.u.Rows, p.u.RowsTotal, p.u.Bytes, p.u.BytesTotal)
	}
	p.j.enc.Encode(p.u) // progress is best effort: a full disk must not fail the work
}

// eta estimates the seconds left from the rate so far, by rows when their
// total is known, else by bytes; 0 when neither can tell.
func eta(elapsed float64, rows, rowsTotal, bytes, bytesTotal int64) float64 {
	done, total := rows, rowsTotal
	if total <= 0 {
		done, total = bytes, bytesTotal
	}
	if total <= 0 || done <= 0 || done >= total {
		return 0
	}
	return elapsed * float64(total-done) / float64(done)
}

// Finish ends ph as done when err is nil. A failed phase is left open, so
// the display ends it as stopped at the count it reached (a failed build
// must not draw its phase as done).
func Finish(ph Phase, err error) {
	if err == nil {
		ph.Done()
	}
}
