package compact

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// ColdCacheBytes is the budget of the private cold cache a compaction
// reads a tiered base through. A compaction reads each series once, in
// order (its rows, then perhaps its latest row again), so a small cache
// saves the second decode; a server's shared cache (serve --cold-cache)
// is not used for it, or one pass over every series' old rows would
// evict the history its queries keep reading.
const ColdCacheBytes = 16 << 20

// ErrNothing: the dataset has no live writes to fold in.
var ErrNothing = errors.New("no live writes to compact")

// baseOnly is a live.Target for a dataset no server serves.
type baseOnly struct{ r *query.SnapshotReader }

func (b baseOnly) Base() livedelta.Base     { return b.r }
func (b baseOnly) Publish(*livedelta.State) {}

// Offline compacts the dataset in dir while no server runs on it: replay
// the WAL records after what CURRENT folded in, publish base + delta as the
// next snapshot, delete the segments folded in. The WAL's lock tells it
// apart from a running server, which compacts with its compact action; the
// dataset's write lock orders it with builds.
func Offline(ctx context.Context, dir string, opt Options) (Result, error) {
	s, err := snapshot.Open(dir, snapshot.Options{VerifyData: true, ColdCache: coldfile.NewCache(ColdCacheBytes)})
	if err != nil {
		return Result{}, err
	}
	defer s.Close()
	base, err := query.FromSnapshot(s.Dataset.Name, s)
	if err != nil {
		return Result{}, err
	}
	fields, _ := s.Index().Attributes()
	sc, err := livedelta.NewSchema(s.Schema(), fields)
	if err != nil {
		return Result{}, err
	}
	// The same replay start as a server's: the log's checkpoint.
	cp, err := s.Dataset.WALCheckpoint()
	if err != nil {
		return Result{}, err
	}
	folded := cp.Folded
	w, _, err := live.Open(filepath.Join(dir, dataset.WALDir), sc, folded, baseOnly{base}, live.Options{})
	if err != nil {
		return Result{}, fmt.Errorf("%w (a running server compacts with DoAction compact)", err)
	}
	defer w.Close()
	st := w.State()
	if st.Rows() == 0 {
		return Result{SnapshotID: s.ID()}, ErrNothing
	}
	pos := w.Log().End().Uint64()
	res, err := Publish(ctx, s.Dataset, query.NewComposite(base, st), s.Manifest, pos, opt)
	if err != nil {
		return res, err
	}
	if _, err := w.Log().TruncateBefore(wal.PositionFromUint64(pos)); err != nil {
		return res, fmt.Errorf("published snapshot %d, but the segments it folded in were not removed: %w", res.SnapshotID, err)
	}
	return res, nil
}

// Discard sets a dataset's live writes aside when no server runs on it:
// under the dataset's lock, wal/ is renamed to wal.discarded-TIME/ (never
// deleted) and a fresh wal/ gets a checkpoint at the old log's end, so the
// writes are not served or replayed again and the next log's positions
// follow the old one's; HISTORY records a discard. It is the operator's way
// to drop delta rows a lake build made obsolete when the server is
// stopped (a running one discards with DoAction discard); the renamed log
// can still be inspected.
func Discard(dir, tool, reason string, now time.Time) (string, error) {
	ds, err := dataset.Open(dir)
	if err != nil {
		return "", err
	}
	w, err := ds.LockForWrite()
	if err != nil {
		return "", err
	}
	defer w.Close()
	p := filepath.Join(dir, dataset.WALDir)
	l, err := wal.Open(p, wal.Options{})
	if err != nil {
		return "", fmt.Errorf("%w (stop the server first, or use its DoAction discard)", err)
	}
	end := l.End()
	if err := l.Close(); err != nil {
		return "", err
	}
	to := filepath.Join(dir, "wal.discarded-"+now.UTC().Format("20060102T150405Z"))
	if err := os.Rename(p, to); err != nil {
		return "", err
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return "", err
	}
	return to, w.Discard(end.Uint64(), dataset.Change{Tool: tool, Reason: reason})
}
