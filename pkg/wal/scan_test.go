package wal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScan: a read-only scan lists segments and records after a position
// while the writer holds the lock, and reports a damaged tail without
// cutting it.
func TestScan(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{SegmentSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	var acked []Position
	for i := 0; i < 10; i++ {
		p, err := w.Append(context.Background(), []byte(strings.Repeat("x", 40+i)))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, p)
	}
	var seen []Position
	info, err := Scan(dir, acked[3], func(p Position, b []byte) error {
		seen = append(seen, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.Records != 10 || info.After != 6 || len(seen) != 6 || seen[0] != acked[4] || info.End != acked[9] || len(info.Segments) < 2 {
		t.Fatalf("scan: %+v, seen %v, acked %v", info, seen, acked)
	}
	w.Close()
	// a torn tail: the scan reports it and leaves the file alone
	last := filepath.Join(dir, segmentName(info.End.Segment))
	st, _ := os.Stat(last)
	if err := os.Truncate(last, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	info, err = Scan(dir, Position{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tail := info.Segments[len(info.Segments)-1]
	if info.Records != 9 || tail.Problem == "" {
		t.Fatalf("torn tail: %+v", info)
	}
	if st2, _ := os.Stat(last); st2.Size() != st.Size()-3 {
		t.Error("scan changed the file")
	}
}
