package wal

// The byte layout of segments and records (docs/FORMAT.md §6). Everything
// that knows an offset inside a header lives in this file.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// FormatVersion is written in every new segment's header; a reader reads
// versions 1 and 2 and refuses others rather than guess. Version 2 adds
// the link record (kindLink) every segment starts with, which lets a
// reader tell a log cut short from one that never held more.
const FormatVersion = 2

// formatVersion1 segments (written before link records) are read as they
// are: they have no link, so a cut before them goes unnoticed, as it did.
const formatVersion1 = 1

const (
	segmentMagic      = "SSNAPWAL"
	segmentSuffix     = ".wal"
	segmentHeaderSize = 16 // magic (8), version (4), segment number (4)
	recordHeaderSize  = 16 // length (4), kind (1), reserved (3), header CRC (4), CRC (4)

	// Record kinds. The first record of each write (one write + one fsync)
	// is kindFirst, the others kindNext; recovery uses the difference to
	// tell a torn last write from damage to an earlier, synced one. Zero is
	// never written, so zeroed space never parses as a record.
	kindFirst byte = 1
	kindNext  byte = 2
	// kindLink is the first record of every version-2 segment, written
	// with its header when the segment is created (atomically: a segment
	// file under its name always holds both): the position the log had
	// reached before it, the previous segment's end (for a log's first
	// segment, the position it starts after). Its payload is linkSize
	// bytes: segment (4), offset (4). It is never handed to a caller.
	kindLink byte = 3

	linkSize = 8
	// segmentStart is where a new segment's first write goes: after its
	// header and its link record.
	segmentStart = segmentHeaderSize + recordHeaderSize + linkSize
)

// Field offsets inside a record header.
const (
	offLength   = 0
	offKind     = 4
	offReserved = 5
	offHCRC     = 8
	offCRC      = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// What can be wrong with the bytes at a record offset. Recovery decides from
// what follows whether the problem is a torn tail or corruption.
var (
	errShortHeader  = errors.New("record header cut short")
	errZeroHeader   = errors.New("zeroed record header")
	errBadHeader    = errors.New("record header checksum mismatch")
	errShortPayload = errors.New("record payload cut short")
	errBadPayload   = errors.New("record checksum mismatch")

	errSegmentHeader = errors.New("bad segment header")
)

// segmentName is the file name of segment n: the number zero-padded to
// eight digits (wider once it needs more) and ".wal".
func segmentName(n uint32) string { return fmt.Sprintf("%08d%s", n, segmentSuffix) }

// parseSegmentName returns the segment number of a canonical segment name.
func parseSegmentName(name string) (uint32, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) < 8 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || n == 0 || segmentName(uint32(n)) != name {
		return 0, false
	}
	return uint32(n), true
}

// segmentHeader returns the header of a new segment n.
func segmentHeader(n uint32) []byte { return segmentHeaderVersion(n, FormatVersion) }

// segmentHeaderVersion returns the header of segment n at version v.
func segmentHeaderVersion(n uint32, v uint32) []byte {
	b := make([]byte, 0, segmentHeaderSize)
	b = append(b, segmentMagic...)
	b = binary.LittleEndian.AppendUint32(b, v)
	return binary.LittleEndian.AppendUint32(b, n)
}

// headerVersion is the version a sound segment header names.
func headerVersion(h []byte) uint32 { return binary.LittleEndian.Uint32(h[len(segmentMagic):]) }

// appendLink appends the link record naming prev to b.
func appendLink(b []byte, prev Position) []byte {
	var p [linkSize]byte
	binary.LittleEndian.PutUint32(p[0:], prev.Segment)
	binary.LittleEndian.PutUint32(p[4:], prev.Offset)
	return appendRecord(b, kindLink, p[:])
}

// parseLink reads a link record's payload.
func parseLink(payload []byte) (Position, error) {
	if len(payload) != linkSize {
		return Position{}, fmt.Errorf("link record of %d bytes, want %d", len(payload), linkSize)
	}
	return Position{Segment: binary.LittleEndian.Uint32(payload), Offset: binary.LittleEndian.Uint32(payload[4:])}, nil
}

// appendRecord appends one framed record to b.
func appendRecord(b []byte, kind byte, payload []byte) []byte {
	var h [recordHeaderSize]byte
	binary.LittleEndian.PutUint32(h[offLength:], uint32(len(payload)))
	h[offKind] = kind
	hcrc := crc32.Checksum(h[:offHCRC], castagnoli)
	binary.LittleEndian.PutUint32(h[offHCRC:], hcrc)
	// Update continues the checksum of the first eight header bytes, so
	// this is CRC-32C(h[0:8] || payload).
	binary.LittleEndian.PutUint32(h[offCRC:], crc32.Update(hcrc, castagnoli, payload))
	b = append(b, h[:]...)
	return append(b, payload...)
}

// parseHeader checks a record header on its own and returns the payload
// length and the record kind. It fails for zeroed space, torn headers and
// damaged ones alike; only a header that passes can be trusted for its length.
func parseHeader(h []byte) (length uint32, kind byte, err error) {
	kind = h[offKind]
	if kind != kindFirst && kind != kindNext && kind != kindLink || h[offReserved]|h[offReserved+1]|h[offReserved+2] != 0 ||
		crc32.Checksum(h[:offHCRC], castagnoli) != binary.LittleEndian.Uint32(h[offHCRC:]) {
		if allZero(h[:recordHeaderSize]) {
			return 0, 0, errZeroHeader
		}
		return 0, 0, errBadHeader
	}
	return binary.LittleEndian.Uint32(h[offLength:]), kind, nil
}

// checkPayload reports whether payload is the one header h was written for.
func checkPayload(h, payload []byte) bool {
	hcrc := binary.LittleEndian.Uint32(h[offHCRC:])
	return crc32.Update(hcrc, castagnoli, payload) == binary.LittleEndian.Uint32(h[offCRC:])
}

// parseRecord checks the record at the start of b and returns its kind,
// payload (aliasing b) and framed size.
func parseRecord(b []byte) (kind byte, payload []byte, size int, err error) {
	if len(b) < recordHeaderSize {
		if allZero(b) {
			return 0, nil, 0, errZeroHeader
		}
		return 0, nil, 0, errShortHeader
	}
	length, kind, err := parseHeader(b)
	if err != nil {
		return 0, nil, 0, err
	}
	if uint64(length) > uint64(len(b)-recordHeaderSize) {
		return 0, nil, 0, errShortPayload
	}
	size = recordHeaderSize + int(length)
	payload = b[recordHeaderSize:size]
	if !checkPayload(b, payload) {
		return 0, nil, 0, errBadPayload
	}
	return kind, payload, size, nil
}

// laterWrite looks at the bytes of a segment from a damaged record (tail[0])
// to the segment's end and reports the offset in tail of the first intact
// record that starts a later write, or -1 if there is none. intact counts the
// intact records it passed that continue the damaged record's write.
//
// Writes are serialised and each is fsynced before the next one starts, so a
// later write proves that the damaged one had been synced: that is
// corruption. Without one, the damage lies in the last write, which may never
// have reached the disk whole (the kernel persists its pages in any order):
// a torn tail.
func laterWrite(tail []byte) (at int, intact int) {
	i := 1
	if len(tail) >= recordHeaderSize {
		if length, _, err := parseHeader(tail); err == nil {
			// The length is trustworthy: skip the damaged payload, or stop
			// if the record runs past the end (it was cut short).
			i = len(tail)
			if uint64(length) <= uint64(len(tail)-recordHeaderSize) {
				i = recordHeaderSize + int(length)
			}
		}
	}
	for i+recordHeaderSize <= len(tail) {
		// Cheap checks first: this loop visits every byte of a damaged tail.
		if k := tail[i+offKind]; k != kindFirst && k != kindNext && k != kindLink {
			i++
			continue
		}
		kind, _, size, err := parseRecord(tail[i:])
		if err != nil {
			i++
			continue
		}
		if kind == kindFirst || kind == kindLink {
			return i, intact
		}
		intact++
		i += size
	}
	return -1, intact
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
