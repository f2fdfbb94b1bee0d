package wal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// CheckpointFile is the log's own record of what its records belong to
// (docs/FORMAT.md §6.4): every record at or before the checkpoint's
// position is held by a vintage (a compaction folded it) or was retired
// (a lake build that superseded the live writes, a discard); the records
// after it are the live delta, which shadows whatever snapshot CURRENT
// names. Replay after a restart starts from it, never from a manifest's
// lineage that gc may have deleted (Prometheus's wlog checkpoint and
// pebble's log number in its MANIFEST play the same part).
const CheckpointFile = "CHECKPOINT"

// CheckpointFormat and CheckpointVersion identify the file's content.
const (
	CheckpointFormat  = "servingsnap-wal-checkpoint"
	CheckpointVersion = 1
)

// Checkpoint kinds: what moved the position last.
const (
	CheckpointCompaction = "compaction" // a compaction folded the records into SnapshotID
	CheckpointSupersede  = "supersede"  // a lake build (SnapshotID) retired the writes before it started
	CheckpointDiscard    = "discard"    // an operator discarded the live writes
	CheckpointRecovered  = "recovered"  // rolled forward from the manifest CURRENT names (a crash between its flip and this file)
	CheckpointUpgraded   = "upgraded"   // derived once from the snapshots' lineage, for a log written before checkpoints existed
)

// Checkpoint is the content of CheckpointFile.
type Checkpoint struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Folded is the position (Position.Uint64) at or before which every
	// record belongs to a vintage or was retired; FoldedAt says the same
	// as segment:offset, for people.
	Folded   uint64 `json:"folded"`
	FoldedAt string `json:"folded_at"`
	// Kind says what moved it (CheckpointCompaction, …) and SnapshotID
	// which snapshot was published with it (0: none, a discard).
	Kind       string `json:"kind"`
	SnapshotID uint64 `json:"snapshot_id,omitempty"`
	Time       string `json:"time"` // RFC 3339 UTC
}

// Position is the checkpoint's position.
func (c Checkpoint) Position() Position { return PositionFromUint64(c.Folded) }

// ReadCheckpoint reads dir's checkpoint; ok is false when there is none
// (a log that no compaction, superseding build or discard has moved, or
// one written before checkpoints existed). A file that does not parse is
// an error marked corrupt naming it.
func ReadCheckpoint(dir string) (c Checkpoint, ok bool, err error) {
	p := filepath.Join(dir, CheckpointFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("wal checkpoint: %w", err)
	}
	c, err = ParseCheckpoint(b)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return c, true, nil
}

// ParseCheckpoint decodes and checks a checkpoint file's bytes.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	var c Checkpoint
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, corrupt.Errorf("not a checkpoint: %v", err)
	}
	if c.Format != CheckpointFormat {
		return c, corrupt.Errorf("format %q, want %q", c.Format, CheckpointFormat)
	}
	if c.Version != CheckpointVersion {
		return c, corrupt.Errorf("version %d, this build reads version %d", c.Version, CheckpointVersion)
	}
	if want := c.Position().String(); c.FoldedAt != want {
		return c, corrupt.Errorf("folded %d is %s, but folded_at says %q", c.Folded, want, c.FoldedAt)
	}
	switch c.Kind {
	case CheckpointCompaction, CheckpointSupersede, CheckpointDiscard, CheckpointRecovered, CheckpointUpgraded:
	default:
		return c, corrupt.Errorf("unknown kind %q", c.Kind)
	}
	return c, nil
}

// WriteCheckpoint replaces dir's checkpoint atomically and durably
// (write-temp, fsync, rename, fsync the directory), creating dir if need
// be. The caller serialises writers (the dataset's write lock).
func WriteCheckpoint(dir string, c Checkpoint) error {
	c.Format, c.Version = CheckpointFormat, CheckpointVersion
	c.FoldedAt = c.Position().String()
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := ensureDir(dir); err != nil {
		return fmt.Errorf("wal checkpoint: %w", err)
	}
	return fileutil.WriteFileAtomic(filepath.Join(dir, CheckpointFile), append(b, '\n'), 0o644)
}
