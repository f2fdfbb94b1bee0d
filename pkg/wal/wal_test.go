package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/fileutil"
)

type rec struct {
	pos     Position
	payload []byte
}

func open(t testing.TB, dir string, opts Options) *WAL {
	t.Helper()
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func appendOne(t testing.TB, w *WAL, payloads ...[]byte) Position {
	t.Helper()
	pos, err := w.Append(context.Background(), payloads...)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func replayAll(t testing.TB, w *WAL, after Position) []rec {
	t.Helper()
	var got []rec
	err := w.Replay(after, func(pos Position, p []byte) error {
		got = append(got, rec{pos, bytes.Clone(p)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func payload(i, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(i), uint64(n)))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

func sameRecs(t testing.TB, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].pos != want[i].pos || !bytes.Equal(got[i].payload, want[i].payload) {
			t.Fatalf("record %d: got %v (%d bytes), want %v (%d bytes)", i, got[i].pos, len(got[i].payload), want[i].pos, len(want[i].payload))
		}
	}
}

func segPath(dir string, n uint32) string { return filepath.Join(dir, segmentName(n)) }

func TestAppendReplayAcrossReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal") // Open creates it
	var want []rec
	for round := range 3 {
		w := open(t, dir, Options{})
		if tr := w.Truncated(); tr != nil {
			t.Fatalf("clean log reports a truncation: %v", tr)
		}
		sameRecs(t, replayAll(t, w, Position{}), want)
		for i := range 5 {
			p := [][]byte{payload(round*10+i, i*100), payload(round*10+i, 7)}
			pos := appendOne(t, w, p...)
			want = append(want, rec{Position{pos.Segment, pos.Offset - recordHeaderSize - 7}, p[0]}, rec{pos, p[1]})
		}
		if got := w.End(); got != want[len(want)-1].pos {
			t.Fatalf("End = %v, want %v", got, want[len(want)-1].pos)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	w := open(t, dir, Options{})
	sameRecs(t, replayAll(t, w, Position{}), want)
}

func TestRollover(t *testing.T) {
	dir := t.TempDir()
	const segSize = 1024
	w := open(t, dir, Options{SegmentSize: segSize})
	if w.opts.MaxRecordSize != segSize-segmentStart-recordHeaderSize {
		t.Fatalf("default max record for a small segment: %d", w.opts.MaxRecordSize)
	}
	var want []rec
	for i := range 60 {
		n := (i * 37) % 400
		if i == 30 {
			n = w.opts.MaxRecordSize // a record that fills a segment alone
		}
		p := payload(i, n)
		pos := appendOne(t, w, p)
		if len(want) > 0 && pos.Compare(want[len(want)-1].pos) <= 0 {
			t.Fatalf("position %v after %v", pos, want[len(want)-1].pos)
		}
		want = append(want, rec{pos, p})
	}
	sameRecs(t, replayAll(t, w, Position{}), want)
	last := w.End().Segment
	if last < 10 {
		t.Fatalf("only %d segments", last)
	}
	for s := uint32(1); s <= last; s++ {
		st, err := os.Stat(segPath(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > segSize {
			t.Errorf("segment %d is %d bytes, over %d", s, st.Size(), segSize)
		}
	}
	// Each segment parses on its own: no record spans two.
	for s := uint32(1); s <= last; s++ {
		b, _ := os.ReadFile(segPath(dir, s))
		for off := segmentHeaderSize; off < len(b); {
			_, _, size, err := parseRecord(b[off:])
			if err != nil {
				t.Fatalf("segment %d offset %d: %v", s, off, err)
			}
			off += size
		}
	}
}

func TestTooLarge(t *testing.T) {
	w := open(t, t.TempDir(), Options{SegmentSize: 4096, MaxRecordSize: 100})
	_, err := w.Append(context.Background(), make([]byte, 10), make([]byte, 101))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	appendOne(t, w, make([]byte, 100))
	if got := replayAll(t, w, Position{}); len(got) != 1 {
		t.Fatalf("a refused call wrote records: %d", len(got))
	}
	for _, o := range []Options{{SegmentSize: 10}, {SegmentSize: 1 << 32}, {SegmentSize: 4096, MaxRecordSize: 4096}, {MaxRecordSize: -1}} {
		if _, err := Open(t.TempDir(), o); err == nil {
			t.Errorf("Open accepted %+v", o)
		}
	}
}

func TestReplayFromEveryPosition(t *testing.T) {
	w := open(t, t.TempDir(), Options{SegmentSize: 512})
	var all []rec
	for i := range 40 {
		p := payload(i, (i*53)%150)
		all = append(all, rec{appendOne(t, w, p), p})
	}
	sameRecs(t, replayAll(t, w, Position{}), all)
	for i, r := range all {
		sameRecs(t, replayAll(t, w, r.pos), all[i+1:])
	}
	// The start of a segment is before its first record.
	sameRecs(t, replayAll(t, w, Position{Segment: all[len(all)-1].pos.Segment}), lastSegment(all))

	stop := errors.New("stop")
	n := 0
	if err := w.Replay(Position{}, func(Position, []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("fn error: got %v after %d calls", err, n)
	}
	ahead := w.End()
	ahead.Offset++
	if err := w.Replay(ahead, func(Position, []byte) error { return nil }); !errors.Is(err, ErrPosition) {
		t.Fatalf("replay ahead of the log: %v", err)
	}
	if err := w.Replay(Position{Segment: 1, Offset: 1 << 20}, func(Position, []byte) error { return nil }); !errors.Is(err, ErrPosition) {
		t.Fatalf("replay beyond a segment's end: %v", err)
	}
}

func lastSegment(rs []rec) []rec {
	s := rs[len(rs)-1].pos.Segment
	i := slices.IndexFunc(rs, func(r rec) bool { return r.pos.Segment == s })
	return rs[i:]
}

// writeLog writes records with one Append per element of calls, closes the
// log and returns the records and the newest segment's bytes.
func writeLog(t *testing.T, dir string, opts Options, calls [][][]byte) ([]rec, []byte) {
	t.Helper()
	w := open(t, dir, opts)
	var rs []rec
	for _, ps := range calls {
		pos := appendOne(t, w, ps...)
		off := pos.Offset
		start := len(rs)
		for i := len(ps) - 1; i >= 0; i-- {
			rs = append(rs, rec{Position{pos.Segment, off}, ps[i]})
			off -= uint32(recordHeaderSize + len(ps[i]))
		}
		slices.Reverse(rs[start:])
	}
	end := w.End()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(segPath(dir, end.Segment))
	if err != nil {
		t.Fatal(err)
	}
	return rs, b
}

func recordStart(r rec) int64 { return int64(r.pos.Offset) - recordHeaderSize - int64(len(r.payload)) }

// TestTornTailEveryOffset cuts the newest segment at every byte of its last
// write: Open reports the cut, Replay yields exactly the records written
// whole before it, and appends continue after them.
func TestTornTailEveryOffset(t *testing.T) {
	base := t.TempDir()
	for _, tc := range []struct {
		name string
		last [][]byte // the last write
	}{
		{"one record", [][]byte{payload(9, 100)}},
		{"three records in one write", [][]byte{payload(9, 20), payload(10, 0), payload(11, 30)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := [][][]byte{{payload(1, 50)}, {payload(2, 10), payload(3, 60)}, tc.last}
			rs, seg := writeLog(t, filepath.Join(base, tc.name), Options{}, calls)
			first := len(rs) - len(tc.last)
			from := recordStart(rs[first])
			for cut := from; cut < int64(len(seg)); cut++ {
				dir := t.TempDir()
				if err := os.WriteFile(segPath(dir, 1), seg[:cut], 0o644); err != nil {
					t.Fatal(err)
				}
				// The records wholly before the cut survive.
				whole := first
				for whole < len(rs) && int64(rs[whole].pos.Offset) <= cut {
					whole++
				}
				w := open(t, dir, Options{})
				tr := w.Truncated()
				atBoundary := whole > 0 && int64(rs[whole-1].pos.Offset) == cut
				if atBoundary != (tr == nil) {
					t.Fatalf("cut at %d: truncation %v", cut, tr)
				}
				if tr != nil && (tr.Segment != 1 || tr.Offset != int64(rs[whole-1].pos.Offset) || tr.Offset+tr.Bytes != cut) {
					t.Fatalf("cut at %d: truncation %+v", cut, tr)
				}
				sameRecs(t, replayAll(t, w, Position{}), rs[:whole])
				p := appendOne(t, w, []byte("after"))
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				w = open(t, dir, Options{})
				if tr := w.Truncated(); tr != nil {
					t.Fatalf("cut at %d: reopening after the repair cut again: %v", cut, tr)
				}
				sameRecs(t, replayAll(t, w, Position{}), append(slices.Clone(rs[:whole]), rec{p, []byte("after")}))
				w.Close()
			}
		})
	}
}

// TestTornTailKinds covers the other shapes a torn newest segment takes.
func TestTornTailKinds(t *testing.T) {
	calls := [][][]byte{{payload(1, 50)}, {payload(2, 40)}, {payload(3, 30), payload(4, 30), payload(5, 30)}}
	rs, seg := writeLog(t, t.TempDir(), Options{}, calls)
	last := rs[len(rs)-3:] // the last write
	zero := func(b []byte, from, to int64) []byte {
		b = bytes.Clone(b)
		clear(b[from:to])
		return b
	}
	flip := func(b []byte, at int64) []byte {
		b = bytes.Clone(b)
		b[at] ^= 0x10
		return b
	}
	for _, tc := range []struct {
		name    string
		seg     []byte
		keep    int // records that survive
		cutAt   int64
		records int // intact records cut with the damage
	}{
		{"trailing zeros", append(bytes.Clone(seg), make([]byte, 8192)...), len(rs), int64(len(seg)), 0},
		{"a few trailing zeros", append(bytes.Clone(seg), make([]byte, 5)...), len(rs), int64(len(seg)), 0},
		{"trailing garbage", append(bytes.Clone(seg), "garbage after the end"...), len(rs), int64(len(seg)), 0},
		{"last record zeroed", zero(seg, recordStart(last[2]), int64(len(seg))), len(rs) - 1, recordStart(last[2]), 0},
		{"last record crc", flip(seg, int64(len(seg))-1), len(rs) - 1, recordStart(last[2]), 0},
		{"last record length", flip(seg, recordStart(last[2])), len(rs) - 1, recordStart(last[2]), 0},
		{"first of last write zeroed, rest intact", zero(seg, recordStart(last[0]), int64(last[0].pos.Offset)), len(rs) - 3, recordStart(last[0]), 2},
		{"middle of last write damaged", flip(seg, recordStart(last[1])+recordHeaderSize+3), len(rs) - 2, recordStart(last[1]), 1},
		{"page of last write lost", zero(seg, recordStart(last[1])+5, recordStart(last[1])+20), len(rs) - 2, recordStart(last[1]), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(segPath(dir, 1), tc.seg, 0o644)
			w := open(t, dir, Options{})
			tr := w.Truncated()
			if tr == nil || tr.Offset != tc.cutAt || tr.Bytes != int64(len(tc.seg))-tc.cutAt || tr.Records != tc.records {
				t.Fatalf("truncation %+v, want offset %d, %d records", tr, tc.cutAt, tc.records)
			}
			t.Log(tr)
			sameRecs(t, replayAll(t, w, Position{}), rs[:tc.keep])
			if st, _ := os.Stat(segPath(dir, 1)); st.Size() != tc.cutAt {
				t.Fatalf("segment is %d bytes after the cut, want %d", st.Size(), tc.cutAt)
			}
			if p := appendOne(t, w, []byte("x")); int64(p.Offset) != tc.cutAt+recordHeaderSize+1 {
				t.Fatalf("append after the cut at %v", p)
			}
		})
	}
}

// TestTornSegmentHeader: a newest segment that is empty or whose header is
// cut, after segments written with links, was cut after it held records
// (segments are created whole): Open refuses it naming the segment. After
// a log written before links (version 1), whose writer created segments
// in place, it is what a crash during a segment's creation leaves: Open
// repairs it (a Truncation says so) and appends there.
func TestTornSegmentHeader(t *testing.T) {
	hdr := segmentHeader(3)
	for _, tc := range []struct {
		name string
		seg  []byte
	}{
		{"empty file", nil},
		{"half a header", hdr[:7]},
		{"header prefix then zeros", append(bytes.Clone(hdr[:10]), make([]byte, 4096)...)},
		{"all zeros", make([]byte, 100)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			rs, _ := writeLog(t, dir, Options{SegmentSize: 130}, [][][]byte{{payload(1, 40)}, {payload(2, 40)}})
			if len(rs) != 2 || rs[1].pos.Segment != 2 {
				t.Fatalf("setup: %v", rs)
			}
			os.WriteFile(segPath(dir, 3), tc.seg, 0o644)
			_, err := Open(dir, Options{SegmentSize: 130})
			asCorruption(t, err, 3, 0)

			v1 := readFixture(t, fixtureV1Dir)
			os.WriteFile(segPath(v1, 3), tc.seg, 0o644)
			w := open(t, v1, Options{SegmentSize: fixtureSegmentSize})
			if tr := w.Truncated(); tr == nil || tr.Segment != 3 || tr.Offset != 0 || tr.Bytes != int64(len(tc.seg)) {
				t.Fatalf("truncation %+v", tr)
			}
			if got := replayAll(t, w, Position{}); len(got) != 6 {
				t.Fatalf("%d records of the version-1 log, want 6", len(got))
			}
			p := appendOne(t, w, []byte("y"))
			if p != (Position{3, segmentStart + recordHeaderSize + 1}) {
				t.Fatalf("append at %v", p)
			}
		})
	}
}

func asCorruption(t *testing.T, err error, seg uint32, off int64) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || !corrupt.Is(err) {
		t.Fatalf("got %v, want a *CorruptionError marked corrupt.ErrCorrupt", err)
	}
	if ce.Segment != seg || ce.Offset != off {
		t.Fatalf("corruption at segment %d offset %d, want %d offset %d (%v)", ce.Segment, ce.Offset, seg, off, err)
	}
}

// TestCorruptionMidSegment flips every byte of a middle record of the newest
// segment: a later write follows, so Open refuses, naming the record.
func TestCorruptionMidSegment(t *testing.T) {
	src := t.TempDir()
	rs, seg := writeLog(t, src, Options{}, [][][]byte{{payload(1, 30)}, {payload(2, 25)}, {payload(3, 30)}})
	mid := rs[1]
	for at := recordStart(mid); at < int64(mid.pos.Offset); at++ {
		dir := t.TempDir()
		b := bytes.Clone(seg)
		b[at] ^= 0x01
		os.WriteFile(segPath(dir, 1), b, 0o644)
		_, err := Open(dir, Options{})
		asCorruption(t, err, 1, recordStart(mid))
		if got, _ := os.ReadFile(segPath(dir, 1)); !bytes.Equal(got, b) {
			t.Fatal("a refused open modified the segment")
		}
	}
}

func TestQuarantine(t *testing.T) {
	dir := t.TempDir()
	rs, seg := writeLog(t, dir, Options{}, [][][]byte{{payload(1, 30)}, {payload(2, 25)}, {payload(3, 30)}})
	bad := bytes.Clone(seg)
	bad[recordStart(rs[1])+recordHeaderSize] ^= 0xff
	os.WriteFile(segPath(dir, 1), bad, 0o644)

	w := open(t, dir, Options{Quarantine: true})
	tr := w.Truncated()
	if tr == nil || tr.Quarantine == "" || tr.Offset != recordStart(rs[1]) {
		t.Fatalf("truncation %+v", tr)
	}
	t.Log(tr)
	kept, err := os.ReadFile(tr.Quarantine)
	if err != nil || !bytes.Equal(kept, bad) {
		t.Fatalf("quarantined bytes differ from the damaged segment (%v)", err)
	}
	sameRecs(t, replayAll(t, w, Position{}), rs[:1])
	p := appendOne(t, w, []byte("z"))
	w.Close()

	// The quarantined file is not a segment; reopening sees a clean log.
	w = open(t, dir, Options{Quarantine: true})
	if w.Truncated() != nil {
		t.Fatalf("second open: %v", w.Truncated())
	}
	sameRecs(t, replayAll(t, w, Position{}), []rec{rs[0], {p, []byte("z")}})
	w.Close()

	// A bad segment header is quarantined whole.
	b, _ := os.ReadFile(segPath(dir, 1))
	copy(b, "XX")
	os.WriteFile(segPath(dir, 1), b, 0o644)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad header without quarantine: %v", err)
	}
	w = open(t, dir, Options{Quarantine: true})
	if tr := w.Truncated(); tr == nil || tr.Offset != 0 || filepath.Base(tr.Quarantine) != "00000001.wal.corrupt.1" {
		t.Fatalf("truncation %+v", tr)
	}
	if got := replayAll(t, w, Position{}); len(got) != 0 {
		t.Fatalf("%d records from a quarantined segment", len(got))
	}
}

func TestCorruptionOlderSegment(t *testing.T) {
	opts := Options{SegmentSize: 256}
	setup := func(t *testing.T) (string, []rec) {
		dir := t.TempDir()
		var calls [][][]byte
		for i := range 12 {
			calls = append(calls, [][]byte{payload(i, 60)})
		}
		rs, _ := writeLog(t, dir, opts, calls)
		if rs[len(rs)-1].pos.Segment < 3 {
			t.Fatal("setup: too few segments")
		}
		return dir, rs
	}
	inSeg := func(rs []rec, s uint32) []rec {
		return slices.DeleteFunc(slices.Clone(rs), func(r rec) bool { return r.pos.Segment != s })
	}
	edit := func(t *testing.T, path string, f func([]byte) []byte) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(path, f(b), 0o644)
	}

	for _, tc := range []struct {
		name string
		f    func([]byte) []byte
		off  func(seg1 []rec) int64
	}{
		{"flipped byte", func(b []byte) []byte { b[segmentStart+recordHeaderSize+60+recordHeaderSize+5] ^= 1; return b },
			func(s []rec) int64 { return recordStart(s[1]) }},
		{"cut short", func(b []byte) []byte { return b[:len(b)-1] },
			func(s []rec) int64 { return recordStart(s[len(s)-1]) }},
		{"trailing zeros", func(b []byte) []byte { return append(b, make([]byte, 32)...) },
			func(s []rec) int64 { return int64(s[len(s)-1].pos.Offset) }},
		{"bad header", func(b []byte) []byte { b[8] = 9; return b }, func([]rec) int64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, rs := setup(t)
			edit(t, segPath(dir, 1), tc.f)
			w := open(t, dir, opts) // only the newest segment is read at open
			err := w.Replay(Position{}, func(Position, []byte) error { return nil })
			asCorruption(t, err, 1, tc.off(inSeg(rs, 1)))
			err = w.ReplayRetained(Position{}, func(Position, []byte) error { return nil })
			asCorruption(t, err, 1, tc.off(inSeg(rs, 1)))
			if _, err := w.Append(context.Background(), []byte("no")); !errors.Is(err, ErrFailed) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("append after corruption: %v", err)
			}
			w.Close()
			// Records already folded in are not read again: replay after
			// segment 1 is clean.
			w = open(t, dir, opts)
			i := slices.IndexFunc(rs, func(r rec) bool { return r.pos.Segment == 2 })
			sameRecs(t, replayAll(t, w, Position{Segment: 2}), rs[i:])
		})
	}

	t.Run("missing segment", func(t *testing.T) {
		dir, _ := setup(t)
		os.Remove(segPath(dir, 2))
		_, err := Open(dir, opts)
		asCorruption(t, err, 2, 0)
	})
}

func TestTruncateBefore(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{SegmentSize: 256})
	var rs []rec
	for i := range 20 {
		p := payload(i, 60)
		rs = append(rs, rec{appendOne(t, w, p), p})
	}
	segs := func() []uint32 {
		got, err := listSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	last := w.End().Segment
	if last < 5 {
		t.Fatal("setup: too few segments")
	}
	if _, err := w.TruncateBefore(Position{Segment: last, Offset: uint32(1 << 20)}); !errors.Is(err, ErrPosition) {
		t.Fatalf("truncate ahead of the log: %v", err)
	}
	for _, tc := range []struct {
		pos     Position
		removed int
		first   uint32
	}{
		{Position{}, 0, 1},
		{Position{Segment: 1, Offset: 20}, 0, 1},                   // inside segment 1
		{Position{Segment: 2}, 1, 2},                               // the start of 2
		{lastOf(rs, 2), 1, 3},                                      // the last record of 2: all of 2 is folded
		{lastOf(rs, 2), 0, 3},                                      // again: nothing more
		{Position{Segment: last, Offset: 40}, int(last - 3), last}, // never the active one
		{w.End(), 0, last},
	} {
		n, err := w.TruncateBefore(tc.pos)
		if err != nil || n != tc.removed || w.First().Segment != tc.first || segs()[0] != tc.first {
			t.Fatalf("TruncateBefore(%v) = %d, %v; first %v, files from %d; want %d removed, first %d",
				tc.pos, n, err, w.First(), segs()[0], tc.removed, tc.first)
		}
	}
	i := slices.IndexFunc(rs, func(r rec) bool { return r.pos.Segment == last })
	sameRecs(t, replayAll(t, w, Position{}), rs[i:])
	w.Close()
	w = open(t, dir, Options{SegmentSize: 256})
	sameRecs(t, replayAll(t, w, Position{}), rs[i:])
	if w.First().Segment != last {
		t.Fatalf("First after reopen: %v", w.First())
	}
}

func lastOf(rs []rec, s uint32) Position {
	var p Position
	for _, r := range rs {
		if r.pos.Segment == s {
			p = r.pos
		}
	}
	return p
}

// TestConcurrentAppend: every acknowledged position replays with its
// payload, in position order, across rollovers (run with -race).
func TestConcurrentAppend(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{SegmentSize: 64 << 10})
	const writers, each = 16, 60
	var mu sync.Mutex
	acked := map[Position][]byte{}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				n := 1 + (g*131+i*17)%3000
				ps := [][]byte{payload(g*1000+i, n)}
				if i%5 == 0 {
					ps = append(ps, payload(g*1000+i, 7))
				}
				pos, err := w.Append(context.Background(), ps...)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[pos] = ps[len(ps)-1]
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, dir, Options{SegmentSize: 64 << 10})
	got := replayAll(t, w, Position{})
	if want := writers * (each + each/5); len(got) != want {
		t.Fatalf("replayed %d records, want %d", len(got), want)
	}
	for i, r := range got {
		if i > 0 && r.pos.Compare(got[i-1].pos) <= 0 {
			t.Fatalf("positions out of order at %d", i)
		}
		if p, ok := acked[r.pos]; ok {
			if !bytes.Equal(p, r.payload) {
				t.Fatalf("payload at %v differs", r.pos)
			}
			delete(acked, r.pos)
		}
	}
	if len(acked) != 0 {
		t.Fatalf("%d acknowledged positions did not replay", len(acked))
	}
	if w.End().Segment < 3 {
		t.Fatal("no rollover happened")
	}
}

func TestWriteFailure(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{})
	ok := appendOne(t, w, []byte("durable"))
	w.f.Close() // every later write fails
	_, err := w.Append(context.Background(), []byte("lost"))
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("append over a failed file: %v", err)
	}
	if _, err := w.Append(context.Background(), []byte("after")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the failure: %v", err)
	}
	if _, err := w.Append(context.Background()); !errors.Is(err, ErrFailed) {
		t.Fatalf("empty append after the failure: %v", err)
	}
	t.Log(err)
	w.Close()
	w = open(t, dir, Options{})
	sameRecs(t, replayAll(t, w, Position{}), []rec{{ok, []byte("durable")}})
}

func TestCloseAndLock(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{})
	if _, err := Open(dir, Options{}); !errors.Is(err, fileutil.ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Append(ctx, []byte("never")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled append: %v", err)
	}
	if p := appendOne(t, w); p != w.End() {
		t.Fatalf("empty append returned %v", p)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := w.Append(context.Background(), []byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if err := w.Replay(Position{}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("replay after close: %v", err)
	}
	if _, err := w.TruncateBefore(Position{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("truncate after close: %v", err)
	}
	w = open(t, dir, Options{}) // the lock was released
	if got := replayAll(t, w, Position{}); len(got) != 0 {
		t.Fatalf("%d records", len(got))
	}
}

func Example() {
	dir, _ := os.MkdirTemp("", "wal")
	defer os.RemoveAll(dir)

	w, _ := Open(dir, Options{})
	pos, _ := w.Append(context.Background(), []byte("first write"))
	w.Append(context.Background(), []byte("second write"))
	w.Close()

	// After a restart: replay what the snapshot (folded up to pos) lacks.
	w, _ = Open(dir, Options{})
	defer w.Close()
	w.Replay(pos, func(p Position, payload []byte) error {
		fmt.Printf("%v %s\n", p, payload)
		return nil
	})
	fmt.Println("wal_position of the first write:", pos.Uint64())
	// Output:
	// 00000001:95 second write
	// wal_position of the first write: 4294967363
}

// faults is an Options.Fault whose failing operation can be switched on
// and off while the log runs.
type faults struct {
	mu sync.Mutex
	op string // "" none
}

func (f *faults) set(op string) { f.mu.Lock(); f.op = op; f.mu.Unlock() }

func (f *faults) fault(op string, seg uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if op == f.op {
		return syscall.ENOSPC
	}
	return nil
}

// waitHealed waits until w takes appends again.
func waitHealed(t *testing.T, w *WAL) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for w.Failing() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the log did not heal: %v", w.Failing())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHealAfterWriteFailure: a full disk (ENOSPC) at a write, a sync or a
// segment's creation fails that append and refuses the next ones naming
// the cause, while the cause lasts (the log keeps trying); once it is
// gone the log takes appends again without a restart. No acknowledged
// record is lost, no refused one is ever replayed, and the log replays
// cleanly after a reopen.
func TestHealAfterWriteFailure(t *testing.T) {
	for _, op := range []string{"write", "sync", "create"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			var f faults
			// segments of one record, so every append creates one
			opts := Options{SegmentSize: segmentStart + recordHeaderSize + 16, Fault: f.fault, HealBackoff: time.Millisecond}
			w := open(t, dir, opts)
			var want []rec
			a := appendOne(t, w, []byte("acknowledged-1"))
			want = append(want, rec{a, []byte("acknowledged-1")})

			f.set(op)
			if _, err := w.Append(context.Background(), []byte("refused-1")); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: %v, want ErrFailed wrapping ENOSPC", err)
			}
			if _, err := w.Append(context.Background(), []byte("refused-2")); !errors.Is(err, ErrFailed) {
				t.Fatalf("append while failing: %v", err)
			}
			// The cause lasts: heals fail, the log stays failing.
			time.Sleep(50 * time.Millisecond)
			if w.Failing() == nil && op != "write" {
				// (a heal neither writes records nor, for "write", hits the fault)
				t.Fatalf("healed while the disk is still full")
			}
			f.set("")
			waitHealed(t, w)
			if w.Heals() == 0 {
				t.Fatal("healed without counting it")
			}
			b := appendOne(t, w, []byte("acknowledged-2"))
			if b.Compare(a) <= 0 {
				t.Fatalf("position %v after a heal is not after %v", b, a)
			}
			want = append(want, rec{b, []byte("acknowledged-2")})
			sameRecs(t, replayAll(t, w, Position{}), want)
			w.Close()
			w = open(t, dir, Options{SegmentSize: opts.SegmentSize})
			sameRecs(t, replayAll(t, w, Position{}), want)
			c := appendOne(t, w, []byte("acknowledged-3"))
			want = append(want, rec{c, []byte("acknowledged-3")})
			sameRecs(t, replayAll(t, w, Position{}), want)
		})
	}
}

// TestTruncationDetected: a log cut below records it acknowledged is an
// error naming the segment, never a silent start: an older segment cut at
// any offset (its successor's link names its end), the newest cut back to
// its header or emptied (a segment is created with its link), any segment
// cut below the checkpoint, and a missing segment. (The newest segment's
// records after the checkpoint have no witness: a cut there at a record
// boundary looks like a log that never held them.)
func TestTruncationDetected(t *testing.T) {
	opts := Options{SegmentSize: segmentStart + 5*(recordHeaderSize+40)}
	setup := func(t *testing.T) (string, []rec) {
		dir := t.TempDir()
		var calls [][][]byte
		for i := range 15 {
			calls = append(calls, [][]byte{payload(i, 40)})
		}
		rs, _ := writeLog(t, dir, opts, calls)
		if rs[len(rs)-1].pos.Segment != 3 {
			t.Fatalf("setup: %d segments, want 3", rs[len(rs)-1].pos.Segment)
		}
		return dir, rs
	}
	cut := func(t *testing.T, path string, size int64) {
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
	}

	// Segment 2 (older) cut at every record boundary and inside records.
	_, rs := setup(t)
	var offsets []int64
	for _, r := range rs {
		if r.pos.Segment == 2 {
			offsets = append(offsets, recordStart(r), recordStart(r)+7)
		}
	}
	offsets = append(offsets, segmentStart-3, segmentHeaderSize, 0)
	for _, off := range offsets {
		t.Run(fmt.Sprintf("segment 2 cut at %d", off), func(t *testing.T) {
			dir, _ := setup(t)
			cut(t, segPath(dir, 2), off)
			// Open reads the newest segment, whose link names segment
			// 2's end
			_, err := Open(dir, opts)
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Segment != 2 || !strings.Contains(err.Error(), "lost") {
				t.Fatalf("open with segment 2 cut at %d: %v, want corruption in segment 2 naming what was lost", off, err)
			}
			info, err := Scan(dir, Position{}, nil)
			if err != nil || info.Segments[1].Problem == "" {
				t.Fatalf("scan of segment 2 cut at %d: %v %+v", off, err, info.Segments)
			}
		})
	}

	// The newest segment cut back to its header, or emptied.
	for _, size := range []int64{segmentHeaderSize, 0, 3} {
		t.Run(fmt.Sprintf("newest cut to %d bytes", size), func(t *testing.T) {
			dir, _ := setup(t)
			cut(t, segPath(dir, 3), size)
			_, err := Open(dir, opts)
			asCorruption(t, err, 3, map[int64]int64{segmentHeaderSize: segmentHeaderSize}[size])
		})
	}

	// The newest segment cut at a record boundary below the checkpoint.
	t.Run("newest cut below the checkpoint", func(t *testing.T) {
		dir, rs := setup(t)
		last := rs[len(rs)-1]
		cut(t, segPath(dir, 3), recordStart(last))
		o := opts
		o.After = last.pos // a compaction folded every record
		_, err := Open(dir, o)
		var ce *CorruptionError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "before its checkpoint") {
			t.Fatalf("open of a log cut below its checkpoint: %v", err)
		}
	})

	t.Run("missing middle segment", func(t *testing.T) {
		dir, _ := setup(t)
		os.Remove(segPath(dir, 2))
		_, err := Open(dir, opts)
		asCorruption(t, err, 2, 0)
		info, err := Scan(dir, Position{}, nil)
		if err != nil || !strings.Contains(info.Segments[1].Problem, "segment 2 is missing") || !strings.Contains(info.Segments[1].Problem, "lost") {
			t.Fatalf("scan with segment 2 missing: %v %+v", err, info.Segments)
		}
	})
}
