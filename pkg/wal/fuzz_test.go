package wal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
)

// fuzzSegment builds segment bytes: a header and a link naming prev, then
// one write per element.
func fuzzSegment(n uint32, prev Position, writes ...[]string) []byte {
	b := appendLink(segmentHeader(n), prev)
	for _, w := range writes {
		for i, p := range w {
			kind := kindNext
			if i == 0 {
				kind = kindFirst
			}
			b = appendRecord(b, kind, []byte(p))
		}
	}
	return b
}

// FuzzReplay feeds outside bytes to the reader as a segment file, either as
// the newest segment (recovery may cut or quarantine it) or as an older one
// (read strictly by Replay). It must never panic; Open and Replay either
// fail with a corruption error or yield records whose bytes on disk verify,
// in increasing positions; after a successful Open the newest segment
// replays cleanly and takes appends.
func FuzzReplay(f *testing.F) {
	good := fuzzSegment(1, Position{}, []string{"a"}, []string{"bc", "", "def"}, []string{"ghij"})
	f.Add(good, false, false)
	f.Add(good, true, false)
	f.Add(good[:len(good)-2], false, false)
	f.Add(append(bytes.Clone(good), make([]byte, 40)...), false, false)
	f.Add(good[:7], false, false)
	f.Add([]byte{}, false, false)
	f.Add(make([]byte, 64), true, false)
	mid := bytes.Clone(good)
	mid[segmentStart+recordHeaderSize+1] ^= 1
	f.Add(mid, false, false)
	f.Add(mid, false, true)
	f.Add(mid, true, false)

	f.Fuzz(func(t *testing.T, seg []byte, older, quarantine bool) {
		dir := t.TempDir()
		if err := os.WriteFile(segPath(dir, 1), seg, 0o644); err != nil {
			t.Fatal(err)
		}
		if older {
			if err := os.WriteFile(segPath(dir, 2), fuzzSegment(2, Position{Segment: 1, Offset: uint32(len(seg))}, []string{"newest"}), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w, err := Open(dir, Options{Quarantine: quarantine})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open: %v", err)
			}
			return
		}
		defer w.Close()

		files := map[uint32][]byte{}
		replay := func() (int, error) {
			var last Position
			n := 0
			err := w.Replay(Position{}, func(pos Position, p []byte) error {
				if pos.Compare(last) <= 0 {
					t.Fatalf("position %v after %v", pos, last)
				}
				last = pos
				b, ok := files[pos.Segment]
				if !ok {
					b, _ = os.ReadFile(segPath(dir, pos.Segment))
					files[pos.Segment] = b
				}
				start := int(pos.Offset) - recordHeaderSize - len(p)
				if start < segmentHeaderSize {
					t.Fatalf("record at %v starts inside the segment header", pos)
				}
				_, got, size, err := parseRecord(b[start:])
				if err != nil || !bytes.Equal(got, p) || start+size != int(pos.Offset) {
					t.Fatalf("record at %v does not verify on disk: %v", pos, err)
				}
				n++
				return nil
			})
			return n, err
		}
		n, err := replay()
		sameReplays(t, w)
		if err != nil {
			if !older || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("replay after a successful open: %v", err)
			}
			return
		}
		pos, err := w.Append(context.Background(), []byte("appended"))
		if err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		clear(files)
		var lastPos Position
		var lastPayload []byte
		w.Replay(Position{}, func(p Position, b []byte) error { lastPos, lastPayload = p, bytes.Clone(b); return nil })
		if m, err := replay(); err != nil || m != n+1 || lastPos != pos || string(lastPayload) != "appended" {
			t.Fatalf("after append: %d records (want %d), last %v %q (want %v), %v", m, n+1, lastPos, lastPayload, pos, err)
		}
	})
}

// sameReplays fails unless ReplayRetained yields what Replay does: the
// same records at the same positions, and the same error.
func sameReplays(t *testing.T, w *WAL) {
	t.Helper()
	type got struct {
		recs []rec
		err  string
	}
	var both [2]got
	for i, replay := range []func(Position, func(Position, []byte) error) error{w.Replay, w.ReplayRetained} {
		err := replay(Position{}, func(pos Position, p []byte) error {
			if i == 0 {
				p = bytes.Clone(p) // valid only until this returns
			}
			both[i].recs = append(both[i].recs, rec{pos, p})
			return nil
		})
		if err != nil {
			both[i].err = err.Error()
		}
	}
	if both[0].err != both[1].err || len(both[0].recs) != len(both[1].recs) {
		t.Fatalf("Replay: %d records, %q; ReplayRetained: %d records, %q", len(both[0].recs), both[0].err, len(both[1].recs), both[1].err)
	}
	for i, r := range both[0].recs {
		if k := both[1].recs[i]; k.pos != r.pos || !bytes.Equal(k.payload, r.payload) {
			t.Fatalf("record %d: Replay %v, ReplayRetained %v", i, r.pos, k.pos)
		}
	}
}
