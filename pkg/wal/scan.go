package wal

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// SegmentInfo describes one segment file as Scan found it.
type SegmentInfo struct {
	Number  uint32
	Size    int64
	Records int      // intact records
	End     Position // after its last intact record
	// Problem is what stopped the read before the end of the file ("" when
	// it read to the end): in the newest segment usually a torn tail that
	// the next writer cuts; elsewhere corruption. It also says when the
	// segment was cut (its successor's link names a later end) or lacks
	// its link record.
	Problem string
	// Link is what the segment's link record says the log had reached
	// before it (version-2 segments; Linked false for older ones).
	Link   Position
	Linked bool
}

// ScanInfo is what Scan read.
type ScanInfo struct {
	Segments []SegmentInfo
	First    Position // before the first retained record
	End      Position // after the last intact record
	Records  int      // intact records in every segment
	After    int      // of those, the ones after the position asked for
}

// Scan reads the log in dir without taking its lock and without changing
// anything, for inspection while a writer may be appending: it lists the
// segments and calls fn for every intact record after the position given,
// in order. Damage does not stop it from describing the other segments;
// it is reported in the segment's Problem. An error from fn stops it.
func Scan(dir string, after Position, fn func(Position, []byte) error) (ScanInfo, error) {
	var info ScanInfo
	segs, err := segmentNumbers(dir)
	if err != nil {
		return info, err
	}
	for i, n := range segs {
		si, err := scanSegment(dir, n, after, fn, &info)
		if err != nil {
			return info, err
		}
		if i > 0 && n != segs[i-1]+1 && si.Problem == "" {
			si.Problem = fmt.Sprintf("segment %d is missing before it", segs[i-1]+1)
			if si.Linked {
				si.Problem += fmt.Sprintf(" (its link says the log had reached %v: records from %v to %v lost)", si.Link, info.Segments[i-1].End, si.Link)
			}
		}
		if i > 0 && n == segs[i-1]+1 && si.Linked {
			if p := &info.Segments[i-1]; p.Problem == "" && p.End != si.Link {
				p.Problem = cutMessage(p.End, si.Link)
			}
		}
		info.Segments = append(info.Segments, si)
		if i == 0 {
			info.First = Position{Segment: n, Offset: segmentHeaderSize}
		}
		info.End = si.End
	}
	return info, nil
}

func scanSegment(dir string, n uint32, after Position, fn func(Position, []byte) error, info *ScanInfo) (si SegmentInfo, err error) {
	si = SegmentInfo{Number: n, End: Position{Segment: n, Offset: segmentHeaderSize}}
	f, err := os.Open(filepath.Join(dir, segmentName(n)))
	if err != nil {
		return si, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return si, err
	}
	si.Size = st.Size()
	if torn, err := checkSegmentHeader(f, n, si.Size); err != nil || torn {
		si.Problem = "damaged or incomplete segment header"
		if err != nil {
			si.Problem = err.Error()
		}
		si.End.Offset = 0
		return si, nil
	}
	hdr := make([]byte, segmentHeaderSize)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		return si, err
	}
	linked := headerVersion(hdr) >= FormatVersion
	r := newSegmentReader(f, n, segmentHeaderSize, si.Size)
	defer func() {
		si.Link, si.Linked = r.link, linked
		if linked && !r.hasLink && si.Problem == "" {
			si.Problem = "the segment's link record is missing: it was cut back to its header, and records in it may be lost"
		}
	}()
	for {
		_, payload, err := r.next()
		if err == io.EOF {
			return si, nil
		}
		if err != nil {
			if isRecordProblem(err) {
				si.Problem = fmt.Sprintf("offset %d: %v", r.off, err)
				return si, nil
			}
			return si, err
		}
		pos := Position{Segment: n, Offset: uint32(r.off)}
		si.Records++
		si.End = pos
		info.Records++
		if pos.Compare(after) > 0 {
			info.After++
			if fn != nil {
				if err := fn(pos, payload); err != nil {
					return si, err
				}
			}
		}
	}
}

// segmentNumbers lists the segment numbers in dir, ascending, changing
// nothing (listSegments, for the log's owner, also clears leftovers).
func segmentNumbers(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []uint32
	for _, e := range ents {
		if n, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			segs = append(segs, n)
		}
	}
	slices.Sort(segs)
	return segs, nil
}

// End is the position after the last intact record of the log in dir,
// read without its lock (a writer may be appending): only the newest
// segment is read, and a torn or partly written tail ends it. Every
// record acknowledged before End was called is at or before it. The zero
// Position when dir holds no segment.
func End(dir string) (Position, error) {
	segs, err := segmentNumbers(dir)
	if err != nil || len(segs) == 0 {
		return Position{}, err
	}
	var info ScanInfo
	si, err := scanSegment(dir, segs[len(segs)-1], Position{Segment: math.MaxUint32}, nil, &info)
	if err != nil {
		return Position{}, fmt.Errorf("wal %s: %w", dir, err)
	}
	return si.End, nil
}

// Held reports whether a process holds the log in dir open for appending
// (its LOCK), as far as the kernel's lock table tells (/proc/locks): the
// look takes no lock itself, so it never makes a starting writer fail.
func Held(dir string) bool { return fileutil.LockHolder(filepath.Join(dir, lockFile)) != 0 }
