package wal

// Concurrency. One committer goroutine (run) owns the active segment file and
// does every write and fsync, so writes are serialised and each is synced
// before the next starts — recovery depends on that (see laterWrite).
// Appenders only queue requests and wait. w.mu guards the queue and the
// state other goroutines read (end, segment range, closing, failed); the
// committer holds it to take and encode a batch, never across I/O.
// w.files is held shared by Replay and exclusively by TruncateBefore, so a
// replay never sees a segment vanish under it.
//
// Preparation. The next segment is written, zero filled and synced under a
// temporary name by a goroutine of its own (prepareNext), started by the
// committer once the active segment is half full; the committer owns w.next
// and, at rotation, waits for it and renames the file into place. Close
// stops a preparation only after the committer has exited, so the appends
// Close waits for can still rotate.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// Defaults for Options.
const (
	DefaultSegmentSize   = 64 << 20
	DefaultMaxRecordSize = 64 << 20
)

// maxBatchBytes bounds the payload bytes one write carries, so a burst of
// large appends cannot make the committer buffer without limit. A single
// request larger than this still goes out whole, in one write.
const maxBatchBytes = 8 << 20

// Options tune a log. The zero value gives the defaults.
type Options struct {
	// SegmentSize is the size of a segment: each is created at this size,
	// zero filled, and a record that would take a non-empty segment past
	// it goes to the next one, so no segment exceeds it (a segment created
	// under a larger SegmentSize keeps its size). Default 64 MiB; at most
	// 4 GiB - 1, because offsets are 32 bits.
	SegmentSize int64
	// MaxRecordSize is the largest payload Append accepts (ErrTooLarge
	// above it). Default 64 MiB, or less when SegmentSize needs it (at
	// the default SegmentSize, what an empty segment holds: a record
	// always fits in one): a DoPut batch of the server's most rows (1M,
	// 25-40 bytes a row logged) is one record.
	MaxRecordSize int
	// Quarantine makes Open keep a damaged newest segment aside (renamed
	// to NNNNNNNN.wal.corrupt, never deleted) and continue after its last
	// intact record, instead of failing with a *CorruptionError. It does
	// not apply to older segments: damage there is always an error.
	Quarantine bool
	// After, for a log that has no segment yet, is a position the new log
	// must lie beyond: its first segment is numbered After.Segment+1. A
	// snapshot that folded a log in records the position; when that log
	// was set aside, the next one starts after it, so the snapshot's
	// position still lies before every new record.
	After Position
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	minSize := int64(segmentHeaderSize + recordHeaderSize + 1)
	if o.SegmentSize < minSize || o.SegmentSize > math.MaxUint32 {
		return o, fmt.Errorf("wal: segment size %d out of range [%d, %d]", o.SegmentSize, minSize, int64(math.MaxUint32))
	}
	room := o.SegmentSize - segmentHeaderSize - recordHeaderSize
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = int(min(DefaultMaxRecordSize, room))
	}
	if o.MaxRecordSize < 0 || int64(o.MaxRecordSize) > room {
		return o, fmt.Errorf("wal: max record size %d out of range [0, %d] for segment size %d", o.MaxRecordSize, room, o.SegmentSize)
	}
	return o, nil
}

// WAL is an open write-ahead log. Its methods are safe for concurrent use.
type WAL struct {
	dir  string
	opts Options
	lock *fileutil.Lock

	truncated *Truncation // what Open cut, if anything

	files sync.RWMutex // shared: Replay; exclusive: TruncateBefore

	mu      sync.Mutex
	queue   []*request
	end     Position // just after the last durable record
	first   uint32   // oldest segment on disk; segments first..end.Segment all exist
	closing bool
	failed  error // sticky; wraps ErrFailed

	wake     chan struct{} // capacity 1: "the queue is not empty"
	quit     chan struct{} // closed by Close
	exited   chan struct{} // closed when run returns
	stopPrep chan struct{} // closed by Close once run has returned: abandon a preparation

	// Owned by the committer goroutine (and by Open before it starts; by
	// Close after it exits).
	f       *os.File // the active segment, end.Segment
	seg     uint32
	size    int64        // where the next record goes
	limit   int64        // no record may end past it: the segment's size
	version uint32       // of the active segment: formatAppend grows the file, FormatVersion overwrites zeros
	next    *nextSegment // segment seg+1 being prepared, or ready; nil if not started
	bufs    [][]byte     // reused write buffers, one per chunk

	writes atomic.Int64 // writes synced, for benchmarks and later metrics
}

// request is one Append call waiting for the committer.
type request struct {
	payloads [][]byte
	bytes    int
	taken    bool     // encoded into a batch; payloads are no longer referenced. Requires w.mu.
	pos      Position // set before done is closed
	err      error
	done     chan struct{}
}

// nextSegment is a preparation of segment n under nextSegmentName(n). err
// is set before done is closed.
type nextSegment struct {
	n    uint32
	size int64
	done chan struct{}
	err  error
}

// chunk is one write: records for one segment, written and fsynced together.
type chunk struct {
	seg    uint32
	start  int64
	data   []byte
	create bool // the segment is new: create it first
}

// Open opens the log in dir, creating the directory and a first segment if
// needed, and takes an exclusive lock on dir/LOCK so one process appends.
//
// Open reads the newest segment and cuts a torn tail from it (see
// Truncated); damage there that a torn last write cannot explain is a
// *CorruptionError, unless Options.Quarantine. Older segments are only read
// by Replay, which is where damage in them is found.
func Open(dir string, opts Options) (*WAL, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	lock, err := fileutil.TryLock(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("wal %s: %w", dir, err)
	}
	w := &WAL{
		dir:      dir,
		opts:     opts,
		lock:     lock,
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		exited:   make(chan struct{}),
		stopPrep: make(chan struct{}),
	}
	if err := w.load(); err != nil {
		if w.f != nil {
			err = errors.Join(err, w.f.Close())
		}
		return nil, errors.Join(err, lock.Release())
	}
	w.end = Position{Segment: w.seg, Offset: uint32(w.size)}
	go w.run()
	return w, nil
}

// ensureDir creates dir if it is missing, durably.
func ensureDir(dir string) error {
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return fileutil.SyncDir(filepath.Dir(filepath.Clean(dir)))
}

// load finds the segments, recovers the newest and leaves it open in w.f.
func (w *WAL) load() error {
	segs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		n := w.opts.After.Segment + 1
		if err := prepareSegment(w.dir, n, w.opts.SegmentSize, nil); err != nil {
			return err
		}
		f, err := installSegment(w.dir, n)
		if err != nil {
			return err
		}
		w.f, w.seg, w.size, w.first = f, n, segmentHeaderSize, n
		w.version, w.limit = FormatVersion, w.opts.SegmentSize
		return nil
	}
	for i := 1; i < len(segs); i++ {
		if segs[i] != segs[i-1]+1 {
			return &CorruptionError{Dir: w.dir, Segment: segs[i-1] + 1, Err: errors.New("segment missing")}
		}
	}
	w.first = segs[0]
	if err := w.recover(segs[len(segs)-1]); err != nil {
		return err
	}
	return w.fillActive()
}

// fillActive sets the recovered active segment's limit. A version-2 segment
// shorter than SegmentSize (the replacement a quarantine wrote, a header
// rewritten after a torn creation, a file cut short by hand) is first zero
// filled up to it and synced, so that appends overwrite zeros as in a
// segment created whole and never grow the file. A version-1 segment goes
// on growing up to SegmentSize, as it was written.
func (w *WAL) fillActive() error {
	if w.version == formatAppend {
		w.limit = w.opts.SegmentSize
		return nil
	}
	st, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	size := st.Size()
	if size < w.opts.SegmentSize {
		if err := zeroFill(w.f, size, w.opts.SegmentSize, nil); err != nil {
			return err
		}
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("wal: sync %s: %w", w.f.Name(), err)
		}
		size = w.opts.SegmentSize
	}
	w.limit = size
	return nil
}

// listSegments returns the segment numbers in dir, ascending, and removes
// what an interrupted quarantine or segment preparation left behind.
func listSegments(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []uint32
	for _, e := range ents {
		name := e.Name()
		if n, ok := parseSegmentName(name); ok && e.Type().IsRegular() {
			segs = append(segs, n)
		} else if strings.HasPrefix(name, ".") && (strings.HasSuffix(name, segmentSuffix+".tmp") || strings.HasSuffix(name, segmentSuffix+".next")) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(segs)
	return segs, nil
}

// prepareSyncBytes is how much of a new segment's zeros prepareSegment
// writes between fdatasyncs.
var prepareSyncBytes int64 = 2 << 20

// errStopped is what a preparation abandoned by Close returns.
var errStopped = errors.New("wal: segment preparation stopped")

// zeros is what zeroFill writes; never modified.
var zeros = make([]byte, 1<<20)

// zeroFill writes zeros to f over [off, end), stopping early with errStopped
// once stop is closed.
func zeroFill(f *os.File, off, end int64, stop <-chan struct{}) error {
	for off < end {
		select {
		case <-stop:
			return errStopped
		default:
		}
		n := min(int64(len(zeros)), end-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("wal: write %s at %d: %w", f.Name(), off, err)
		}
		off += n
	}
	return nil
}

// prepareSegment writes segment n at its full size under its temporary name
// (nextSegmentName): the header, then zeros to size, synced. The zeros are
// written, not fallocated: ext4 keeps fallocated blocks as unwritten
// extents, and the first write into one changes the extent tree, which an
// fdatasync must then commit through the journal — the cost preallocation
// is for avoiding. On error, or once stop is closed, the file is removed.
func prepareSegment(dir string, n uint32, size int64, stop <-chan struct{}) error {
	path := filepath.Join(dir, nextSegmentName(n))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: create segment: %w", err)
	}
	_, err = f.WriteAt(segmentHeader(n), 0)
	for off := int64(segmentHeaderSize); err == nil && off < size; off += prepareSyncBytes {
		err = zeroFill(f, off, min(off+prepareSyncBytes, size), stop)
		if err == nil {
			err = syncData(f)
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if err != errStopped {
			err = fmt.Errorf("wal: prepare %s: %w", path, err)
		}
		return errors.Join(err, os.Remove(path))
	}
	return nil
}

// installSegment renames prepared segment n into place, fsyncs the
// directory so that the new name is durable before any record goes in, and
// returns the segment open for writing. Until the rename the file is not
// part of the log: Open removes it.
func installSegment(dir string, n uint32) (*os.File, error) {
	path := filepath.Join(dir, segmentName(n))
	if err := os.Rename(filepath.Join(dir, nextSegmentName(n)), path); err != nil {
		return nil, fmt.Errorf("wal: install segment: %w", err)
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	return f, nil
}

// recover opens the newest segment n, cuts a torn tail or quarantines
// damage, and sets w.f, w.seg and w.size to continue after its last intact
// record.
func (w *WAL) recover(n uint32) error {
	path := filepath.Join(w.dir, segmentName(n))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	w.f, w.seg = f, n
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	size := st.Size()
	if size > math.MaxUint32 {
		return &CorruptionError{Dir: w.dir, Segment: n, Offset: math.MaxUint32, Err: errors.New("segment larger than 4 GiB")}
	}

	version, torn, err := checkSegmentHeader(f, n, size)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return w.damaged(n, 0, size, 0, err)
		}
		return err
	}
	w.version = version
	if torn {
		// Created but its header never reached the disk: no record can
		// follow it (records are written only after the header is synced).
		if err := w.cut(0, size); err != nil {
			return err
		}
		if _, err := f.WriteAt(segmentHeader(n), 0); err != nil {
			return fmt.Errorf("wal: rewrite header of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("wal: sync %s: %w", path, err)
		}
		w.size, w.version = segmentHeaderSize, FormatVersion
		w.truncated = &Truncation{Segment: n, Offset: 0, Bytes: size, Cause: errors.New("segment header cut short")}
		return nil
	}

	sr := newSegmentReader(f, n, segmentHeaderSize, size)
	for {
		_, _, err := sr.next()
		if err == io.EOF {
			w.size = size
			return nil
		}
		if err == nil {
			continue
		}
		if !isRecordProblem(err) {
			return fmt.Errorf("wal: read %s: %w", path, err)
		}
		cause, off := err, sr.off
		if version != formatAppend {
			// Zeros to the end are the clean end of a preallocated segment:
			// the records stop there, nothing was torn.
			zero, err := zeroFrom(f, off, size)
			if err != nil {
				return err
			}
			if zero {
				w.size = off
				return nil
			}
		}
		tail := make([]byte, size-off)
		if _, err := f.ReadAt(tail, off); err != nil {
			return fmt.Errorf("wal: read %s: %w", path, err)
		}
		at, intact := laterWrite(tail)
		if at >= 0 {
			cause := fmt.Errorf("%w, followed by a later write at offset %d", cause, off+int64(at))
			return w.damaged(n, off, size, intact, &CorruptionError{Dir: w.dir, Segment: n, Offset: off, Err: cause})
		}
		cut := size - off
		if version == formatAppend {
			if err := w.cut(off, size); err != nil {
				return err
			}
		} else if cut, err = w.wipe(off, tail); err != nil {
			return err
		}
		w.size = off
		w.truncated = &Truncation{Segment: n, Offset: off, Bytes: cut, Records: intact, Cause: cause}
		return nil
	}
}

// wipe overwrites the torn tail of the active preallocated segment, from off
// (tail holds its bytes) to the last non-zero byte, with zeros, durably, and
// returns how many bytes it zeroed. The segment keeps its size; its clean
// end is off again, and no intact record of the torn write stays behind
// the records appended next, where a later recovery could take it for a
// write that followed them.
func (w *WAL) wipe(off int64, tail []byte) (int64, error) {
	n := int64(len(tail))
	for n > 0 && tail[n-1] == 0 {
		n--
	}
	if err := zeroFill(w.f, off, off+n, nil); err != nil {
		return 0, err
	}
	if err := syncData(w.f); err != nil {
		return 0, fmt.Errorf("wal: sync %s: %w", w.f.Name(), err)
	}
	return n, nil
}

// checkSegmentHeader reads the header of segment n and returns its version
// (1 or 2). torn means the file holds only a prefix of a header followed by
// zeros (or nothing): a version-1 segment whose creation a crash
// interrupted (a version-2 one is renamed into place only once synced).
func checkSegmentHeader(f *os.File, n uint32, size int64) (version uint32, torn bool, err error) {
	got := make([]byte, min(size, segmentHeaderSize))
	if _, err := f.ReadAt(got, 0); err != nil {
		return 0, false, fmt.Errorf("wal: read %s: %w", f.Name(), err)
	}
	k := 0
	for _, v := range []uint32{FormatVersion, formatAppend} {
		want := segmentHeaderVersion(n, v)
		if int64(len(got)) == segmentHeaderSize && string(got) == string(want) {
			return v, false, nil
		}
		j := 0
		for j < len(got) && got[j] == want[j] {
			j++
		}
		k = max(k, j)
	}
	zero, err := zeroFrom(f, int64(k), size)
	if err != nil {
		return 0, false, err
	}
	if zero {
		return 0, true, nil
	}
	cause := fmt.Errorf("%w: want magic %q, version %d or %d, segment %d", errSegmentHeader, segmentMagic, formatAppend, FormatVersion, n)
	return 0, false, &CorruptionError{Dir: filepath.Dir(f.Name()), Segment: n, Offset: 0, Err: cause}
}

// zeroFrom reports whether every byte of f in [off, size) is zero.
func zeroFrom(f *os.File, off, size int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for off < size {
		n := min(int64(len(buf)), size-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("wal: read %s: %w", f.Name(), err)
		}
		if !allZero(buf[:n]) {
			return false, nil
		}
		off += n
	}
	return true, nil
}

// cut truncates the active segment to off, durably.
func (w *WAL) cut(off, size int64) error {
	if off == size {
		return nil
	}
	if err := w.f.Truncate(off); err != nil {
		return fmt.Errorf("wal: truncate %s: %w", w.f.Name(), err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("wal: sync %s: %w", w.f.Name(), err)
	}
	return nil
}

// damaged handles corruption at off in the newest segment n: it returns cerr,
// or with Options.Quarantine keeps the segment aside and continues after its
// intact prefix.
func (w *WAL) damaged(n uint32, off, size int64, intact int, cerr error) error {
	if !w.opts.Quarantine {
		return cerr
	}
	path := filepath.Join(w.dir, segmentName(n))
	kept, err := quarantine(w.f, path, off)
	if err != nil {
		return errors.Join(cerr, err)
	}
	if err := w.f.Close(); err != nil {
		return err
	}
	w.f = nil
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	w.f, w.size = f, max(off, segmentHeaderSize)
	if off < segmentHeaderSize {
		w.version = FormatVersion // quarantine wrote a fresh header
	}
	var ce *CorruptionError
	cause := cerr
	if errors.As(cerr, &ce) {
		cause = ce.Err
	}
	w.truncated = &Truncation{Segment: n, Offset: off, Bytes: size - off, Records: intact, Cause: cause, Quarantine: kept}
	return nil
}

// quarantine keeps the damaged segment at path under a new name and puts in
// its place a copy of its first keep bytes (a fresh header if keep does not
// cover one). The original bytes are never modified: the new name is a hard
// link to them (or, where links fail, a synced copy), and the replacement is
// built aside and renamed over path.
func quarantine(f *os.File, path string, keep int64) (string, error) {
	dir := filepath.Dir(path)
	kept := path + ".corrupt"
	for i := 1; ; i++ {
		if _, err := os.Lstat(kept); errors.Is(err, fs.ErrNotExist) {
			break
		}
		kept = fmt.Sprintf("%s.corrupt.%d", path, i)
	}
	if err := os.Link(path, kept); err != nil {
		if err := copyFile(f, kept); err != nil {
			return "", err
		}
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return "", err
	}

	var prefix []byte
	if keep < segmentHeaderSize {
		n, _ := parseSegmentName(filepath.Base(path))
		prefix = segmentHeader(n)
	} else {
		prefix = make([]byte, keep)
		if _, err := f.ReadAt(prefix, 0); err != nil {
			return "", fmt.Errorf("wal: read %s: %w", path, err)
		}
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	if err := writeSynced(tmp, prefix); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", errors.Join(fmt.Errorf("wal: %w", err), os.Remove(tmp))
	}
	return kept, fileutil.SyncDir(dir)
}

// copyFile copies all of src into a new file dst, synced.
func copyFile(src *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	_, err = io.Copy(out, io.NewSectionReader(src, 0, math.MaxInt64))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: copy %s to %s: %w", src.Name(), dst, err)
	}
	return nil
}

// writeSynced writes data to a new file at path and fsyncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: write %s: %w", path, err)
	}
	return nil
}

// Truncated returns what Open cut from the newest segment, or nil if its
// tail was clean.
func (w *WAL) Truncated() *Truncation { return w.truncated }

// MaxRecordSize is the largest payload Append accepts (Options.MaxRecordSize).
func (w *WAL) MaxRecordSize() int { return w.opts.MaxRecordSize }

// End returns the position after the last durable record (the position of
// the next record's header while nothing is in flight).
func (w *WAL) End() Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end
}

// First returns the start of the oldest segment still on disk. Replaying
// after a position before it yields only what is still there.
func (w *WAL) First() Position {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Position{Segment: w.first}
}

// Append writes payloads as consecutive records and returns once they are
// durable (written and fsynced), with the position after the last one.
// Concurrent calls are batched: one write and one fsync cover every call
// waiting at that moment. The records of one call are contiguous and in
// order; a call may span two segments, a record never does.
//
// No payload may exceed Options.MaxRecordSize (ErrTooLarge: nothing is
// written). With no payloads, Append writes nothing and returns End().
//
// If ctx ends before the records are taken for writing, Append returns
// ctx.Err() and writes nothing. If it ends after, Append returns an error
// wrapping ctx.Err() without waiting, and the records may still become
// durable (as after a crash, an unacknowledged write may survive). Either
// way the payloads are no longer referenced when Append returns.
func (w *WAL) Append(ctx context.Context, payloads ...[]byte) (Position, error) {
	if err := ctx.Err(); err != nil {
		return Position{}, err
	}
	req := &request{payloads: payloads, done: make(chan struct{})}
	for _, p := range payloads {
		if len(p) > w.opts.MaxRecordSize {
			return Position{}, fmt.Errorf("wal: append %d-byte record: %w (max %d)", len(p), ErrTooLarge, w.opts.MaxRecordSize)
		}
		req.bytes += len(p)
	}

	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return Position{}, err
	}
	if len(payloads) == 0 {
		defer w.mu.Unlock()
		return w.end, nil
	}
	w.queue = append(w.queue, req)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}

	select {
	case <-req.done:
		return req.pos, req.err
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !req.taken {
		if i := slices.Index(w.queue, req); i >= 0 {
			w.queue = slices.Delete(w.queue, i, i+1)
			return Position{}, ctx.Err()
		}
		return Position{}, req.err // failed while queued (fail sets it under w.mu)
	}
	return Position{}, fmt.Errorf("wal: append abandoned while being written, may still become durable: %w", ctx.Err())
}

// usableLocked returns why appends are refused, or nil. Requires w.mu held.
func (w *WAL) usableLocked() error {
	if w.closing {
		return ErrClosed
	}
	return w.failed
}

// run is the committer: it takes whatever is queued, writes it as one batch
// and wakes the callers, until Close.
func (w *WAL) run() {
	defer close(w.exited)
	for {
		select {
		case <-w.wake:
		case <-w.quit:
		}
		for {
			w.mu.Lock()
			if len(w.queue) == 0 {
				closing := w.closing
				w.mu.Unlock()
				if closing {
					return
				}
				break
			}
			reqs, chunks := w.takeLocked()
			w.mu.Unlock()
			durable, err := w.commit(chunks)
			w.finish(reqs, durable, err)
		}
	}
}

// takeLocked removes a batch of requests from the queue (at least one, up to
// maxBatchBytes) and encodes it into chunks, one per segment it touches.
// After this the requests' payloads are no longer needed. Requires w.mu held.
func (w *WAL) takeLocked() ([]*request, []chunk) {
	n, bytes := 0, 0
	for n < len(w.queue) && (n == 0 || bytes+w.queue[n].bytes <= maxBatchBytes) {
		bytes += w.queue[n].bytes
		n++
	}
	reqs := slices.Clone(w.queue[:n])
	w.queue = slices.Delete(w.queue, 0, n)

	seg, size, limit := w.seg, w.size, w.limit
	var chunks []chunk
	for _, r := range reqs {
		r.taken = true
		for _, p := range r.payloads {
			rec := int64(recordHeaderSize + len(p))
			if size+rec > limit && size > segmentHeaderSize {
				seg, size, limit = seg+1, segmentHeaderSize, w.opts.SegmentSize
				chunks = append(chunks, chunk{seg: seg, start: size, create: true, data: w.buffer(len(chunks))})
			} else if len(chunks) == 0 {
				chunks = append(chunks, chunk{seg: seg, start: size, data: w.buffer(0)})
			}
			c := &chunks[len(chunks)-1]
			kind := kindNext
			if len(c.data) == 0 {
				kind = kindFirst
			}
			c.data = appendRecord(c.data, kind, p)
			size += rec
		}
		r.payloads = nil
		r.pos = Position{Segment: seg, Offset: uint32(size)}
	}
	return reqs, chunks
}

// buffer returns reusable write buffer i, emptied.
func (w *WAL) buffer(i int) []byte {
	for len(w.bufs) <= i {
		w.bufs = append(w.bufs, nil)
	}
	return w.bufs[i][:0]
}

// commit writes and syncs the chunks in order and returns the durable end
// reached; on error, the chunks before the failing one are durable.
func (w *WAL) commit(chunks []chunk) (Position, error) {
	for i, c := range chunks {
		if c.create {
			if err := w.rotate(c.seg); err != nil {
				return w.durable(), err
			}
		}
		if _, err := w.f.WriteAt(c.data, c.start); err != nil {
			return w.durable(), fmt.Errorf("wal: write %s at %d: %w", w.f.Name(), c.start, err)
		}
		if err := syncData(w.f); err != nil {
			return w.durable(), fmt.Errorf("wal: sync %s: %w", w.f.Name(), err)
		}
		w.writes.Add(1)
		w.size = c.start + int64(len(c.data))
		w.bufs[i] = c.data // keep the grown buffer
		w.mu.Lock()
		w.end = w.durable()
		w.mu.Unlock()
		if w.next == nil && 2*(w.size-segmentHeaderSize) >= w.limit-segmentHeaderSize {
			w.prepareNext()
		}
	}
	for i := range w.bufs {
		if cap(w.bufs[i]) > 2*maxBatchBytes {
			w.bufs[i] = nil // do not keep what one huge call grew
		}
	}
	return w.durable(), nil
}

// prepareNext starts preparing segment w.seg+1 in the background, so that
// the rotation to it, on the path of some caller's acknowledgement, is only
// a rename and a directory fsync. Called by the committer, when the active
// segment is half full or, failing that, at the rotation itself.
func (w *WAL) prepareNext() {
	p := &nextSegment{n: w.seg + 1, size: w.opts.SegmentSize, done: make(chan struct{})}
	w.next = p
	go func() {
		defer close(p.done)
		p.err = prepareSegment(w.dir, p.n, p.size, w.stopPrep)
	}()
}

// rotate makes segment n (w.seg+1), prepared by prepareNext, the active one.
// The old segment was synced after its last write; what follows its last
// record is zeros (version 2) or nothing (version 1).
func (w *WAL) rotate(n uint32) error {
	if w.next == nil {
		w.prepareNext()
	}
	p := w.next
	<-p.done
	w.next = nil
	if p.err != nil {
		// It failed in the background, maybe for a reason gone since (a
		// full disk); try once more, on this caller's time, before failing.
		if err := prepareSegment(w.dir, p.n, p.size, nil); err != nil {
			return errors.Join(p.err, err)
		}
	}
	if p.n != n {
		return fmt.Errorf("wal: prepared segment %d, rotating to %d", p.n, n) // cannot happen
	}
	f, err := installSegment(w.dir, n)
	if err != nil {
		return err
	}
	old := w.f
	w.f, w.seg, w.size, w.limit, w.version = f, n, segmentHeaderSize, p.size, FormatVersion
	// The old segment was synced after its last write; a close error
	// cannot lose anything.
	_ = old.Close()
	w.mu.Lock()
	w.end = Position{Segment: n, Offset: segmentHeaderSize}
	w.mu.Unlock()
	return nil
}

// durable is the committer's view of the end of the log: w.seg, w.size.
func (w *WAL) durable() Position { return Position{Segment: w.seg, Offset: uint32(w.size)} }

// finish records the outcome of a batch and wakes its callers. After a write
// or sync error, every request not durable fails, and so does every later one.
func (w *WAL) finish(reqs []*request, durable Position, err error) {
	if err != nil {
		w.fail(err)
	}
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	for _, r := range reqs {
		if r.pos.Compare(durable) > 0 {
			r.err = failed
		}
		close(r.done)
	}
}

// fail makes the log refuse every later append, and fails the queued ones.
func (w *WAL) fail(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		return
	}
	w.failed = fmt.Errorf("%w: %w", ErrFailed, cause)
	for _, r := range w.queue {
		r.err = w.failed
		close(r.done)
	}
	w.queue = nil
}

// TruncateBefore deletes the segments that lie wholly before pos — every
// record in them has a position ≤ pos — oldest first, and returns how many
// it deleted. Call it with a position already folded into a published
// snapshot. The active (newest) segment is never deleted.
func (w *WAL) TruncateBefore(pos Position) (int, error) {
	w.files.Lock()
	defer w.files.Unlock()
	w.mu.Lock()
	first, end, closing := w.first, w.end, w.closing
	w.mu.Unlock()
	if closing {
		return 0, ErrClosed
	}
	if pos.Compare(end) > 0 {
		return 0, fmt.Errorf("wal %s: truncate before %v: %w (log ends at %v)", w.dir, pos, ErrPosition, end)
	}
	removed := 0
	var err error
	for s := first; s < end.Segment && s <= pos.Segment; s++ {
		path := filepath.Join(w.dir, segmentName(s))
		if s == pos.Segment {
			before, serr := recordsEndBy(path, int64(pos.Offset))
			if serr != nil {
				err = serr
				break
			}
			if !before {
				break
			}
		}
		if err = os.Remove(path); err != nil {
			break
		}
		removed++
	}
	if removed > 0 {
		w.mu.Lock()
		w.first += uint32(removed)
		w.mu.Unlock()
		err = errors.Join(err, fileutil.SyncDir(w.dir))
	}
	if err != nil {
		return removed, fmt.Errorf("wal %s: truncate: %w", w.dir, err)
	}
	return removed, nil
}

// recordsEndBy reports whether no record of the segment at path lies after
// offset off: nothing follows it but zeros (the clean end of a version-2
// segment) or the end of the file. A record after off would start with a
// header whose kind is not zero.
func recordsEndBy(path string, off int64) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	return zeroFrom(f, off, st.Size())
}

// Close waits for the appends already queued, then closes the log and
// releases its lock. Later calls return ErrClosed; Close again returns nil.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	w.mu.Unlock()
	close(w.quit)
	<-w.exited
	// Abandon a preparation; a prepared segment is not part of the log.
	close(w.stopPrep)
	var err error
	if p := w.next; p != nil {
		<-p.done
		// A failed or stopped preparation removed its file; its error
		// belongs to a rotation that never came.
		if p.err == nil {
			err = os.Remove(filepath.Join(w.dir, nextSegmentName(p.n)))
		}
		w.next = nil
	}
	// Wait for a running Replay or TruncateBefore.
	w.files.Lock()
	defer w.files.Unlock()
	if w.f != nil {
		err = errors.Join(err, w.f.Close())
	}
	return errors.Join(err, w.lock.Release())
}
