package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// salvageLog writes 30 records of 40 bytes over segments of 10 records
// and returns them; the log is closed.
func salvageLog(t *testing.T, dir string) []rec {
	t.Helper()
	w := open(t, dir, Options{SegmentSize: segmentStart + 10*(recordHeaderSize+40)})
	var recs []rec
	for i := 0; i < 30; i++ {
		p := payload(i, 40)
		recs = append(recs, rec{appendOne(t, w, p), p})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if recs[0].pos.Segment != 1 || recs[29].pos.Segment != 3 {
		t.Fatalf("records span segments %d..%d, want 1..3", recs[0].pos.Segment, recs[29].pos.Segment)
	}
	return recs
}

// TestSalvage: damage in an older segment stops the replay; Salvage keeps
// every intact record before and after it (counted), sets the original
// aside whole, and the log then replays and takes appends.
func TestSalvage(t *testing.T) {
	recOff := func(k int) int { return segmentStart + k*(recordHeaderSize+40) } // record k of a segment
	for _, tc := range []struct {
		name         string
		flip         int    // byte of segment 1 to flip (-1: none)
		named        uint32 // a record named by position
		lostIdx      []int  // records of the log lost
		before, afte int
	}{
		{"payload byte of record 4", recOff(4) + recordHeaderSize + 7, 0, []int{4}, 4, 5},
		{"header byte of record 4", recOff(4) + 2, 0, []int{4}, 4, 5},
		{"first record", recOff(0) + recordHeaderSize, 0, []int{0}, 0, 9},
		{"last record of the segment", recOff(9) + recordHeaderSize + 39, 0, []int{9}, 9, 0},
		{"a sound record named by position", -1, uint32(recOff(7)), []int{6}, 6, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := salvageLog(t, dir)
			seg1 := segPath(dir, 1)
			orig, err := os.ReadFile(seg1)
			if err != nil {
				t.Fatal(err)
			}
			if tc.flip >= 0 {
				b := bytes.Clone(orig)
				b[tc.flip] ^= 0x40
				if err := os.WriteFile(seg1, b, 0o644); err != nil {
					t.Fatal(err)
				}
				w := open(t, dir, Options{})
				if err := w.Replay(Position{}, func(Position, []byte) error { return nil }); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("replay over the damage: %v, want corruption", err)
				}
				w.Close()
			}
			damagedBytes, _ := os.ReadFile(seg1)
			if named := (Position{Segment: 1, Offset: tc.named}); tc.named != 0 && named != recs[6].pos {
				t.Fatalf("named %d is not record 6's position %v", tc.named, recs[6].pos)
			}
			s, err := Salvage(dir, 1, tc.named, Position{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Before != tc.before || s.After != tc.afte || len(s.Lost) != 1 {
				t.Fatalf("kept %d before and %d after, lost %+v; want %d, %d and one range", s.Before, s.After, s.Lost, tc.before, tc.afte)
			}
			if l := s.Lost[0]; l.From != uint32(recOff(tc.lostIdx[0])) || l.To != uint32(recOff(tc.lostIdx[0]+1)) {
				t.Errorf("lost %d..%d, want record %d at %d..%d", l.From, l.To, tc.lostIdx[0], recOff(tc.lostIdx[0]), recOff(tc.lostIdx[0]+1))
			}
			if aside, _ := os.ReadFile(filepath.Join(dir, s.Aside)); !bytes.Equal(aside, damagedBytes) {
				t.Error("the original segment was not set aside whole")
			}
			w := open(t, dir, Options{})
			var got [][]byte
			if err := w.Replay(Position{}, func(_ Position, p []byte) error { got = append(got, bytes.Clone(p)); return nil }); err != nil {
				t.Fatalf("replay after salvage: %v", err)
			}
			var want [][]byte
			for i, r := range recs {
				if i != tc.lostIdx[0] {
					want = append(want, r.payload)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("replayed %d records after salvage, want %d (30 less the lost one)", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("record %d differs after salvage", i)
				}
			}
			appendOne(t, w, []byte("after salvage"))
		})
	}
}

func TestSalvageRefuses(t *testing.T) {
	dir := t.TempDir()
	salvageLog(t, dir)
	if _, err := Salvage(dir, 2, 0, Position{}); !errors.Is(err, ErrNoDamage) {
		t.Errorf("salvage of a sound segment: %v, want ErrNoDamage", err)
	}
	if _, err := Salvage(dir, 1, 0, Position{Segment: 2, Offset: 100}); err == nil {
		t.Error("salvaged a segment before the checkpoint")
	}
	w := open(t, dir, Options{})
	defer w.Close()
	if _, err := Salvage(dir, 1, 0, Position{}); err == nil {
		t.Error("salvaged a log a writer holds")
	}
}
