package wal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// segmentReader reads the records of one segment in order, from off up to
// end. After a record problem it stays at the damaged record's offset.
type segmentReader struct {
	r   *bufio.Reader
	seg uint32
	off int64 // offset of the next record
	end int64
	hdr [recordHeaderSize]byte
	buf []byte
	// link is what the segment's link record (kindLink) said, when the
	// reader passed one: next skips it, as no caller wants it as a record.
	link    Position
	hasLink bool
}

func newSegmentReader(f *os.File, seg uint32, off, end int64) *segmentReader {
	return &segmentReader{
		r:   bufio.NewReaderSize(io.NewSectionReader(f, off, end-off), 1<<20),
		seg: seg,
		off: off,
		end: end,
	}
}

// reset points s at segment seg of f from off to end, keeping its buffers
// (a Tail reads a little every few milliseconds: a fresh 1 MiB buffer each
// time was most of what it allocated).
func (s *segmentReader) reset(f *os.File, seg uint32, off, end int64) {
	s.r.Reset(io.NewSectionReader(f, off, end-off))
	s.seg, s.off, s.end = seg, off, end
	s.link, s.hasLink = Position{}, false
}

// next returns the next record's kind and payload (valid until the next
// call), io.EOF exactly at end, a record problem (isRecordProblem) at s.off,
// or an I/O error.
func (s *segmentReader) next() (kind byte, payload []byte, err error) {
	for {
		kind, payload, err = s.record()
		if err != nil || kind != kindLink {
			return kind, payload, err
		}
		link, lerr := parseLink(payload)
		if lerr != nil {
			s.off -= int64(recordHeaderSize + len(payload))
			return 0, nil, fmt.Errorf("%w: %v", errBadPayload, lerr)
		}
		s.link, s.hasLink = link, true
	}
}

// record reads the next record, links included.
func (s *segmentReader) record() (kind byte, payload []byte, err error) {
	left := s.end - s.off
	if left == 0 {
		return 0, nil, io.EOF
	}
	if left < recordHeaderSize {
		rest := s.hdr[:left]
		if _, err := io.ReadFull(s.r, rest); err != nil {
			return 0, nil, err
		}
		if allZero(rest) {
			return 0, nil, errZeroHeader
		}
		return 0, nil, errShortHeader
	}
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		return 0, nil, err
	}
	length, kind, err := parseHeader(s.hdr[:])
	if err != nil {
		return 0, nil, err
	}
	if int64(length) > left-recordHeaderSize {
		return 0, nil, errShortPayload
	}
	if cap(s.buf) < int(length) {
		s.buf = make([]byte, length)
	}
	payload = s.buf[:length]
	if _, err := io.ReadFull(s.r, payload); err != nil {
		return 0, nil, err
	}
	if !checkPayload(s.hdr[:], payload) {
		return 0, nil, errBadPayload
	}
	s.off += recordHeaderSize + int64(length)
	return kind, payload, nil
}

func isRecordProblem(err error) bool {
	return errors.Is(err, errShortHeader) || errors.Is(err, errZeroHeader) || errors.Is(err, errBadHeader) ||
		errors.Is(err, errShortPayload) || errors.Is(err, errBadPayload)
}

// Replay calls fn, in log order, for every record whose position is greater
// than after, up to the end of the log when Replay starts; pos is the
// position after the record (what Append acknowledged for it). The payload
// is valid only until fn returns (ReplayRetained's may be kept). An error
// from fn stops the replay and is returned unchanged.
//
// Replay reads from after onwards only: segments wholly before it are not
// opened, so damage in records already folded into a snapshot does not
// matter. Any damage it does meet is a *CorruptionError (Open already cut a
// torn tail), and the log then refuses appends (ErrFailed). A position
// ahead of the log's end is refused with ErrPosition: it would mean a
// snapshot folded in records this log no longer holds. Records in segments
// deleted by TruncateBefore are not replayed; see First.
//
// Replay may run while appends go on; it does not see records acknowledged
// after it started.
func (w *WAL) Replay(after Position, fn func(pos Position, payload []byte) error) error {
	return w.replay(after, false, fn)
}

// ReplayRetained is Replay for a caller that keeps the payloads: it reads
// each segment's records to replay in one large read into a buffer it
// never reuses, and hands out payloads aliasing it, so fn may keep them
// (a start-up replay decodes every record without copying it, and holds
// them all until it has sorted them together). The buffer costs fresh
// memory the size of the segments replayed, which Replay's reused buffers
// do not.
func (w *WAL) ReplayRetained(after Position, fn func(pos Position, payload []byte) error) error {
	return w.replay(after, true, fn)
}

func (w *WAL) replay(after Position, retain bool, fn func(pos Position, payload []byte) error) error {
	w.files.RLock()
	defer w.files.RUnlock()
	w.mu.Lock()
	first, end, closing := w.first, w.end, w.closing
	w.mu.Unlock()
	if closing {
		return ErrClosed
	}
	if after.Compare(end) > 0 {
		return fmt.Errorf("wal %s: replay after %v: %w (log ends at %v)", w.dir, after, ErrPosition, end)
	}
	// prev is the end of the segment before s once the replay read it: a
	// segment's link is checked against the one before it in the range
	// replayed (one wholly before after is folded: its damage does not
	// matter to a replay).
	var prev Position
	for s := max(first, after.Segment); s <= end.Segment; s++ {
		start := int64(segmentHeaderSize)
		if s == after.Segment && int64(after.Offset) > start {
			// the link record, if any, is before the position: read
			// it apart, to check the segment before
			start = int64(after.Offset)
		}
		limit := int64(-1) // the file's size
		if s == end.Segment {
			limit = int64(end.Offset)
		}
		size, err := w.replaySegment(s, start, limit, retain, prev, fn)
		prev = Position{Segment: s, Offset: uint32(size)}
		if err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) {
				w.fail(err)
			}
			return err
		}
		if s == math.MaxUint32 {
			break
		}
	}
	return nil
}

// replaySegment replays segment s from offset start to limit (-1: its size),
// through a segmentReader or, to retain the payloads, from one read, and
// returns the segment's size. A linked segment's link must name prev, the
// end of the segment before it (zero: none to compare with).
func (w *WAL) replaySegment(s uint32, start, limit int64, retain bool, prev Position, fn func(Position, []byte) error) (int64, error) {
	path := filepath.Join(w.dir, segmentName(s))
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("wal: replay: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("wal: replay: %w", err)
	}
	size := st.Size()
	if limit < 0 {
		limit = size
		if limit > math.MaxUint32 {
			return size, &CorruptionError{Dir: w.dir, Segment: s, Offset: math.MaxUint32, Err: errors.New("segment larger than 4 GiB")}
		}
	}
	if torn, err := checkSegmentHeader(f, s, limit); err != nil || torn {
		if err == nil {
			err = &CorruptionError{Dir: w.dir, Segment: s, Err: errSegmentHeader}
		}
		return size, err
	}
	if err := w.checkSegmentLink(f, s, limit, prev); err != nil {
		return size, err
	}
	if start > limit {
		return size, fmt.Errorf("wal %s: replay from %v: %w (segment ends at %d)", w.dir, Position{s, uint32(start)}, ErrPosition, limit)
	}
	return size, w.replayRecords(f, path, s, start, limit, retain, fn)
}

// checkSegmentLink reads segment s's link record, when it is a linked
// segment, and checks it names prev (when prev is not zero).
func (w *WAL) checkSegmentLink(f *os.File, s uint32, limit int64, prev Position) error {
	hdr := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return fmt.Errorf("wal: replay: %w", err)
	}
	if headerVersion(hdr) < FormatVersion {
		return nil
	}
	b := make([]byte, min(limit, segmentStart)-segmentHeaderSize)
	if _, err := f.ReadAt(b, segmentHeaderSize); err != nil {
		return fmt.Errorf("wal: replay: %w", err)
	}
	kind, payload, _, err := parseRecord(b)
	if err != nil || kind != kindLink {
		return &CorruptionError{Dir: w.dir, Segment: s, Offset: segmentHeaderSize,
			Err: errors.New("the segment's link record is missing or damaged: it was cut back to its header, or damaged there")}
	}
	link, err := parseLink(payload)
	if err != nil {
		return &CorruptionError{Dir: w.dir, Segment: s, Offset: segmentHeaderSize, Err: err}
	}
	if !prev.IsZero() && link != prev {
		return cutError(w.dir, prev, link)
	}
	return nil
}

// replayRecords hands out the records of segment s from start to limit.
func (w *WAL) replayRecords(f *os.File, path string, s uint32, start, limit int64, retain bool, fn func(Position, []byte) error) error {
	if !retain {
		sr := newSegmentReader(f, s, start, limit)
		for {
			_, payload, err := sr.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				if isRecordProblem(err) {
					return &CorruptionError{Dir: w.dir, Segment: s, Offset: sr.off, Err: err}
				}
				return fmt.Errorf("wal: replay %s: %w", path, err)
			}
			if err := fn(Position{Segment: s, Offset: uint32(sr.off)}, payload); err != nil {
				return err
			}
		}
	}
	// One read of everything to replay: the records are then checked and
	// handed out from memory, without a copy each.
	buf := make([]byte, limit-start)
	if n, err := f.ReadAt(buf, start); n < len(buf) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the file shrank under the replay
		}
		return fmt.Errorf("wal: replay %s: %w", path, err)
	}
	for off := 0; off < len(buf); {
		kind, payload, size, err := parseRecord(buf[off:])
		if err != nil {
			return &CorruptionError{Dir: w.dir, Segment: s, Offset: start + int64(off), Err: err}
		}
		off += size
		if kind == kindLink {
			continue // checked by checkSegmentLink
		}
		if err := fn(Position{Segment: s, Offset: uint32(start + int64(off))}, payload); err != nil {
			return err
		}
	}
	return nil
}
