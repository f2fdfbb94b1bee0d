package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// tailAll reads everything t has now, returning the payloads.
func tailAll(t *testing.T, tl *Tail) []string {
	t.Helper()
	var got []string
	if _, err := tl.Read(func(_ Position, p []byte) error { got = append(got, string(p)); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTailFollows: a tail hands out every record a writer appends, across
// segment rollovers, once, in order; a tail started after a position
// sees only what follows it.
func TestTailFollows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := Open(dir, Options{SegmentSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tl := OpenTail(dir, Position{})
	defer tl.Close()
	if got := tailAll(t, tl); len(got) != 0 {
		t.Fatalf("empty log: %q", got)
	}
	var want []string
	var mid Position
	for i := 0; i < 20; i++ {
		p := fmt.Sprintf("record %02d with some bytes", i)
		pos, err := w.Append(t.Context(), []byte(p))
		if err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			mid = pos
		}
		want = append(want, p)
		if i%7 == 0 {
			got := tailAll(t, tl)
			if len(got) == 0 || got[len(got)-1] != p {
				t.Fatalf("after record %d the tail read %q", i, got)
			}
		}
	}
	tailAll(t, tl)
	if tl.Position() != w.End() {
		t.Fatalf("tail at %v, log ends at %v", tl.Position(), w.End())
	}
	if w.End().Segment < 3 {
		t.Fatalf("the test wants several segments, the log has %d", w.End().Segment)
	}
	from := OpenTail(dir, mid)
	defer from.Close()
	if got := tailAll(t, from); fmt.Sprint(got) != fmt.Sprint(want[10:]) {
		t.Fatalf("tail from record 9's position read %q", got)
	}
}

// TestTailPartialRecord: a record not yet wholly written is not handed
// out; once the rest arrives it is.
func TestTailPartialRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(t.Context(), []byte("one")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec := appendRecord(nil, 1, []byte("two"))
	seg := filepath.Join(dir, segmentName(1))
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tl := OpenTail(dir, Position{})
	defer tl.Close()
	for cut := 0; cut < len(rec); cut += 5 {
		end := min(cut+5, len(rec))
		if _, err := f.Write(rec[cut:end]); err != nil {
			t.Fatal(err)
		}
		got := tailAll(t, tl)
		switch {
		case cut == 0 && fmt.Sprint(got) != "[one]":
			t.Fatalf("first read: %q", got)
		case cut > 0 && end < len(rec) && len(got) != 0:
			t.Fatalf("handed out a record cut at %d of %d bytes: %q", end, len(rec), got)
		case end == len(rec) && fmt.Sprint(got) != "[two]":
			t.Fatalf("the completed record: %q", got)
		}
	}
}

// TestTailBehind: a tail whose records were deleted by the writer (a
// compaction truncated the log) says so; damage in a segment before the
// newest is corruption.
func TestTailBehind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	w, err := Open(dir, Options{SegmentSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var last Position
	for i := 0; i < 20; i++ {
		if last, err = w.Append(t.Context(), []byte(fmt.Sprintf("record %02d with some bytes", i))); err != nil {
			t.Fatal(err)
		}
	}
	tl := OpenTail(dir, Position{Segment: 1, Offset: segmentHeaderSize})
	defer tl.Close()
	if _, err := w.TruncateBefore(last); err != nil {
		t.Fatal(err)
	}
	if _, err := tl.Read(func(Position, []byte) error { return nil }); !errors.Is(err, ErrBehind) {
		t.Fatalf("a tail before the truncated segments: %v, want ErrBehind", err)
	}

	dir2 := filepath.Join(t.TempDir(), "wal")
	w2, err := Open(dir2, Options{SegmentSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := w2.Append(t.Context(), []byte(fmt.Sprintf("record %02d with some bytes", i))); err != nil {
			t.Fatal(err)
		}
	}
	w2.Close()
	b, _ := os.ReadFile(filepath.Join(dir2, segmentName(1)))
	b[len(b)-2] ^= 0xff
	os.Chmod(filepath.Join(dir2, segmentName(1)), 0o644)
	if err := os.WriteFile(filepath.Join(dir2, segmentName(1)), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tl2 := OpenTail(dir2, Position{})
	defer tl2.Close()
	var ce *CorruptionError
	if _, err := tl2.Read(func(Position, []byte) error { return nil }); !errors.As(err, &ce) || ce.Segment != 1 {
		t.Fatalf("damage in an older segment: %v", err)
	}
}
