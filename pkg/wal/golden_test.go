package wal

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the format fixture under testdata/v2")

// fixtureDir holds a version-2 log of two segments, written from
// fixtureCalls. TestGoldenV2 proves the writer still writes exactly version
// 2; TestReadV2 proves the reader still reads it. fixtureV1Dir holds the
// same calls as version 1 wrote them (segments that grew by appending),
// which the writer no longer writes but every reader must still read
// (TestReadV1). A deliberate format change bumps FormatVersion and adds
// testdata/v3 instead of rewriting v2 (STYLE.md §1).
const (
	fixtureDir   = "testdata/v2/wal"
	fixtureV1Dir = "testdata/v1/wal"
)

// fixtureCalls are the Appends that wrote the fixture, one element a call.
var fixtureCalls = [][]string{
	{"first"},
	{"second", "", "fourth, in the same write as second"},
	{"fifth: starts segment 2, the first is full"},
	{"sixth, after a write boundary"},
}

const fixtureSegmentSize = 160

func writeFixture(t *testing.T, dir string) []rec {
	t.Helper()
	var calls [][][]byte
	for _, c := range fixtureCalls {
		var ps [][]byte
		for _, p := range c {
			ps = append(ps, []byte(p))
		}
		calls = append(calls, ps)
	}
	rs, _ := writeLog(t, dir, Options{SegmentSize: fixtureSegmentSize}, calls)
	return rs
}

func TestGoldenV2(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)
	for _, name := range []string{"00000001.wal", "00000002.wal"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(fixtureDir, name)
		if *update {
			if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the writer no longer writes version 2 (%d bytes, fixture %d); bump FormatVersion and add testdata/v3", name, len(got), len(want))
		}
	}
}

// fixtureRecs are the records of fixtureCalls, in both fixtures.
var fixtureRecs = []rec{
	{Position{1, 37}, []byte("first")},
	{Position{1, 59}, []byte("second")},
	{Position{1, 75}, []byte("")},
	{Position{1, 126}, []byte("fourth, in the same write as second")},
	{Position{2, 74}, []byte("fifth: starts segment 2, the first is full")},
	{Position{2, 119}, []byte("sixth, after a write boundary")},
}

// copyFixture copies a fixture log into a temporary directory: Open takes
// a lock and may repair.
func copyFixture(t *testing.T, from string) string {
	dir := t.TempDir()
	for _, name := range []string{"00000001.wal", "00000002.wal"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	return dir
}

func TestReadV2(t *testing.T) { testReadFixture(t, fixtureDir, FormatVersion) }

func TestReadV1(t *testing.T) { testReadFixture(t, fixtureV1Dir, formatAppend) }

func testReadFixture(t *testing.T, from string, version uint32) {
	dir := copyFixture(t, from)
	// The fixture's segment size: a larger one would extend the newest
	// segment (v2) or let it grow (v1) so that nothing rolls over below.
	opts := Options{SegmentSize: fixtureSegmentSize}
	w := open(t, dir, opts)
	if tr := w.Truncated(); tr != nil {
		t.Fatalf("fixture has a torn tail: %v", tr)
	}
	sameRecs(t, replayAll(t, w, Position{}), fixtureRecs)
	sameReplays(t, w)

	// The kinds mark write boundaries; the header carries the version;
	// after the last record there are zeros (v2) or nothing (v1).
	var kinds []byte
	for _, name := range []string{"00000001.wal", "00000002.wal"} {
		b, _ := os.ReadFile(filepath.Join(from, name))
		if got := binary.LittleEndian.Uint32(b[8:]); got != version {
			t.Fatalf("%s: version %d, want %d", name, got, version)
		}
		if version == formatAppend && len(b) == fixtureSegmentSize {
			t.Fatalf("%s: a version-1 segment is not preallocated", name)
		}
		off := segmentHeaderSize
		for off < len(b) && !allZero(b[off:]) {
			kind, _, size, err := parseRecord(b[off:])
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, kind)
			off += size
		}
		if version == formatAppend && off != len(b) {
			t.Fatalf("%s: zeros after the last record of a version-1 segment", name)
		}
	}
	if !bytes.Equal(kinds, []byte{kindFirst, kindFirst, kindNext, kindNext, kindFirst, kindFirst}) {
		t.Fatalf("kinds %v", kinds)
	}
	w.Close()

	// Appends go on in the newest segment, in its own version (a version-1
	// segment grows), then roll over into preallocated segments; all of it
	// replays after a reopen.
	w = open(t, dir, opts)
	want := slices.Clone(fixtureRecs)
	for _, p := range []string{"seventh", "eighth, which does not fit: segment 3", "ninth"} {
		want = append(want, rec{appendOne(t, w, []byte(p)), []byte(p)})
	}
	if want[6].pos.Segment != 2 || want[7].pos.Segment != 3 {
		t.Fatalf("positions %v %v", want[6].pos, want[7].pos)
	}
	w.Close()
	st, _ := os.Stat(segPath(dir, 2))
	if wantSize := int64(fixtureSegmentSize); version == formatAppend && st.Size() != int64(want[6].pos.Offset) || version != formatAppend && st.Size() != wantSize {
		t.Fatalf("segment 2 is %d bytes after appending to it", st.Size())
	}
	checkFile(t, segPath(dir, 3), fixtureSegmentSize, int64(want[8].pos.Offset))
	w = open(t, dir, opts)
	if tr := w.Truncated(); tr != nil {
		t.Fatalf("reopen: %v", tr)
	}
	sameRecs(t, replayAll(t, w, Position{}), want)
	sameReplays(t, w)
}

// TestV1OlderSegmentZeros: bytes after the last record of a version-1
// segment, zeros included, are damage (in the newest segment a torn tail,
// cut; in an older one corruption), as version 1 defined them; only a
// version-2 segment ends in zeros.
func TestV1OlderSegmentZeros(t *testing.T) {
	dir := copyFixture(t, fixtureV1Dir)
	b, _ := os.ReadFile(segPath(dir, 1))
	os.WriteFile(segPath(dir, 1), append(b, make([]byte, 20)...), 0o644)
	w := open(t, dir, Options{})
	err := w.Replay(Position{}, func(Position, []byte) error { return nil })
	asCorruption(t, err, 1, int64(len(b)))
	w.Close()

	dir = copyFixture(t, fixtureV1Dir)
	b, _ = os.ReadFile(segPath(dir, 2))
	os.WriteFile(segPath(dir, 2), append(b, make([]byte, 20)...), 0o644)
	w = open(t, dir, Options{})
	if tr := w.Truncated(); tr == nil || tr.Segment != 2 || tr.Offset != int64(len(b)) || tr.Bytes != 20 {
		t.Fatalf("truncation %+v", tr)
	}
	checkFile(t, segPath(dir, 2), int64(len(b)), int64(len(b)))
}
