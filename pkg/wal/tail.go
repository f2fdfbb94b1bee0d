package wal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrBehind says a Tail's log no longer holds the records after its
// position: the appending process deleted the segments they were in (a
// compaction folded them) or cut the log below it. The follower starts
// again from the log's checkpoint.
var ErrBehind = errors.New("wal: the log no longer holds the records after this position")

// Tail follows a log another process appends to, without its lock: a
// read-only replica's view of a writer's log (Kafka and Raft followers
// tail a log the same way). It remembers where it is; each Read hands out
// the complete records appended since, in order, and stops at the first
// record not yet wholly written. It never changes the log.
//
// A record is handed out once it is intact, which may be an instant
// before the writer's fsync returns and the write is acknowledged: a
// replica on the writer's machine can show a write a moment before its
// client hears of it, never one the writer's recovery would drop (a torn
// record is not intact; a process crash keeps what it wrote).
type Tail struct {
	dir  string
	pos  Position
	f    *os.File // the segment pos lies in, once opened
	size int64    // of f when last read
	// stopped is what ended the last read of f before its end (a record
	// not wholly written yet, or damage); nil when it read to the end.
	stopped error
	sr      *segmentReader // reused between reads
}

// OpenTail follows the log in dir from after (its records after it).
func OpenTail(dir string, after Position) *Tail { return &Tail{dir: dir, pos: after} }

// Position is where the tail is: after the last record it handed out.
func (t *Tail) Position() Position { return t.pos }

// Close closes the segment file the tail holds open.
func (t *Tail) Close() error {
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}

// Read calls fn with each complete record after the tail's position, up
// to what the log holds now, and moves the position past it; it returns
// how many it handed out. fn's payload is valid until it returns; an error
// from fn stops the read (the record it refused is not passed). ErrBehind
// means the records the tail needs are gone; damage is a *CorruptionError.
func (t *Tail) Read(fn func(pos Position, payload []byte) error) (int, error) {
	n := 0
	for {
		if t.f == nil {
			ok, err := t.open()
			if err != nil || !ok {
				return n, err
			}
		}
		st, err := t.f.Stat()
		if err != nil {
			return n, fmt.Errorf("wal tail: %w", err)
		}
		if st.Size() < int64(t.pos.Offset) {
			return n, fmt.Errorf("%w (segment %d is %d bytes, the tail is at %v)", ErrBehind, t.pos.Segment, st.Size(), t.pos)
		}
		t.size = st.Size()
		k, err := t.readSegment(fn)
		n += k
		if err != nil {
			return n, err
		}
		// The segment's end for now. A later segment means this one is
		// complete: move on (a problem here is then damage, not a write
		// in progress: the writer starts a segment only after the last
		// one's writes are synced, and cuts a torn tail before writing on).
		next := t.pos.Segment + 1
		if _, err := os.Stat(filepath.Join(t.dir, segmentName(next))); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return n, nil
			}
			return n, fmt.Errorf("wal tail: %w", err)
		}
		if t.stopped != nil {
			// Read once more: the write may have ended after our read.
			k, err := t.reread(fn)
			n += k
			if err != nil {
				return n, err
			}
			if t.stopped != nil {
				return n, &CorruptionError{Dir: t.dir, Segment: t.pos.Segment, Offset: int64(t.pos.Offset), Err: t.stopped}
			}
		}
		t.Close()
		t.pos = Position{Segment: next, Offset: segmentHeaderSize}
	}
}

// reread reads the current segment again to its (new) end.
func (t *Tail) reread(fn func(Position, []byte) error) (int, error) {
	st, err := t.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("wal tail: %w", err)
	}
	t.size = st.Size()
	return t.readSegment(fn)
}

// open opens the segment the tail's position lies in (the oldest one for
// a position before every record); false when the log has no segment
// for it yet.
func (t *Tail) open() (bool, error) {
	segs, err := segmentNumbers(t.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("wal tail: %w", err)
	}
	if len(segs) == 0 {
		return false, nil
	}
	if t.pos.Segment < segs[0] {
		if !t.pos.IsZero() && !(t.pos.Segment == segs[0]-1 && t.pos.Offset <= segmentHeaderSize) {
			return false, fmt.Errorf("%w (the tail is at %v, the oldest segment is %d)", ErrBehind, t.pos, segs[0])
		}
		t.pos = Position{Segment: segs[0], Offset: segmentHeaderSize}
	}
	if t.pos.Segment > segs[len(segs)-1] {
		return false, nil // the segment after the last one read is not there yet
	}
	f, err := os.Open(filepath.Join(t.dir, segmentName(t.pos.Segment)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("%w (segment %d is gone)", ErrBehind, t.pos.Segment)
		}
		return false, fmt.Errorf("wal tail: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return false, fmt.Errorf("wal tail: %w", err)
	}
	torn, err := checkSegmentHeader(f, t.pos.Segment, st.Size())
	if err != nil || torn {
		f.Close()
		return false, err // a header still being written: nothing yet
	}
	if t.pos.Offset < segmentHeaderSize {
		t.pos.Offset = segmentHeaderSize
	}
	t.f = f
	return true, nil
}

// readSegment hands out the intact records of the open segment from the
// position to t.size, setting t.stopped to what ended it before t.size (a
// record not wholly written yet, or damage: the caller tells them apart).
func (t *Tail) readSegment(fn func(Position, []byte) error) (n int, err error) {
	t.stopped = nil
	if t.sr == nil {
		t.sr = &segmentReader{r: bufio.NewReaderSize(nil, 64<<10)}
	}
	sr := t.sr
	sr.reset(t.f, t.pos.Segment, int64(t.pos.Offset), t.size)
	for {
		_, payload, err := sr.next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			if isRecordProblem(err) || errors.Is(err, io.ErrUnexpectedEOF) {
				t.stopped = err
				return n, nil
			}
			return n, fmt.Errorf("wal tail: read %s: %w", t.f.Name(), err)
		}
		pos := Position{Segment: t.pos.Segment, Offset: uint32(sr.off)}
		if err := fn(pos, payload); err != nil {
			return n, err
		}
		t.pos = pos
		n++
	}
}
