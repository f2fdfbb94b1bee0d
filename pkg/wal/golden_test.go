package wal

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the format fixture under testdata/v1")

// fixtureDir holds a version-1 log of two segments. TestGoldenV1 proves the
// writer still writes exactly version 1; TestReadV1 proves the reader still
// reads it. A deliberate format change bumps FormatVersion and adds
// testdata/v2 instead of rewriting v1 (STYLE.md §1).
const fixtureDir = "testdata/v1/wal"

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

func TestGoldenV1(t *testing.T) {
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
			t.Errorf("%s: the writer no longer writes version 1 (%d bytes, fixture %d); bump FormatVersion and add testdata/v2", name, len(got), len(want))
		}
	}
}

func TestReadV1(t *testing.T) {
	dir := t.TempDir() // Open takes a lock and may repair: work on a copy
	for _, name := range []string{"00000001.wal", "00000002.wal"} {
		b, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	w := open(t, dir, Options{})
	if tr := w.Truncated(); tr != nil {
		t.Fatalf("fixture has a torn tail: %v", tr)
	}
	want := []rec{
		{Position{1, 37}, []byte("first")},
		{Position{1, 59}, []byte("second")},
		{Position{1, 75}, []byte("")},
		{Position{1, 126}, []byte("fourth, in the same write as second")},
		{Position{2, 74}, []byte("fifth: starts segment 2, the first is full")},
		{Position{2, 119}, []byte("sixth, after a write boundary")},
	}
	sameRecs(t, replayAll(t, w, Position{}), want)

	// The kinds mark write boundaries.
	var kinds []byte
	for _, name := range []string{"00000001.wal", "00000002.wal"} {
		b, _ := os.ReadFile(filepath.Join(fixtureDir, name))
		for off := segmentHeaderSize; off < len(b); {
			kind, _, size, err := parseRecord(b[off:])
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, kind)
			off += size
		}
	}
	if !bytes.Equal(kinds, []byte{kindFirst, kindFirst, kindNext, kindNext, kindFirst, kindFirst}) {
		t.Fatalf("kinds %v", kinds)
	}
}
