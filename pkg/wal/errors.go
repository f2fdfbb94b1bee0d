package wal

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

var (
	// ErrCorrupt marks damage the log cannot explain as a torn last write.
	// Every *CorruptionError matches it with errors.Is. It is
	// corrupt.ErrCorrupt, the sentinel every package marks damage with, so
	// a caller several layers up asks corrupt.Is whatever file was damaged.
	ErrCorrupt = corrupt.ErrCorrupt
	// ErrClosed is returned by every call on a closed log.
	ErrClosed = errors.New("wal closed")
	// ErrFailed is returned once a write or fsync has failed, or a Replay
	// has found corruption: the log refuses appends, because what is on
	// disk after the last acknowledged record is unknown and an append
	// over it could leave a gap. A write failure heals on its own once its
	// cause is gone (WAL.Failing); after corruption, Close and Open again.
	ErrFailed = errors.New("wal failed")
	// ErrTooLarge refuses a payload over Options.MaxRecordSize.
	ErrTooLarge = errors.New("record too large")
	// ErrPosition refuses a position the log does not hold, such as one
	// ahead of its end: a manifest that claims to have folded in records
	// this log never acknowledged.
	ErrPosition = errors.New("position not in the log")
)

// CorruptionError says where the log is damaged. Errors.Is(err, ErrCorrupt)
// holds for it; Err is the cause.
type CorruptionError struct {
	Dir     string
	Segment uint32
	Offset  int64
	Err     error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal %s offset %d: %v: %v",
		filepath.Join(e.Dir, segmentName(e.Segment)), e.Offset, ErrCorrupt, e.Err)
}

func (e *CorruptionError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

// Truncation reports a damaged tail that Open cut from the newest segment so
// that appends continue after the last intact record. Log it: the bytes
// removed were never acknowledged if the disk kept its promises (see the
// package documentation), but an operator should know.
type Truncation struct {
	Segment uint32
	// Offset is where the damage starts; the segment now ends there (or
	// just after its header, when the header itself was torn).
	Offset int64
	// Bytes is how many bytes were cut.
	Bytes int64
	// Records counts intact records found after the damage that belonged
	// to the same write, cut with it because that write never completed.
	Records int
	// Cause says what was wrong at Offset.
	Cause error
	// Quarantine, when not empty, is the path where the whole damaged
	// segment was kept (Options.Quarantine): nothing was deleted.
	Quarantine string
}

func (t *Truncation) String() string {
	s := fmt.Sprintf("segment %s: cut %d bytes at offset %d (%v)", segmentName(t.Segment), t.Bytes, t.Offset, t.Cause)
	switch {
	case t.Records == 1:
		s += ", including 1 intact record of the same unfinished write"
	case t.Records > 1:
		s += fmt.Sprintf(", including %d intact records of the same unfinished write", t.Records)
	}
	if t.Quarantine != "" {
		s += ", damaged segment kept as " + t.Quarantine
	}
	return s
}
