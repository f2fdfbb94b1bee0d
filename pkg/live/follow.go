package live

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// Follower is a dataset's delta as a read-only server sees it: it never
// takes the log's lock and never writes; it tails the log another process
// appends to (wal.Tail) and applies each complete record to its State in
// log order, so it serves what the writer acknowledged a poll later. Its
// State is rebuilt from the log (Refold) when what it lies over changes
// beyond a rebase: the checkpoint moved, or the snapshot's columns did.
type Follower struct {
	dir string
	t   Target
	mem memory.Allocator
	log *slog.Logger

	mu     sync.Mutex // one poll at a time; held while Target methods run
	tail   *wal.Tail
	schema *livedelta.Schema
	st     *livedelta.State
	seq    uint64
	after  uint64 // the checkpoint the State lies after
	stats  FollowStats
}

// FollowStats are a follower's counters (status and metrics).
type FollowStats struct {
	Records  int64  // records applied since it opened
	Rows     int64  // their rows
	Position uint64 // the log position applied through
	Polls    int64
	LastPoll time.Time
	Refolds  int64 // State rebuilt from the log
}

// OpenFollower follows the log in dir (which may not exist yet) from the
// checkpoint after: the records after it are read and bulk-loaded over
// t's base, the result published, and later records applied by Poll.
func OpenFollower(ctx context.Context, dir string, s *livedelta.Schema, after uint64, t Target, logger *slog.Logger) (*Follower, ReplayInfo, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	f := &Follower{dir: dir, t: t, mem: memory.DefaultAllocator, log: logger}
	f.mu.Lock()
	defer f.mu.Unlock()
	info, err := f.refoldLocked(ctx, after, s, t.Base(), func(st *livedelta.State) error { t.Publish(st); return nil })
	if err != nil {
		return nil, info, err
	}
	return f, info, nil
}

// Refold rebuilds the State from the log: every record after `after` (the
// checkpoint now), over base, with schema s; install serves it (under the
// follower's lock; its error leaves the State as it was).
func (f *Follower) Refold(ctx context.Context, after uint64, s *livedelta.Schema, base livedelta.Base, install func(*livedelta.State) error) (ReplayInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refoldLocked(ctx, after, s, base, install)
}

func (f *Follower) refoldLocked(ctx context.Context, after uint64, s *livedelta.Schema, base livedelta.Base, install func(*livedelta.State) error) (ReplayInfo, error) {
	t0 := time.Now()
	tail := wal.OpenTail(f.dir, wal.PositionFromUint64(after))
	var payloads [][]byte
	var ends []wal.Position
	_, err := tail.Read(func(pos wal.Position, p []byte) error {
		payloads = append(payloads, append([]byte(nil), p...))
		ends = append(ends, pos)
		return nil
	})
	if err != nil {
		tail.Close()
		return ReplayInfo{}, fmt.Errorf("follow %s after %s: %w", f.dir, wal.PositionFromUint64(after), err)
	}
	seq := max(f.seq, uint64(len(payloads)))
	rp, err := bulkLoad(ctx, f.mem, s, payloads, ends, seq, base)
	info := ReplayInfo{Records: rp.records, Rows: rp.rows, Duration: time.Since(t0)}
	if err != nil {
		tail.Close()
		return info, fmt.Errorf("follow %s: %w", f.dir, err)
	}
	if err := install(rp.st); err != nil {
		tail.Close()
		return info, err
	}
	if f.tail != nil {
		f.tail.Close()
	}
	f.tail, f.schema, f.st, f.seq, f.after = tail, s, rp.st, seq, after
	f.stats.Position = tail.Position().Uint64()
	f.stats.Refolds++
	return info, nil
}

// Poll applies the records the writer appended since the last poll and
// publishes the new State; it returns how many it applied. Each record is
// appended as a run of its own, so a write is visible as soon as it is
// read; then one merge of runs (livedelta.MergeCandidate) is made off the
// follower's lock and installed if its runs are still there, so the runs a
// read merges stay few without a merge ever holding a write back.
// wal.ErrBehind means the writer deleted records the follower had not read
// (it fell a compaction behind): the caller refolds from the checkpoint.
func (f *Follower) Poll(ctx context.Context) (int, error) {
	n, err := f.apply(ctx)
	if err == nil {
		f.mergeOnce(ctx)
	}
	return n, err
}

func (f *Follower) apply(ctx context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tail == nil {
		return 0, ErrClosed
	}
	f.stats.Polls++
	f.stats.LastPoll = time.Now()
	st := f.st
	n, err := f.tail.Read(func(pos wal.Position, payload []byte) error {
		// The tail reuses its buffer for the next record, and the run
		// the record becomes keeps its buffers: decode a copy.
		rec, err := decodeRecord(append([]byte(nil), payload...), f.schema)
		if err != nil {
			return fmt.Errorf("record at %s: %w", pos, err)
		}
		defer rec.Release()
		next, err := st.Append(ctx, f.mem, rec, f.seq+1, pos.Uint64(), f.t.Base())
		if err != nil {
			return fmt.Errorf("record at %s: %w", pos, err)
		}
		st = next
		f.seq++
		f.stats.Records++
		f.stats.Rows += rec.NumRows()
		return nil
	})
	if n > 0 {
		f.st = st
		f.stats.Position = f.tail.Position().Uint64()
		f.t.Publish(st)
	}
	return n, err
}

// mergeOnce merges the State's oldest candidate runs without the lock and
// installs the result if they are still there (a refold or rebase
// meanwhile drops it).
func (f *Follower) mergeOnce(ctx context.Context) {
	f.mu.Lock()
	st := f.st
	f.mu.Unlock()
	rs, ok := st.MergeCandidate()
	if !ok {
		return
	}
	m, err := st.Merge(ctx, f.mem, rs)
	if err != nil {
		f.log.Error("merging delta runs", "error", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if next, ok := f.st.Replace(rs, m); ok && f.tail != nil {
		f.st = next
		f.t.Publish(next)
	}
}

// Rebase moves the State over another base (a reload of a snapshot the
// checkpoint and columns of which did not change) and serves it through
// install, under the follower's lock.
func (f *Follower) Rebase(base livedelta.Base, install func(*livedelta.State) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st.Rebase(base)
	if err := install(st); err != nil {
		return err
	}
	f.st = st
	return nil
}

// State is the follower's current delta.
func (f *Follower) State() *livedelta.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

// Schema is the write schema the State holds.
func (f *Follower) Schema() *livedelta.Schema {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.schema
}

// After is the checkpoint the State lies after.
func (f *Follower) After() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.after
}

// Stats are the follower's counters.
func (f *Follower) Stats() FollowStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Close stops following (the log is not touched).
func (f *Follower) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tail == nil {
		return nil
	}
	err := f.tail.Close()
	f.tail = nil
	return err
}
