package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// HistoryFile is the dataset's append-only log of CURRENT flips.
const HistoryFile = "HISTORY"

// Flip is one line of HISTORY: a change of CURRENT (from From to To) or
// of the live writes' checkpoint, and what made it.
type Flip struct {
	Time   string `json:"time"`   // RFC 3339 UTC
	Action string `json:"action"` // ActionBuild, ActionPublish, ActionCompaction, ActionRollback, ActionDiscard
	From   uint64 `json:"from"`   // 0 when there was no CURRENT
	To     uint64 `json:"to"`     // = From for a discard
	Tool   string `json:"tool,omitempty"`
	Reason string `json:"reason,omitempty"`
	// WALPosition is the live writes' checkpoint the change set, when it
	// set one (a compaction's fold, a superseding build, a discard).
	WALPosition uint64 `json:"wal_position,omitempty"`
	// Rows is how many live rows a discard set aside.
	Rows int64 `json:"rows,omitempty"`
	// Recovered marks a line written by the next writer for a change whose
	// own writer crashed between its flip and this line.
	Recovered bool `json:"recovered,omitempty"`
}

// HISTORY kinds. Lines written before kinds existed say "publish" for
// builds and compactions alike.
const (
	ActionBuild      = "build"      // a lake build published itself
	ActionPublish    = "publish"    // a staged vintage published (snapbuild publish --id)
	ActionCompaction = "compaction" // a compaction folded the live writes into a new snapshot
	ActionRollback   = "rollback"   // CURRENT moved to another vintage (back or forward)
	ActionDiscard    = "discard"    // the live writes were set aside; CURRENT unchanged
)

// appendFlipLocked appends one JSON line to HISTORY and fsyncs it.
// Requires the write lock. The log is advisory (CURRENT is the truth), so
// a torn last line after a crash is skipped by readers.
func (w *Writer) appendFlipLocked(f Flip) error {
	if f.Time == "" {
		f.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	p := w.d.Path(HistoryFile)
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fh.Write(append(b, '\n'))
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append %s: %w", p, err)
	}
	return fileutil.SyncDir(w.d.Dir)
}

// Flips reads HISTORY, oldest first. Lines that do not parse (a torn
// write) are skipped.
func (d *Dir) Flips() ([]Flip, error) {
	b, err := os.ReadFile(d.Path(HistoryFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Flip
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var f Flip
		if json.Unmarshal(sc.Bytes(), &f) == nil && f.To != 0 {
			out = append(out, f)
		}
	}
	return out, nil
}

// Vintage is one manifest present in the dataset.
type Vintage struct {
	ID       uint64             `json:"snapshot_id"`
	Parent   uint64             `json:"parent_id"`
	Created  string             `json:"created"`
	Rows     int64              `json:"rows"`
	Series   int64              `json:"series"`
	Bytes    int64              `json:"bytes"` // sum of the snapshot's file sizes
	Current  bool               `json:"current"`
	Error    string             `json:"error,omitempty"` // the manifest did not load
	Manifest *manifest.Manifest `json:"-"`
}

// Vintages lists every manifest present, oldest first, marking CURRENT.
// A manifest that does not load is listed with its error.
func (d *Dir) Vintages() ([]Vintage, error) {
	ids, err := d.IDs()
	if err != nil {
		return nil, err
	}
	cur, _ := d.CurrentID()
	var out []Vintage
	for _, id := range ids {
		v := Vintage{ID: id, Current: id == cur}
		m, err := d.Load(id)
		if err != nil {
			v.Error = err.Error()
		} else {
			v.Parent, v.Created, v.Rows, v.Series, v.Manifest = m.ParentID, m.Created, m.Stats.Rows, m.Stats.Series, m
			for _, f := range m.Files {
				v.Bytes += f.Size
			}
		}
		out = append(out, v)
	}
	return out, nil
}
