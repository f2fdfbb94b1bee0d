package wal

import (
	"cmp"
	"fmt"
)

// Position is a place in the log: a segment number and a byte offset in that
// segment. Positions order records totally: by segment, then by offset.
//
// The position of a record is the position just after it. That is what
// Append acknowledges, what Replay passes along with each payload, and what a
// snapshot manifest records as folded in: Replay(after) yields exactly the
// records whose position is greater than after.
//
// The zero Position lies before every record (segments are numbered from 1),
// so it means "nothing folded in", like wal_position 0 in a manifest.
type Position struct {
	Segment uint32
	Offset  uint32
}

// Uint64 encodes p as Segment<<32 | Offset, the manifest's wal_position.
// The encoding preserves order: p.Compare(q) == cmp.Compare(p.Uint64(), q.Uint64()).
func (p Position) Uint64() uint64 { return uint64(p.Segment)<<32 | uint64(p.Offset) }

// PositionFromUint64 decodes what Uint64 encodes.
func PositionFromUint64(v uint64) Position {
	return Position{Segment: uint32(v >> 32), Offset: uint32(v)}
}

// Compare returns -1, 0 or +1 as p is before, at or after q.
func (p Position) Compare(q Position) int { return cmp.Compare(p.Uint64(), q.Uint64()) }

// IsZero reports whether p is the zero Position.
func (p Position) IsZero() bool { return p == Position{} }

// String renders p as segment:offset, e.g. "00000003:1048592".
func (p Position) String() string { return fmt.Sprintf("%08d:%d", p.Segment, p.Offset) }
