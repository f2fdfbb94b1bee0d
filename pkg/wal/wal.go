package wal

// Concurrency. One committer goroutine (run) owns the active segment file and
// does every write and fsync, so writes are serialised and each is synced
// before the next starts — recovery depends on that (see laterWrite).
// Appenders only queue requests and wait. w.mu guards the queue and the
// state other goroutines read (end, segment range, closing, failed); the
// committer holds it to take and encode a batch, never across I/O.
// w.files is held shared by Replay and exclusively by TruncateBefore, so a
// replay never sees a segment vanish under it.

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
	"time"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// lockFile is the file whose flock the appending process holds.
const lockFile = "LOCK"

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
	// SegmentSize is the size at which a new segment starts: a record that
	// would take a non-empty segment past it goes to the next one, so no
	// segment exceeds it. Default 64 MiB; at most 4 GiB - 1, because
	// offsets are 32 bits.
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
	// Fault, when set, is asked before each write, sync and segment
	// creation of an append (op "write", "sync", "create"; seg the
	// segment); an error it returns is taken as that operation's failure.
	// It is the test seam for a full or failing disk; nil in production.
	Fault func(op string, seg uint32) error
	// HealBackoff is the first wait before a failed log tries to heal
	// (doubling up to maxHealBackoff). Default 100 ms.
	HealBackoff time.Duration
}

// maxHealBackoff bounds the wait between a failed log's attempts to heal:
// once the disk has room again, appends resume within it.
const maxHealBackoff = 5 * time.Second

func (o Options) withDefaults() (Options, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.HealBackoff <= 0 {
		o.HealBackoff = 100 * time.Millisecond
	}
	minSize := int64(segmentStart + recordHeaderSize + 1)
	if o.SegmentSize < minSize || o.SegmentSize > math.MaxUint32 {
		return o, fmt.Errorf("wal: segment size %d out of range [%d, %d]", o.SegmentSize, minSize, int64(math.MaxUint32))
	}
	room := o.SegmentSize - segmentStart - recordHeaderSize
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
	failed  error // wraps ErrFailed; cleared by a heal when healable
	cause   error // what failed first, kept while heals fail
	// healable: failed is a write, sync or create error, which a heal
	// (heal) may clear; corruption found by Replay is not.
	healable bool

	wake   chan struct{} // capacity 1: "the queue is not empty"
	quit   chan struct{} // closed by Close
	exited chan struct{} // closed when run returns

	// Owned by the committer goroutine (and by Open before it starts).
	f    *os.File // the active segment, end.Segment
	seg  uint32
	size int64
	bufs [][]byte // reused write buffers, one per chunk

	writes atomic.Int64 // writes synced, for benchmarks and later metrics
	heals  atomic.Int64 // failures healed without a restart
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

// chunk is one write: records for one segment, written and fsynced together.
type chunk struct {
	seg    uint32
	start  int64
	data   []byte
	create bool // the segment is new: create it first
}

// Dir is the log's directory.
func (w *WAL) Dir() string { return w.dir }

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
	lock, err := fileutil.TryLock(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("wal %s: %w", dir, err)
	}
	w := &WAL{
		dir:    dir,
		opts:   opts,
		lock:   lock,
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
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
		f, err := createSegment(w.dir, n, w.opts.After)
		if err != nil {
			return err
		}
		w.f, w.seg, w.size, w.first = f, n, segmentStart, n
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
	// The checkpoint lies at or before the log's end: a compaction folded
	// records the log held. A log that ends before it lost records.
	if end := w.durable(); !w.opts.After.IsZero() && end.Compare(w.opts.After) < 0 {
		return &CorruptionError{Dir: w.dir, Segment: end.Segment, Offset: int64(end.Offset),
			Err: fmt.Errorf("the log ends at %v, before its checkpoint %v: records from %v to %v were cut or removed", end, w.opts.After, end, w.opts.After)}
	}
	return nil
}

// listSegments returns the segment numbers in dir, ascending, and removes
// what an interrupted quarantine left behind.
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
		} else if strings.HasPrefix(name, ".") && strings.HasSuffix(name, segmentSuffix+".tmp") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(segs)
	return segs, nil
}

// createSegment creates segment n with its header and its link record
// naming prev (the log's end before it), durably (file and directory
// entry), and returns it open for writing at segmentStart. The file is
// written under a temporary name and renamed, so a segment under its own
// name always holds both: one that lacks them was cut.
func createSegment(dir string, n uint32, prev Position) (*os.File, error) {
	path := filepath.Join(dir, segmentName(n))
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("wal: create segment: %s exists", path)
	}
	tmp := filepath.Join(dir, "."+segmentName(n)+".tmp")
	if err := writeSynced(tmp, appendLink(segmentHeader(n), prev)); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("wal: create segment: %w", err)
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: create segment: %w", err)
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

	torn, err := checkSegmentHeader(f, n, size)
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return w.damaged(n, 0, size, 0, err)
		}
		return err
	}
	prevEnd, prevLinked, err := w.segmentEnd(n - 1)
	if err != nil {
		return err
	}
	if torn {
		// A segment is created whole under its name (createSegment):
		// one whose header is cut, after a segment written so, was cut
		// after it held records. A log written before link records
		// wrote the header in place, so a crash could leave it torn:
		// nothing followed it (records are written only after the
		// header is synced).
		if prevLinked {
			return &CorruptionError{Dir: w.dir, Segment: n, Err: fmt.Errorf("the segment is empty or its header is cut (%d bytes): it was created whole, so acknowledged records after %v may be lost", size, prevEnd)}
		}
		if err := w.cut(0, size); err != nil {
			return err
		}
		if _, err := f.WriteAt(appendLink(segmentHeader(n), prevEnd), 0); err != nil {
			return fmt.Errorf("wal: rewrite header of %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("wal: sync %s: %w", path, err)
		}
		w.size = segmentStart
		w.truncated = &Truncation{Segment: n, Offset: 0, Bytes: size, Cause: errors.New("segment header cut short")}
		return nil
	}

	hdr := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return fmt.Errorf("wal: read %s: %w", path, err)
	}
	linked := headerVersion(hdr) >= FormatVersion
	sr := newSegmentReader(f, n, segmentHeaderSize, size)
	for {
		_, _, err := sr.next()
		if err == io.EOF {
			if err := w.checkLink(n, linked, sr, prevEnd, n > w.first); err != nil {
				return err
			}
			w.size = size
			return nil
		}
		if err == nil {
			continue
		}
		if !isRecordProblem(err) {
			return fmt.Errorf("wal: read %s: %w", path, err)
		}
		off := sr.off
		tail := make([]byte, size-off)
		if _, err := f.ReadAt(tail, off); err != nil {
			return fmt.Errorf("wal: read %s: %w", path, err)
		}
		at, intact := laterWrite(tail)
		if at >= 0 {
			cause := fmt.Errorf("%w, followed by a later write at offset %d", err, off+int64(at))
			return w.damaged(n, off, size, intact, &CorruptionError{Dir: w.dir, Segment: n, Offset: off, Err: cause})
		}
		if err := w.checkLink(n, linked, sr, prevEnd, n > w.first); err != nil {
			return err
		}
		if err := w.cut(off, size); err != nil {
			return err
		}
		w.size = off
		w.truncated = &Truncation{Segment: n, Offset: off, Bytes: size - off, Records: intact, Cause: err}
		return nil
	}
}

// segmentEnd is the end (size) of segment n in the log's directory as a
// position, and whether it is a linked (version 2) segment; the zero
// Position if it does not exist (then the log's start, After).
func (w *WAL) segmentEnd(n uint32) (Position, bool, error) {
	if n == 0 || n < w.first {
		return w.opts.After, false, nil
	}
	f, err := os.Open(filepath.Join(w.dir, segmentName(n)))
	if err != nil {
		return Position{}, false, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Position{}, false, fmt.Errorf("wal: %w", err)
	}
	hdr := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return Position{Segment: n, Offset: uint32(st.Size())}, false, nil
	}
	return Position{Segment: n, Offset: uint32(st.Size())}, string(hdr[:len(segmentMagic)]) == segmentMagic && headerVersion(hdr) >= FormatVersion, nil
}

// checkLink checks the newest segment n's link record (read by sr) when
// the segment is linked: it must be there (a segment is created with it)
// and, when a previous segment exists (hasPrev), name that segment's end.
func (w *WAL) checkLink(n uint32, linked bool, sr *segmentReader, prevEnd Position, hasPrev bool) error {
	if !linked {
		return nil
	}
	if !sr.hasLink {
		return &CorruptionError{Dir: w.dir, Segment: n, Offset: segmentHeaderSize,
			Err: errors.New("the segment's link record is missing: it was cut back to its header, and acknowledged records in it may be lost")}
	}
	if hasPrev && sr.link != prevEnd {
		return cutError(w.dir, prevEnd, sr.link)
	}
	return nil
}

// cutError is the corruption of a segment that ends at got where its
// successor's link says it ended at want.
func cutError(dir string, got, want Position) error {
	off := got.Offset
	if got.Compare(want) > 0 {
		off = want.Offset
	}
	return &CorruptionError{Dir: dir, Segment: got.Segment, Offset: int64(off), Err: errors.New(cutMessage(got, want))}
}

// cutMessage says how a segment that ends at got differs from the end
// want its successor's link names (Open, a replay and Scan say it alike).
func cutMessage(got, want Position) string {
	if got.Compare(want) < 0 {
		return fmt.Sprintf("the segment was cut: it ends at %v, the next segment's link says it ended at %v (records from %v to %v lost)", got, want, got, want)
	}
	return fmt.Sprintf("the segment ends at %v, past %v where the next segment's link says it ended", got, want)
}

// checkSegmentHeader reads the header of segment n. torn means the file
// holds only a prefix of the header followed by zeros (or nothing): a
// segment whose creation a crash interrupted.
func checkSegmentHeader(f *os.File, n uint32, size int64) (torn bool, err error) {
	want := segmentHeader(n)
	got := make([]byte, min(size, segmentHeaderSize))
	if _, err := f.ReadAt(got, 0); err != nil {
		return false, fmt.Errorf("wal: read %s: %w", f.Name(), err)
	}
	if int64(len(got)) == segmentHeaderSize && (string(got) == string(want) || string(got) == string(segmentHeaderVersion(n, formatVersion1))) {
		return false, nil
	}
	k := 0
	for k < len(got) && got[k] == want[k] {
		k++
	}
	zero, err := zeroFrom(f, int64(k), size)
	if err != nil {
		return false, err
	}
	if zero {
		return true, nil
	}
	cause := fmt.Errorf("%w: want magic %q, version %d, segment %d", errSegmentHeader, segmentMagic, FormatVersion, n)
	return false, &CorruptionError{Dir: filepath.Dir(f.Name()), Segment: n, Offset: 0, Err: cause}
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
	prev, _, err := w.segmentEnd(n - 1)
	if err != nil {
		return errors.Join(cerr, err)
	}
	kept, newSize, err := quarantine(w.f, path, off, appendLink(segmentHeader(n), prev))
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
	w.f, w.size = f, newSize
	var ce *CorruptionError
	cause := cerr
	if errors.As(cerr, &ce) {
		cause = ce.Err
	}
	w.truncated = &Truncation{Segment: n, Offset: off, Bytes: size - off, Records: intact, Cause: cause, Quarantine: kept}
	return nil
}

// quarantine keeps the damaged segment at path under a new name and puts in
// its place a copy of its first keep bytes, or fresh (a new segment's
// header and link record) if keep does not cover a sound header (and, for a
// linked segment, its link); it returns the new name and the replacement's
// size. The original bytes are never modified: the new name is a hard link
// to them (or, where links fail, a synced copy), and the replacement is
// built aside and renamed over path.
func quarantine(f *os.File, path string, keep int64, fresh []byte) (string, int64, error) {
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
			return "", 0, err
		}
	}
	if err := fileutil.SyncDir(dir); err != nil {
		return "", 0, err
	}

	prefix := fresh
	if keep >= segmentHeaderSize {
		b := make([]byte, keep)
		if _, err := f.ReadAt(b, 0); err != nil {
			return "", 0, fmt.Errorf("wal: read %s: %w", path, err)
		}
		if headerVersion(b) < FormatVersion || keep >= segmentStart {
			prefix = b
		}
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	if err := writeSynced(tmp, prefix); err != nil {
		return "", 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", 0, errors.Join(fmt.Errorf("wal: %w", err), os.Remove(tmp))
	}
	return kept, int64(len(prefix)), fileutil.SyncDir(dir)
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
	var retry *time.Timer
	backoff := w.opts.HealBackoff
	for {
		var healNow <-chan time.Time
		w.mu.Lock()
		healing := w.failed != nil && w.healable && !w.closing
		w.mu.Unlock()
		if healing {
			if retry == nil {
				retry = time.NewTimer(backoff)
			}
			healNow = retry.C
		}
		select {
		case <-w.wake:
		case <-w.quit:
		case <-healNow:
			retry = nil
			if err := w.heal(); err != nil {
				backoff = min(2*backoff, maxHealBackoff)
				w.mu.Lock()
				w.failed = fmt.Errorf("%w: %w (healing: %w)", ErrFailed, w.cause, err)
				w.mu.Unlock()
			} else {
				backoff = w.opts.HealBackoff
			}
			continue
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

	seg, size := w.seg, w.size
	var chunks []chunk
	for _, r := range reqs {
		r.taken = true
		for _, p := range r.payloads {
			rec := int64(recordHeaderSize + len(p))
			if size+rec > w.opts.SegmentSize && size > segmentStart {
				seg, size = seg+1, segmentStart
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
			if err := w.fault("create", c.seg); err != nil {
				return w.durable(), fmt.Errorf("wal: create segment %s: %w", segmentName(c.seg), err)
			}
			f, err := createSegment(w.dir, c.seg, w.durable())
			if err != nil {
				return w.durable(), err
			}
			old := w.f
			w.f, w.seg, w.size = f, c.seg, segmentStart
			// The old segment was synced after its last write; a close
			// error cannot lose anything.
			_ = old.Close()
			w.mu.Lock()
			w.end = Position{Segment: c.seg, Offset: segmentStart}
			w.mu.Unlock()
		}
		if err := w.fault("write", c.seg); err != nil {
			// as a short write would: part of the chunk may be on disk
			_, _ = w.f.WriteAt(c.data[:len(c.data)/2], c.start)
			return w.durable(), fmt.Errorf("wal: write %s at %d: %w", w.f.Name(), c.start, err)
		}
		if _, err := w.f.WriteAt(c.data, c.start); err != nil {
			return w.durable(), fmt.Errorf("wal: write %s at %d: %w", w.f.Name(), c.start, err)
		}
		if err := w.fault("sync", c.seg); err != nil {
			return w.durable(), fmt.Errorf("wal: sync %s: %w", w.f.Name(), err)
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
	}
	for i := range w.bufs {
		if cap(w.bufs[i]) > 2*maxBatchBytes {
			w.bufs[i] = nil // do not keep what one huge call grew
		}
	}
	return w.durable(), nil
}

// durable is the committer's view of the end of the log: w.seg, w.size.
func (w *WAL) durable() Position { return Position{Segment: w.seg, Offset: uint32(w.size)} }

// fault asks Options.Fault, the test seam, about op on segment seg.
func (w *WAL) fault(op string, seg uint32) error {
	if w.opts.Fault == nil {
		return nil
	}
	return w.opts.Fault(op, seg)
}

// finish records the outcome of a batch and wakes its callers. After a write
// or sync error, every request not durable fails, and so does every later
// one until the log heals.
func (w *WAL) finish(reqs []*request, durable Position, err error) {
	if err != nil {
		w.failWith(err, true)
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

// fail makes the log refuse every later append for good (corruption
// found by a replay), and fails the queued ones.
func (w *WAL) fail(cause error) { w.failWith(cause, false) }

// failWith makes the log refuse appends and fails the queued ones. A
// healable failure (a write, sync or create error: a full disk, an I/O
// error) lasts until heal succeeds; any other until the log is reopened.
func (w *WAL) failWith(cause error, healable bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failed != nil {
		w.healable = w.healable && healable
		return
	}
	w.failed = fmt.Errorf("%w: %w", ErrFailed, cause)
	w.cause, w.healable = cause, healable
	for _, r := range w.queue {
		r.err = w.failed
		close(r.done)
	}
	w.queue = nil
}

// heal makes a log that failed to write usable again, without a restart:
// it cuts the active segment back to its durable end (what was written
// after it, by the failed write or a sync whose pages the kernel may have
// dropped, was never acknowledged), syncs that, and starts a new segment,
// so nothing written by the failed attempt is ever read and no later
// write lands on a file whose last sync failed. Every step may fail while
// the cause lasts (a full disk): the committer tries again after a
// backoff. Requires the committer goroutine.
func (w *WAL) heal() error {
	if err := w.f.Truncate(w.size); err != nil {
		return fmt.Errorf("wal: cut %s to %d: %w", w.f.Name(), w.size, err)
	}
	if err := w.fault("sync", w.seg); err != nil {
		return fmt.Errorf("wal: sync %s: %w", w.f.Name(), err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("wal: sync %s: %w", w.f.Name(), err)
	}
	next := w.seg + 1
	// A create that failed half way left the file without an
	// acknowledged record in it.
	if err := os.Remove(filepath.Join(w.dir, segmentName(next))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: %w", err)
	}
	if err := w.fault("create", next); err != nil {
		return fmt.Errorf("wal: create segment %s: %w", segmentName(next), err)
	}
	f, err := createSegment(w.dir, next, w.durable())
	if err != nil {
		return err
	}
	old := w.f
	w.f, w.seg, w.size = f, next, segmentStart
	_ = old.Close() // synced above
	w.heals.Add(1)
	w.mu.Lock()
	w.end = w.durable()
	w.failed, w.cause, w.healable = nil, nil, false
	w.mu.Unlock()
	return nil
}

// Failing returns why the log refuses appends (wrapping ErrFailed), or
// nil while it takes them. A write failure (a full disk) heals on its
// own once its cause is gone; corruption found by a replay does not.
func (w *WAL) Failing() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// Heals is how many write failures the log has healed since it opened.
func (w *WAL) Heals() int64 { return w.heals.Load() }

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
			st, serr := os.Stat(path)
			if serr != nil {
				err = serr
				break
			}
			if int64(pos.Offset) < st.Size() {
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
	// Wait for a running Replay or TruncateBefore.
	w.files.Lock()
	defer w.files.Unlock()
	var err error
	if w.f != nil {
		err = w.f.Close()
	}
	return errors.Join(err, w.lock.Release())
}
