package wal

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the format fixture of the current version (testdata/v2)")

// fixtureDir holds a log of two segments written by the current version
// (2: segments start with a link record); TestGoldenV2 proves the writer
// still writes exactly that, TestReadV2 that the reader reads it. The
// version-1 fixture (fixtureV1Dir, written before link records by the same
// calls) stays: TestReadV1 proves old logs are read, and appended to. A
// deliberate format change bumps FormatVersion and adds testdata/v3
// instead of rewriting these (STYLE.md §1).
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

func TestReadV1(t *testing.T) {
	dir := readFixture(t, fixtureV1Dir)
	w := open(t, dir, Options{SegmentSize: fixtureSegmentSize})
	want := []rec{
		{Position{1, 37}, []byte("first")},
		{Position{1, 59}, []byte("second")},
		{Position{1, 75}, []byte("")},
		{Position{1, 126}, []byte("fourth, in the same write as second")},
		{Position{2, 74}, []byte("fifth: starts segment 2, the first is full")},
		{Position{2, 119}, []byte("sixth, after a write boundary")},
	}
	sameRecs(t, replayAll(t, w, Position{}), want)
	checkKinds(t, fixtureV1Dir, []byte{kindFirst, kindFirst, kindNext, kindNext, kindFirst, kindFirst})

	// An old log takes appends: the version-1 segment goes on, the next
	// one is a linked version-2 segment, and the whole replays.
	for i := 0; i < 3; i++ {
		p := []byte(fmt.Sprintf("appended %d after the upgrade", i))
		want = append(want, rec{appendOne(t, w, p), p})
	}
	if want[len(want)-1].pos.Segment < 3 {
		t.Fatalf("no new segment after the upgrade: %v", want[len(want)-1].pos)
	}
	sameRecs(t, replayAll(t, w, Position{}), want)
	w.Close()
	w = open(t, dir, Options{SegmentSize: fixtureSegmentSize})
	sameRecs(t, replayAll(t, w, Position{}), want)
}

func TestReadV2(t *testing.T) {
	w := open(t, readFixture(t, fixtureDir), Options{})
	if tr := w.Truncated(); tr != nil {
		t.Fatalf("fixture has a torn tail: %v", tr)
	}
	want := []rec{
		{Position{1, 61}, []byte("first")},
		{Position{1, 83}, []byte("second")},
		{Position{1, 99}, []byte("")},
		{Position{1, 150}, []byte("fourth, in the same write as second")},
		{Position{2, 98}, []byte("fifth: starts segment 2, the first is full")},
		{Position{2, 143}, []byte("sixth, after a write boundary")},
	}
	sameRecs(t, replayAll(t, w, Position{}), want)
	checkKinds(t, fixtureDir, []byte{kindLink, kindFirst, kindFirst, kindNext, kindNext, kindLink, kindFirst, kindFirst})
}

// readFixture copies a fixture log into a new directory (Open takes a
// lock and may repair).
func readFixture(t *testing.T, from string) string {
	t.Helper()
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

// checkKinds: the kinds mark links and write boundaries.
func checkKinds(t *testing.T, dir string, want []byte) {
	t.Helper()
	var kinds []byte
	for _, name := range []string{"00000001.wal", "00000002.wal"} {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		for off := segmentHeaderSize; off < len(b); {
			kind, _, size, err := parseRecord(b[off:])
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, kind)
			off += size
		}
	}
	if !bytes.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
}
