package served

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// RootOptions configure OpenRoot.
type RootOptions struct {
	Options
	// Skip, if set, names directories under the root not to open (the
	// shards another server holds, a sharded dataset's map directory).
	Skip func(name string) bool
	// ReloadInterval is how often each dataset's CURRENT is read; a new id
	// is opened, validated and swapped in (Dataset.Reload). 0: never (only
	// an explicit Reload reloads).
	ReloadInterval time.Duration
	// Compact is when a dataset is compacted by itself (zero: only an
	// explicit Compact compacts).
	Compact CompactPolicy
	// FollowInterval is how often a dataset that follows another server's
	// log (a read-only server's, a standby's) reads what was appended
	// (Dataset.Follow); DefaultFollowInterval when 0. It bounds how stale
	// a replica's answers are, beside the time to apply a write.
	FollowInterval time.Duration
}

// DefaultFollowInterval is RootOptions.FollowInterval's default.
const DefaultFollowInterval = 10 * time.Millisecond

// Root is every dataset served from one root directory, and the loops
// that keep them current: the reload poller and the compaction policy.
type Root struct {
	dir      string
	opt      RootOptions
	datasets map[string]*Dataset
	names    []string // sorted

	stop        chan struct{} // closed by Close: the loops end
	pollDone    chan struct{} // closed when the poller has ended (nil: none runs)
	compactDone chan struct{} // closed when the compaction loop has ended (nil: none runs)
	followDone  chan struct{} // closed when the follow loop has ended (nil: none runs)
	closeOnce   sync.Once
}

// OpenRoot discovers the datasets under dir (each a directory with a valid
// dataset name and a CURRENT file; symlinks to directories are followed)
// and opens each one (Open). A dataset directory without CURRENT (never
// published) is skipped with a log line. A dataset whose snapshot fails to
// open is served as Unopened: never silently missing, but its failure
// stays inside it (its requests are refused with the reason, status and
// metrics show it failing) while every other dataset serves.
func OpenRoot(dir string, opt RootOptions) (*Root, error) {
	if opt.Logger == nil {
		opt.Logger = discard
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	r := &Root{dir: dir, opt: opt, datasets: map[string]*Dataset{}, stop: make(chan struct{})}
	log := opt.Logger
	for _, ent := range ents {
		name := ent.Name()
		if manifest.ValidateDatasetName(name) != nil || (opt.Skip != nil && opt.Skip(name)) {
			continue // .tmp, hidden files, anything that cannot be a dataset; shard maps and shards not served
		}
		ddir := filepath.Join(dir, name)
		if fi, err := os.Stat(ddir); err != nil || !fi.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(ddir, dsdir.CurrentFile)); errors.Is(err, os.ErrNotExist) {
			log.Info("skipping directory without CURRENT", "dataset", name, "dir", ddir)
			continue
		}
		t0 := time.Now()
		d, err := Open(ddir, opt.Options)
		if err != nil {
			if d, err = Unopened(ddir, opt.Options, err); err != nil {
				r.Close()
				return nil, fmt.Errorf("serve: %w", err)
			}
		}
		r.datasets[name] = d
		r.names = append(r.names, name)
		if v := d.acquire(); v != nil {
			m := v.Manifest()
			log.Info("dataset open", "dataset", name, "snapshot_id", v.ID(), "rows", m.Stats.Rows,
				"series", m.Stats.Series, "mapped_bytes", v.snap.MappedBytes(), "open_ms", float64(time.Since(t0).Microseconds())/1000)
			v.Release()
		}
	}
	sort.Strings(r.names)
	return r, nil
}

// Start runs the loops the options ask for: the reload poller and the
// compaction policy. Call it once, after the caller has wired the datasets
// into whatever serves them.
func (r *Root) Start() {
	if r.opt.Compact.Enabled() {
		r.compactDone = make(chan struct{})
		go r.compactLoop()
	}
	if r.opt.ReloadInterval > 0 {
		r.pollDone = make(chan struct{})
		go r.poll()
	}
	every := r.opt.FollowInterval
	if every <= 0 {
		every = DefaultFollowInterval
	}
	r.followDone = make(chan struct{})
	go r.everyDataset(every, r.followDone, func(d *Dataset) { d.Follow(context.Background()) })
}

// Names lists the served datasets, sorted.
func (r *Root) Names() []string { return append([]string(nil), r.names...) }

// Dataset is the served dataset called name.
func (r *Root) Dataset(name string) (*Dataset, bool) {
	d, ok := r.datasets[name]
	return d, ok
}

// Close stops the loops and closes every dataset. Streams still running
// keep their views until they end.
func (r *Root) Close() {
	r.closeOnce.Do(func() {
		close(r.stop)
		if r.pollDone != nil {
			<-r.pollDone
		}
		if r.compactDone != nil {
			<-r.compactDone
		}
		if r.followDone != nil {
			<-r.followDone
		}
	})
	for _, d := range r.datasets {
		d.Close()
	}
}

// poll reads every dataset's CURRENT each interval and reloads the ones
// that changed. Reading a 22-byte file per dataset is cheaper and more
// robust than a file watch (CURRENT is replaced by rename, so a watch
// would have to be on the directory, and network file systems deliver no
// events at all).
func (r *Root) poll() {
	r.everyDataset(r.opt.ReloadInterval, r.pollDone, func(d *Dataset) {
		d.CheckFiles()
		d.Reload(false)
	})
}

// compactLoop compacts every dataset whose delta passes a threshold,
// checking once a second, until the root closes.
func (r *Root) compactLoop() {
	log := r.opt.Logger
	r.everyDataset(time.Second, r.compactDone, func(d *Dataset) {
		if why := d.Due(r.opt.Compact); why != "" {
			log.Info("compaction due", "dataset", d.name, "why", why)
			if _, err := d.Compact(context.Background()); err != nil {
				log.Error("compaction failed; the delta stays served and logged", "dataset", d.name, "error", err.Error())
			}
		}
	})
}

// everyDataset calls fn for each dataset every interval until Close, then
// closes done.
func (r *Root) everyDataset(interval time.Duration, done chan struct{}, fn func(*Dataset)) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		for _, name := range r.names {
			select {
			case <-r.stop:
				return
			default:
			}
			d := r.datasets[name]
			r.Safely("dataset "+name, func() { fn(d) })
		}
	}
}

// Panicked looks at a panic recovered in a handler or a background loop
// (where says which): a memory fault in a served snapshot's mapping marks
// its dataset failing and returns the error (marked corrupt) the caller
// should get; nil when r is not a memory fault. It never panics itself.
func (r *Root) Panicked(where string, rec any) error {
	addr, isFault := FaultAddr(rec)
	if !isFault {
		return nil
	}
	for _, name := range r.names {
		if err := r.datasets[name].Faulted(addr, where); err != nil {
			return err
		}
	}
	return corrupt.Errorf("memory fault at %#x in %s outside any served snapshot", addr, where)
}

// Safely runs fn (a background loop's step) with faults as panics and
// any panic recovered: a damaged file costs that step, not the process.
func (r *Root) Safely(where string, fn func()) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if rec := recover(); rec != nil {
			err := r.Panicked(where, rec)
			if err == nil {
				err = fmt.Errorf("panic: %v", rec)
			}
			r.opt.Logger.Error("recovered in background loop", "where", where, "error", err.Error(), "stack", string(debug.Stack()))
		}
	}()
	fn()
}
