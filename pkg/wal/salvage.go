package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// Lost is a byte range of a salvaged segment that held no intact record:
// what the damage took. Header is true when a record header at From
// still checks (its length is then trustworthy, and Payload holds the
// bytes it framed, which failed their checksum: a caller that knows the
// payload format may still read which series they were, unvouched).
type Lost struct {
	From, To uint32 // offsets in the segment, [From, To)
	Header   bool
	Payload  []byte
	Named    bool // the record the caller named: its checksums held
}

// Salvaged is what Salvage did to one segment.
type Salvaged struct {
	Segment uint32
	Aside   string // the original segment, kept whole under this name in the log's directory
	Before  int    // intact records kept before the first damage
	After   int    // intact records found after it and kept
	Lost    []Lost // the damaged ranges, in order
	Size    int64  // the segment's size before
}

// LostBytes is the number of bytes in s.Lost.
func (s Salvaged) LostBytes() int64 {
	var n int64
	for _, l := range s.Lost {
		n += int64(l.To - l.From)
	}
	return n
}

// ErrNoDamage is Salvage's answer for a segment that reads to its end.
var ErrNoDamage = errors.New("no damage found")

// Salvage makes segment seg of the log in dir readable again when a
// record in it is damaged: every intact record before the damage and
// every intact record after it (found again by their checksummed headers)
// are kept, in order, in a new segment of the same number; the damaged
// ranges are dropped; the original file is kept whole beside the log as
// NNNNNNNN.wal.corrupt (numbered .corrupt.1, … if that name is taken).
// from, when not zero, names a record to drop although its checksums
// hold, by its position (the offset after it, as replay errors and Scan
// print): a record a replay refused for what it holds.
//
// The records after the damage keep their order but not their offsets, so
// their positions change; nothing outside the log names a position beyond
// the checkpoint, and Salvage refuses a segment that lies before it
// (those records are folded: its damage does not matter to a replay).
//
// It takes the log's lock (no server may hold it) and replaces the segment
// atomically: at every moment one complete version of it exists.
func Salvage(dir string, seg uint32, from uint32, folded Position) (Salvaged, error) {
	out := Salvaged{Segment: seg}
	lock, err := fileutil.TryLock(filepath.Join(dir, lockFile))
	if err != nil {
		return out, fmt.Errorf("wal %s: %w (stop the server first)", dir, err)
	}
	defer lock.Release()
	if folded.Segment > seg {
		return out, fmt.Errorf("wal: segment %s lies before the checkpoint %s: its records are folded into a snapshot, and a replay never reads it", segmentName(seg), folded)
	}
	path := filepath.Join(dir, segmentName(seg))
	b, err := os.ReadFile(path)
	if err != nil {
		return out, fmt.Errorf("wal: %w", err)
	}
	out.Size = int64(len(b))
	if len(b) < segmentHeaderSize || string(b[:len(segmentMagic)]) != segmentMagic {
		return out, fmt.Errorf("wal: %s: the segment header is damaged: nothing in it can be placed; move the file aside by hand", segmentName(seg))
	}
	kept := append([]byte(nil), b[:segmentHeaderSize]...)
	off := segmentHeaderSize
	damaged := false
	for off < len(b) {
		kind, _, size, err := parseRecord(b[off:])
		// the record the operator named: its position (the offset after
		// it, as replay errors and dump print) lies within it
		named := err == nil && from != 0 && !damaged && int(from) > off && int(from) <= off+size && kind != kindLink
		if err == nil && !named {
			kept = append(kept, b[off:off+size]...)
			if kind == kindLink {
				// kept, not counted: not a write
			} else if damaged {
				out.After++
			} else {
				out.Before++
			}
			off += size
			continue
		}
		if errors.Is(err, errZeroHeader) && allZero(b[off:]) {
			break // zeroed space to the end: never written
		}
		damaged = true
		l := Lost{From: uint32(off), Named: named}
		if len(b)-off >= recordHeaderSize {
			if length, _, herr := parseHeader(b[off:]); herr == nil && uint64(length) <= uint64(len(b)-off-recordHeaderSize) {
				l.Header = true
				l.Payload = append([]byte(nil), b[off+recordHeaderSize:off+recordHeaderSize+int(length)]...)
			}
		}
		next := nextRecord(b, off+1)
		l.To = uint32(next)
		out.Lost = append(out.Lost, l)
		off = next
	}
	if !damaged {
		return out, fmt.Errorf("wal: %s: %w (%d intact records to its end)", segmentName(seg), ErrNoDamage, out.Before)
	}
	aside, err := asideName(dir, seg)
	if err != nil {
		return out, err
	}
	out.Aside = aside
	src, err := os.Open(path)
	if err != nil {
		return out, fmt.Errorf("wal: %w", err)
	}
	err = copyFile(src, filepath.Join(dir, aside))
	src.Close()
	if err != nil {
		return out, err
	}
	// The next segment's link names this one's end, which moves: relink
	// it first (a crash before the segment is replaced leaves the damage,
	// and a second salvage, to find), then replace the segment.
	if err := relink(dir, seg+1, Position{Segment: seg, Offset: uint32(len(kept))}); err != nil {
		return out, err
	}
	tmp := filepath.Join(dir, "."+segmentName(seg)+".tmp")
	if err := writeSynced(tmp, kept); err != nil {
		return out, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return out, fmt.Errorf("wal: %w", err)
	}
	return out, fileutil.SyncDir(dir)
}

// nextRecord is the offset of the first intact record at or after off in
// segment bytes b (len(b) if none): its header checks, then its payload.
func nextRecord(b []byte, off int) int {
	for i := off; i+recordHeaderSize <= len(b); i++ {
		if k := b[i+offKind]; k != kindFirst && k != kindNext && k != kindLink {
			continue // cheap check first: this visits every byte
		}
		if _, _, _, err := parseRecord(b[i:]); err == nil {
			return i
		}
	}
	return len(b)
}

// asideName is a name for the original of segment seg that no file in
// dir has.
func asideName(dir string, seg uint32) (string, error) {
	base := segmentName(seg) + ".corrupt"
	for i := 0; i < 1000; i++ {
		name := base
		if i > 0 {
			name = fmt.Sprintf("%s.%d", base, i)
		}
		if _, err := os.Stat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
	}
	return "", fmt.Errorf("wal: %s.* : too many salvaged copies of segment %d; remove old ones", base, seg)
}

// relink rewrites segment n's link record (when n exists and is linked) to
// name prev, atomically (a copy renamed over it).
func relink(dir string, n uint32, prev Position) error {
	path := filepath.Join(dir, segmentName(n))
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if len(b) < segmentStart || headerVersion(b) < FormatVersion {
		return nil
	}
	if kind, _, _, err := parseRecord(b[segmentHeaderSize:]); err != nil || kind != kindLink {
		return nil // its own damage, for its own salvage
	}
	b = append(appendLink(b[:segmentHeaderSize:segmentHeaderSize], prev), b[segmentStart:]...)
	tmp := filepath.Join(dir, "."+segmentName(n)+".tmp")
	if err := writeSynced(tmp, b); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
