// Package progressui picks and draws the progress of a command's long
// phases (pkg/progress): bars on a terminal (github.com/vbauerster/mpb/v8),
// one JSON line per update with --progress=json (for cron logs), nothing
// otherwise. The phases only see the progress.Reporter interface, so only
// the commands link the terminal library.
package progressui

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/progress"
)

// Modes of --progress.
const (
	ModeAuto = "auto" // bars when stderr is a terminal, else nothing
	ModeBar  = "bar"  // bars even when stderr is not a terminal
	ModeJSON = "json" // one JSON line per update on stderr
	ModeNone = "none" // nothing
)

// JSONInterval is the least time between two JSON lines of one phase.
const JSONInterval = time.Second

// Flag is the --progress flag every long-running command takes.
func Flag() cli.Flag {
	return &cli.StringFlag{Name: "progress", Value: ModeAuto,
		Usage: "progress on stderr: `MODE` auto (bars on a terminal, else nothing), bar, json (one line per update) or none"}
}

// Start returns the reporter for mode (the --progress value) writing to
// w (stderr), and a stop function to call when the work ends, before
// printing the result. An unknown mode is a usage error.
func Start(mode string, w io.Writer, task string) (progress.Reporter, func(), error) {
	switch mode {
	case "", ModeAuto:
		if !isTerminal(w) {
			return progress.Nop, func() {}, nil
		}
		return newBars(w)
	case ModeBar:
		return newBars(w)
	case ModeJSON:
		return progress.JSON(w, task, JSONInterval), func() {}, nil
	case ModeNone:
		return progress.Nop, func() {}, nil
	}
	return nil, nil, cliutil.Usagef("--progress %q: want auto, bar, json or none", mode)
}

// Writer is where a command prints a message while rep may be drawing
// (a lock it waits for): above the bars when rep draws them, so a repaint
// neither overwrites the message nor leaves a copy of the bars behind it;
// w otherwise.
func Writer(rep progress.Reporter, w io.Writer) io.Writer {
	if b, ok := rep.(*bars); ok {
		return b.p
	}
	return w
}

// isTerminal reports whether w is a file that is a character device (a
// terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

type bars struct {
	p    *mpb.Progress
	mu   sync.Mutex
	open []*bar
}

func newBars(w io.Writer) (progress.Reporter, func(), error) {
	// Auto refresh even when w is not a terminal (--progress=bar into a
	// file or a pipe): mpb otherwise draws nothing there.
	// On a terminal the width asked for is the bar's (the line is the
	// terminal's); elsewhere mpb takes it for the whole line.
	width := 32
	if !isTerminal(w) {
		width = 120
	}
	b := &bars{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(width), mpb.WithRefreshRate(200*time.Millisecond), mpb.WithAutoRefresh())}
	return b, b.stop, nil
}

// stop ends the bars and waits for the last render. A phase that did not
// finish (the work failed or was interrupted) stays on screen as
// "stopped" at the count it reached.
func (b *bars) stop() {
	b.mu.Lock()
	open := b.open
	b.open = nil
	b.mu.Unlock()
	for _, x := range open {
		if !x.done.Swap(true) {
			x.took.Store(max(int64(time.Since(x.start)), 1))
			x.b.Abort(false)
		}
	}
	b.p.Wait()
}

// Phase adds a bar counting rows (bytes when the row total is unknown),
// with the other measure, the elapsed time and an ETA beside it.
func (b *bars) Phase(name string, rows, bytes int64) progress.Phase {
	x := &bar{rowsTotal: rows, bytesTotal: bytes, byRows: rows > 0 || bytes <= 0, start: time.Now()}
	total := rows
	if !x.byRows {
		total = bytes
	}
	counts := decor.Any(func(decor.Statistics) string {
		r, by := x.rows.Load(), x.bytes.Load()
		if x.done.Load() && r == 0 && by == 0 {
			// A phase that counts no rows as it goes (scan, sort,
			// publish): once it ended, its size if it has one.
			if x.rowsTotal > 0 {
				return cliutil.Count(x.rowsTotal) + " rows"
			}
			return ""
		}
		s := cliutil.Count(r) + " rows"
		if x.rowsTotal > 0 {
			s += " of " + cliutil.Count(x.rowsTotal)
		}
		if by > 0 || x.bytesTotal > 0 {
			s += ", " + cliutil.Bytes(by)
			if x.bytesTotal > 0 {
				s += " of " + cliutil.Bytes(x.bytesTotal)
			}
		}
		return s
	})
	x.b = b.p.AddBar(max(total, 0),
		mpb.PrependDecorators(margin{decor.Name(fmt.Sprintf("%-20s", name))}, decor.Any(percent, decor.WCSyncSpace)),
		mpb.AppendDecorators(counts, decor.Name("  "), decor.Any(x.elapsed),
			decor.OnAbort(decor.OnComplete(decor.Name(" ETA "), ""), ""), decor.OnAbort(decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO), ""), "")),
	)
	b.mu.Lock()
	b.open = append(b.open, x)
	b.mu.Unlock()
	return x
}

// margin keeps a bar's line one column short of the terminal's width: mpb
// fills the width exactly, and a terminal that wraps on reaching the last
// column then scrolls a line per bar at each repaint, leaving copies of
// the bars in the scrollback. It reports one column more than its
// decorator draws, so mpb truncates the rest of the line a column earlier.
type margin struct{ decor.Decorator }

func (m margin) Decor(s decor.Statistics) (string, int) {
	str, w := m.Decorator.Decor(s)
	return str, w + 1
}

type bar struct {
	b                     *mpb.Bar
	rows, bytes           atomic.Int64
	rowsTotal, bytesTotal int64
	byRows                bool
	done                  atomic.Bool
	start                 time.Time
	took                  atomic.Int64 // nanoseconds from start to Done; 0 while running
}

// elapsed is the phase's time so far, in seconds (docs/CLI.md, Numbers
// for people), frozen when it ends. mpb's own Elapsed shows nothing for a
// phase that ended before the bars were first drawn.
func (x *bar) elapsed(decor.Statistics) string {
	d := time.Duration(x.took.Load())
	if d == 0 {
		d = time.Since(x.start)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func (x *bar) Add(rows, bytes int64) {
	x.rows.Add(rows)
	x.bytes.Add(bytes)
	if x.byRows {
		x.b.IncrInt64(rows)
	} else {
		x.b.IncrInt64(bytes)
	}
}

// Done completes the bar: full, whatever was counted (a phase may report
// no work, or less than its estimate), so a finished phase reads "done".
func (x *bar) Done() {
	if x.done.Swap(true) {
		return
	}
	x.took.Store(max(int64(time.Since(x.start)), 1))
	x.b.SetTotal(max(x.b.Current(), 1), true)
}

// percent is a bar's "42 %" while it runs (blank when its total is not
// known), "done" once it completed and "stopped" when it was abandoned.
func percent(s decor.Statistics) string {
	switch {
	case s.Completed:
		return "done"
	case s.Aborted:
		return "stopped"
	case s.Total <= 0:
		return ""
	}
	return fmt.Sprintf("%d %%", min(100, s.Current*100/s.Total))
}
