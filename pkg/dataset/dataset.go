// Package dataset manages a dataset directory (ROOT/DATASET) over its
// life: the CURRENT pointer and snapshot ids, the write lock, staging and
// the atomic publish that makes a snapshot visible, the HISTORY of flips,
// readers' leases, rollback and garbage collection. The manifest document
// itself is package manifest; docs/FORMAT.md §1 is the contract.
//
// Reading needs no lock: a reader follows CURRENT, and everything CURRENT
// can name is complete and immutable. Every change goes through a Writer,
// which holds the dataset's flock.
package dataset

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// Names inside a dataset directory (docs/FORMAT.md §1).
const (
	CurrentFile  = "CURRENT"
	LockFile     = "LOCK"
	ManifestsDir = "manifests"
	SnapshotsDir = "snapshots"
	TmpDir       = ".tmp"
	// WALDir holds the write-ahead log of the dataset's live writes
	// (docs/FORMAT.md §6).
	WALDir = "wal"
)

// ErrNoCurrent means the dataset has no CURRENT pointer yet (nothing was
// ever published there).
var ErrNoCurrent = errors.New("no CURRENT pointer")

// FormatID renders a snapshot id as its file-name form: six digits, wider
// when needed, so names sort by id in a directory listing.
func FormatID(id uint64) string { return fmt.Sprintf("%06d", id) }

// ParseID is the inverse of FormatID.
func ParseID(s string) (uint64, error) {
	if len(s) < 6 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a snapshot id", s)
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 || FormatID(id) != s {
		return 0, fmt.Errorf("%q is not a snapshot id", s)
	}
	return id, nil
}

// ManifestPath is the manifest's path relative to the dataset directory.
func ManifestPath(id uint64) string { return ManifestsDir + "/" + FormatID(id) + ".json" }

// SnapshotPath is the snapshot directory relative to the dataset directory.
func SnapshotPath(id uint64) string { return SnapshotsDir + "/" + FormatID(id) }

// ParseCurrent decodes the content of a CURRENT file: exactly one line
// "manifests/NNNNNN.json\n". Anything else is a corruption error
// (corrupt.ErrCorrupt, which manifest.ErrCorrupt also names).
func ParseCurrent(b []byte) (uint64, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || strings.ContainsAny(s, "\n\r") {
		return 0, corrupt.Errorf("CURRENT must be one line ending in a newline")
	}
	name, ok := strings.CutPrefix(s, ManifestsDir+"/")
	if !ok {
		return 0, corrupt.Errorf("CURRENT names %q, want %s/NNNNNN.json", s, ManifestsDir)
	}
	idStr, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return 0, corrupt.Errorf("CURRENT names %q, want %s/NNNNNN.json", s, ManifestsDir)
	}
	id, err := ParseID(idStr)
	if err != nil {
		return 0, corrupt.Errorf("CURRENT: %w", err)
	}
	return id, nil
}

// Dir is a dataset directory (ROOT/DATASET). Reading needs no lock: a
// reader follows CURRENT, and everything CURRENT can name is complete and
// immutable.
type Dir struct {
	Dir  string // the dataset directory
	Name string // its base name, a valid dataset name
}

// Open names a dataset directory; it does not require it to exist.
func Open(dir string) (*Dir, error) {
	dir = filepath.Clean(dir)
	name := filepath.Base(dir)
	if err := manifest.ValidateDatasetName(name); err != nil {
		return nil, fmt.Errorf("dataset directory %s: %w", dir, err)
	}
	return &Dir{Dir: dir, Name: name}, nil
}

// Path joins a slash-separated path relative to the dataset directory.
func (d *Dir) Path(rel string) string { return filepath.Join(d.Dir, filepath.FromSlash(rel)) }

// CurrentID reads CURRENT. It returns ErrNoCurrent if the file is absent.
func (d *Dir) CurrentID() (uint64, error) {
	b, err := os.ReadFile(d.Path(CurrentFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%s: %w", d.Dir, ErrNoCurrent)
	}
	if err != nil {
		return 0, err
	}
	id, err := ParseCurrent(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", d.Path(CurrentFile), err)
	}
	return id, nil
}

// Load reads and validates manifest id, and checks it describes this
// dataset and this id.
func (d *Dir) Load(id uint64) (*manifest.Manifest, error) {
	p := d.Path(ManifestPath(id))
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("manifest %d: %w", id, err)
	}
	m, err := manifest.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if m.SnapshotID != id {
		return nil, fmt.Errorf("%s: %w", p, corrupt.Errorf("file holds snapshot_id %d", m.SnapshotID))
	}
	if m.Dataset != d.Name {
		return nil, fmt.Errorf("%s: %w", p, corrupt.Errorf("manifest is for dataset %q, directory is %q", m.Dataset, d.Name))
	}
	return m, nil
}

// Current loads the manifest CURRENT names.
func (d *Dir) Current() (*manifest.Manifest, error) {
	id, err := d.CurrentID()
	if err != nil {
		return nil, err
	}
	return d.Load(id)
}

// IDs lists the ids of all manifests present (the vintages), ascending.
func (d *Dir) IDs() ([]uint64, error) {
	ids, err := idsIn(d.Path(ManifestsDir), ".json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return ids, err
}

func idsIn(dir, suffix string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok {
			continue
		}
		if id, err := ParseID(base); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// Writer holds the dataset's write lock. Every change to a dataset (build,
// rollback, gc) goes through one, so two writers never race on ids or on
// CURRENT. The lock is flock-based and dies with the process.
type Writer struct {
	d    *Dir
	lock *fileutil.Lock
}

// LockOptions say how a writer waits for another writer of the dataset
// (a build, rollback or gc) to finish.
type LockOptions struct {
	// Timeout is how long to wait before giving up with an error wrapping
	// fileutil.ErrLocked; 0 waits as long as it takes.
	Timeout time.Duration
	// Waiting, if set, is called once when the lock is held by someone
	// else at the time it is asked for, with the holder's process id (0
	// when it cannot be told), before the wait begins.
	Waiting func(holderPID int)
}

// LockForWrite is LockForWriteWith without a timeout or a wait message.
func (d *Dir) LockForWrite() (*Writer, error) {
	return d.LockForWriteWith(context.Background(), LockOptions{})
}

// LockForWriteWith creates the dataset layout if needed, waits for the
// write lock (as o says, and until ctx is done), and removes whatever a
// crashed writer left behind: the staging area and snapshot directories
// that no manifest names (a crash between their rename and the
// manifest's).
func (d *Dir) LockForWriteWith(ctx context.Context, o LockOptions) (*Writer, error) {
	for _, sub := range []string{"", ManifestsDir, SnapshotsDir} {
		if err := os.MkdirAll(d.Path(sub), 0o755); err != nil {
			return nil, err
		}
	}
	path := d.Path(LockFile)
	var waiting func()
	holder := 0
	if o.Waiting != nil || o.Timeout > 0 {
		waiting = func() {
			holder = fileutil.LockHolder(path)
			if o.Waiting != nil {
				o.Waiting(holder)
			}
		}
	}
	l, err := fileutil.WaitLockContext(ctx, path, o.Timeout, waiting)
	if errors.Is(err, fileutil.ErrLocked) {
		by := "another writer"
		if holder != 0 {
			by = fmt.Sprintf("process %d", holder)
		}
		return nil, fmt.Errorf("dataset %s: %s (a build, rollback or gc) still held the write lock %s after %s: %w", d.Name, by, path, o.Timeout, fileutil.ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %s: write lock: %w", d.Name, err)
	}
	w := &Writer{d: d, lock: l}
	if err := w.cleanLocked(); err != nil {
		l.Release()
		return nil, err
	}
	if err := w.recoverLocked(); err != nil {
		l.Release()
		return nil, err
	}
	return w, nil
}

// Close releases the write lock.
func (w *Writer) Close() error { return w.lock.Release() }

// cleanLocked removes leftovers of crashed writers. Requires the lock held.
func (w *Writer) cleanLocked() error {
	if err := os.RemoveAll(w.d.Path(TmpDir)); err != nil {
		return fmt.Errorf("remove stale staging area: %w", err)
	}
	have, err := w.d.IDs()
	if err != nil {
		return err
	}
	named := map[uint64]bool{}
	for _, id := range have {
		named[id] = true
	}
	snaps, err := idsIn(w.d.Path(SnapshotsDir), "")
	if err != nil {
		return err
	}
	for _, id := range snaps {
		if !named[id] {
			if err := os.RemoveAll(w.d.Path(SnapshotPath(id))); err != nil {
				return fmt.Errorf("remove orphan snapshot %d: %w", id, err)
			}
		}
	}
	// Leases of snapshots that no longer exist (a reader raced gc and
	// re-created one): drop those nobody holds.
	leases, err := idsIn(w.d.Path(LeasesDir), "")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, id := range leases {
		if named[id] {
			continue
		}
		if l, err := fileutil.TryLock(w.d.Path(LeasePath(id))); err == nil {
			os.Remove(w.d.Path(LeasePath(id)))
			l.Release()
		}
	}
	// Half-written manifests (".NNNNNN.json.tmp") are never read; drop them.
	ents, err := os.ReadDir(w.d.Path(ManifestsDir))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".tmp") {
			if err := os.Remove(filepath.Join(w.d.Path(ManifestsDir), e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// NextID is one more than the largest id ever used: under manifests/ or
// snapshots/, or named in HISTORY. HISTORY matters after gc: a collected
// newest vintage (after a rollback) must not have its id reused for
// different content, since clients, caches and tickets key on ids.
func (w *Writer) NextID() (uint64, error) {
	var max uint64
	flips, err := w.d.Flips()
	if err != nil {
		return 0, err
	}
	for _, f := range flips {
		max = maxID(max, f.From, f.To)
	}
	for _, sub := range []struct{ dir, suffix string }{{ManifestsDir, ".json"}, {SnapshotsDir, ""}} {
		ids, err := idsIn(w.d.Path(sub.dir), sub.suffix)
		if err != nil {
			return 0, err
		}
		if n := len(ids); n > 0 && ids[n-1] > max {
			max = ids[n-1]
		}
	}
	return max + 1, nil
}

// Stage creates an empty staging directory for a snapshot's files.
func (w *Writer) Stage() (string, error) {
	if err := os.MkdirAll(w.d.Path(TmpDir), 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(w.d.Path(TmpDir), "build-")
	if err != nil {
		return "", err
	}
	// MkdirTemp makes the directory 0700; renamed into snapshots/ it must
	// be readable by a server running as another user (a systemd User=,
	// a container's non-root user), like every other directory here.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// Publish makes a staged snapshot visible, in the order docs/FORMAT.md §1
// gives: fsync the staged files, rename the directory into snapshots/,
// write the manifest atomically, then flip CURRENT (the commit point) and
// move the live writes' checkpoint to m.WALPosition if that is ahead of it.
// m.SnapshotID must be NextID's answer, and m.Files paths must point into
// SnapshotPath(id). With c.Expect set, nothing is installed unless CURRENT
// still names it (ErrMoved). c.Action defaults to ActionBuild.
func (w *Writer) Publish(staged string, m *manifest.Manifest, c Change) error {
	if err := w.expectLocked(c); err != nil {
		return err
	}
	if err := w.Install(staged, m); err != nil {
		return err
	}
	if c.Action == "" {
		c.Action = ActionBuild
	}
	if c.Tool == "" {
		c.Tool = m.Tool
	}
	_, err := w.commitLocked(m, c, m.Created)
	return err
}

// PublishChecked is Publish with check run between installing the staged
// snapshot (its files and manifest in place, not yet CURRENT) and the
// flip: a check that fails leaves CURRENT as it was and the vintage
// installed, unpublished, for inspection (gc removes it like any other
// vintage), and returns the check's error. A compaction checks its
// snapshot this way (the fast verify) before any server serves it.
func (w *Writer) PublishChecked(staged string, m *manifest.Manifest, c Change, check func(id uint64) error) error {
	if err := w.expectLocked(c); err != nil {
		return err
	}
	if err := w.Install(staged, m); err != nil {
		return err
	}
	if err := check(m.SnapshotID); err != nil {
		return err
	}
	if c.Action == "" {
		c.Action = ActionBuild
	}
	if c.Tool == "" {
		c.Tool = m.Tool
	}
	_, err := w.commitLocked(m, c, m.Created)
	return err
}

// commitLocked flips CURRENT to m's snapshot, moves the checkpoint to
// m.WALPosition if it is ahead, and appends c to HISTORY. It returns the
// id CURRENT named before (0 if none). Requires the lock; the caller has
// checked c's guard.
func (w *Writer) commitLocked(m *manifest.Manifest, c Change, when string) (uint64, error) {
	prev, err := w.d.CurrentID()
	if err != nil && !errors.Is(err, ErrNoCurrent) {
		prev = 0 // a damaged CURRENT is replaced; the log says from 0
	}
	before, had, err := wal.ReadCheckpoint(w.d.walDir())
	if err != nil {
		return prev, err
	}
	if err := w.SetCurrent(m.SnapshotID); err != nil {
		return prev, err
	}
	f := Flip{Time: when, Action: c.Action, From: prev, To: m.SnapshotID, Tool: c.Tool, Reason: c.Reason}
	if m.WALPosition > before.Folded || (!had && m.WALPosition > 0) {
		kind := wal.CheckpointSupersede
		if m.Lineage.Kind == LineageCompaction {
			kind = wal.CheckpointCompaction
		}
		if err := w.moveCheckpointLocked(m.WALPosition, kind, m.SnapshotID); err != nil {
			return prev, err
		}
		f.WALPosition = m.WALPosition
	}
	return prev, w.appendFlipLocked(f)
}

// Install does all of Publish but the flip of CURRENT: the snapshot is
// complete, fsynced and named by its manifest (a vintage), but no reader
// follows CURRENT to it until PublishInstalled flips it. This is
// `snapbuild build --no-publish`: verify the vintage, then publish it.
// A crash after Install leaves a vintage nobody serves; the next writer
// keeps it (its manifest names it).
func (w *Writer) Install(staged string, m *manifest.Manifest) error {
	body, err := manifest.Marshal(m)
	if err != nil {
		return err
	}
	if err := readOnlyTree(staged); err != nil {
		return err
	}
	if err := fileutil.SyncTree(staged); err != nil {
		return err
	}
	final := w.d.Path(SnapshotPath(m.SnapshotID))
	if _, err := os.Stat(final); err == nil {
		return fmt.Errorf("publish snapshot %d: %s already exists", m.SnapshotID, final)
	}
	if err := os.Rename(staged, final); err != nil {
		return fmt.Errorf("publish snapshot %d: %w", m.SnapshotID, err)
	}
	if err := fileutil.SyncDir(w.d.Path(SnapshotsDir)); err != nil {
		return err
	}
	// The lease file exists before anyone can find the snapshot, so
	// readers can take their shared lock without write access.
	if err := os.MkdirAll(w.d.Path(LeasesDir), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(w.d.Path(LeasePath(m.SnapshotID)), nil, 0o644); err != nil {
		return err
	}
	return fileutil.WriteFileAtomic(w.d.Path(ManifestPath(m.SnapshotID)), body, 0o644)
}

// ErrNotNewer is returned by PublishInstalled for a vintage older than
// the one CURRENT names: moving CURRENT back is a rollback, which says so
// in HISTORY and takes a reason.
var ErrNotNewer = errors.New("not newer than CURRENT")

// PublishInstalled flips CURRENT to vintage id, which Install wrote (or
// any vintage newer than CURRENT), and records a publish in HISTORY. It
// returns the id CURRENT named before (0 if none). A vintage that is
// already CURRENT is left as it is (from == id); one older than CURRENT is
// refused with ErrNotNewer; with c.Expect set, CURRENT must still name it.
func (w *Writer) PublishInstalled(id uint64, c Change) (from uint64, err error) {
	if err := w.d.CheckVintage(id); err != nil {
		return 0, fmt.Errorf("publish: %w", err)
	}
	if err := w.expectLocked(c); err != nil {
		return 0, err
	}
	cur, err := w.d.CurrentID()
	if err != nil && !errors.Is(err, ErrNoCurrent) {
		cur = 0 // a damaged CURRENT is replaced
	}
	switch {
	case cur == id:
		return cur, nil
	case cur > id:
		return cur, fmt.Errorf("publish snapshot %d of %s: CURRENT is %d: %w (use rollback --to %d to go back)", id, w.d.Name, cur, ErrNotNewer, id)
	}
	m, err := w.d.Load(id)
	if err != nil {
		return cur, fmt.Errorf("publish: %w", err)
	}
	if c.Action == "" {
		c.Action = ActionPublish
	}
	return w.commitLocked(m, c, "")
}

// PublishedFileMode is the mode of every published snapshot file: invariant
// 2 says they never change, and a server maps them, so a write in place (a
// restore, a cp over one, a partial rsync) would change what it serves or
// fault its mappings. Read-only files make an operator's tool refuse that
// (or at least ask) instead of doing it silently.
const PublishedFileMode os.FileMode = 0o444

// readOnlyTree makes every regular file under dir PublishedFileMode before
// it is fsynced and renamed into place (chmod is metadata the fsync that
// follows makes durable).
func readOnlyTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		if err := os.Chmod(p, PublishedFileMode); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		return nil
	})
}

// SetCurrent flips CURRENT to manifest id (write-temp, fsync, rename,
// fsync-dir). The manifest must exist and parse.
func (w *Writer) SetCurrent(id uint64) error {
	if _, err := w.d.Load(id); err != nil {
		return fmt.Errorf("set CURRENT to %d: %w", id, err)
	}
	return fileutil.WriteFileAtomic(w.d.Path(CurrentFile), []byte(ManifestPath(id)+"\n"), 0o644)
}

func maxID(ids ...uint64) uint64 {
	var m uint64
	for _, id := range ids {
		if id > m {
			m = id
		}
	}
	return m
}

// NotExistError says that a dataset directory, or a vintage of it, does
// not exist, naming what does. errors.Is(err, fs.ErrNotExist) holds, so
// callers treat it as the missing operand it is.
type NotExistError struct{ msg string }

func (e *NotExistError) Error() string        { return e.msg }
func (e *NotExistError) Is(target error) bool { return target == fs.ErrNotExist }

// CheckExists returns a NotExistError when the dataset directory does not
// exist, and an error when it is not a directory.
func (d *Dir) CheckExists() error {
	st, err := os.Stat(d.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return &NotExistError{fmt.Sprintf("dataset directory %s does not exist", d.Dir)}
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("dataset directory %s is not a directory", d.Dir)
	}
	return nil
}

// CheckVintage returns a NotExistError naming vintage id and the vintages
// present when its manifest does not exist (never published, or removed
// by gc).
func (d *Dir) CheckVintage(id uint64) error {
	if err := d.CheckExists(); err != nil {
		return err
	}
	_, err := os.Stat(d.Path(ManifestPath(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return &NotExistError{fmt.Sprintf("snapshot %d of %s does not exist (%s)", id, d.Name, d.vintageList())}
	}
	return err
}

// vintageList says which vintages are present, for messages.
func (d *Dir) vintageList() string {
	ids, err := d.IDs()
	if err != nil || len(ids) == 0 {
		return "it has no vintages"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	if cur, err := d.CurrentID(); err == nil {
		return "vintages: " + strings.Join(s, ", ") + "; CURRENT is " + strconv.FormatUint(cur, 10)
	}
	return "vintages: " + strings.Join(s, ", ")
}
