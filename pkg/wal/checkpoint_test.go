package wal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// TestCheckpointRoundTrip: a written checkpoint reads back as written,
// with its position spelled out for people, and replaces the one before.
func TestCheckpointRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if _, ok, err := ReadCheckpoint(dir); ok || err != nil {
		t.Fatalf("no file: %v %v", ok, err)
	}
	for _, c := range []Checkpoint{
		{Folded: Position{Segment: 3, Offset: 1234}.Uint64(), Kind: CheckpointCompaction, SnapshotID: 7, Time: "2026-12-06T00:00:00Z"},
		{Folded: Position{Segment: 4, Offset: 16}.Uint64(), Kind: CheckpointDiscard, Time: "2026-12-06T00:00:01Z"},
	} {
		if err := WriteCheckpoint(dir, c); err != nil {
			t.Fatal(err)
		}
		got, ok, err := ReadCheckpoint(dir)
		if err != nil || !ok {
			t.Fatalf("read: %v %v", ok, err)
		}
		c.Format, c.Version, c.FoldedAt = CheckpointFormat, CheckpointVersion, c.Position().String()
		if got != c {
			t.Fatalf("read %+v, wrote %+v", got, c)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if !strings.Contains(string(b), `"folded_at":"00000004:16"`) {
		t.Errorf("the file does not spell the position out: %s", b)
	}
}

// TestParseCheckpoint: what is not a checkpoint this build can trust is an
// error marked corrupt.
func TestParseCheckpoint(t *testing.T) {
	good := `{"format":"servingsnap-wal-checkpoint","version":1,"folded":4294967312,"folded_at":"00000001:16","kind":"compaction","snapshot_id":2,"time":"t"}`
	if _, err := ParseCheckpoint([]byte(good)); err != nil {
		t.Fatalf("good: %v", err)
	}
	for name, b := range map[string]string{
		"empty":         ``,
		"not json":      `folded=3`,
		"other format":  strings.Replace(good, "servingsnap-wal-checkpoint", "x", 1),
		"newer version": strings.Replace(good, `"version":1`, `"version":2`, 1),
		"disagreeing":   strings.Replace(good, `00000001:16`, `00000001:17`, 1),
		"unknown kind":  strings.Replace(good, `"compaction"`, `"guess"`, 1),
		"unknown field": strings.Replace(good, `"time"`, `"extra":1,"time"`, 1),
		"negative":      strings.Replace(good, `4294967312`, `-1`, 1),
	} {
		if _, err := ParseCheckpoint([]byte(b)); !errors.Is(err, corrupt.ErrCorrupt) {
			t.Errorf("%s: %v, want an error marked corrupt", name, err)
		}
	}
}

// FuzzParseCheckpoint: any bytes parse or fail cleanly, and what parses
// writes back to what it read.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte(`{"format":"servingsnap-wal-checkpoint","version":1,"folded":4294967312,"folded_at":"00000001:16","kind":"compaction","snapshot_id":2,"time":"t"}`))
	f.Add([]byte(`{"format":"servingsnap-wal-checkpoint","version":1,"folded":0,"folded_at":"00000000:0","kind":"discard","time":""}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCheckpoint(b)
		if err != nil {
			return
		}
		if c.FoldedAt != c.Position().String() {
			t.Fatalf("parsed %+v with a position that disagrees", c)
		}
	})
}
