package inspect

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// History is the JSON document of `snapinspect history --json`: every
// vintage whose manifest is present, newest first.
type History struct {
	Dataset   string `json:"dataset"`
	Dir       string `json:"dir"`
	CurrentID uint64 `json:"current_id"` // 0 when CURRENT is absent or unreadable
	// CurrentError is why CURRENT could not be read ("" when it could, or
	// when it is simply absent).
	CurrentError string    `json:"current_error"`
	Snapshots    []Vintage `json:"snapshots"`
	// Flips is the HISTORY log of CURRENT flips (publish, rollback), oldest
	// first.
	Flips []dataset.Flip `json:"flips"`
}

// Vintage is one manifest. When it fails to load, Error says why and only
// SnapshotID (from the file name) and Current are meaningful.
type Vintage struct {
	SnapshotID  uint64 `json:"snapshot_id"`
	ParentID    uint64 `json:"parent_id"`
	Created     string `json:"created"`
	Tool        string `json:"tool"`
	Rows        int64  `json:"rows"`
	Series      int64  `json:"series"`
	FirstPeriod string `json:"first_period"`
	LastPeriod  string `json:"last_period"`
	Current     bool   `json:"current"`
	Error       string `json:"error"`
}

// LoadHistory lists the vintages of the dataset at dir. A manifest that
// fails to load is listed with its error; only an unreadable directory
// fails.
func LoadHistory(dir string) (*History, error) {
	ds, err := Dataset(dir)
	if err != nil {
		return nil, err
	}
	h := &History{Dataset: ds.Name, Dir: ds.Dir, Snapshots: []Vintage{}}
	if id, err := ds.CurrentID(); err == nil {
		h.CurrentID = id
	} else if !isNoCurrent(err) {
		h.CurrentError = err.Error()
	}
	vs, err := ds.Vintages()
	if err != nil {
		return nil, err
	}
	for i := len(vs) - 1; i >= 0; i-- {
		mv := vs[i]
		v := Vintage{SnapshotID: mv.ID, Current: mv.ID == h.CurrentID, Error: mv.Error}
		if m := mv.Manifest; m != nil {
			v.ParentID, v.Created, v.Tool = m.ParentID, m.Created, m.Tool
			v.Rows, v.Series = m.Stats.Rows, m.Stats.Series
			v.FirstPeriod, v.LastPeriod = m.Stats.FirstPeriod, m.Stats.LastPeriod
		}
		h.Snapshots = append(h.Snapshots, v)
	}
	if h.Flips, err = ds.Flips(); err != nil {
		return nil, err
	}
	if h.Flips == nil {
		h.Flips = []dataset.Flip{}
	}
	return h, nil
}

func isNoCurrent(err error) bool {
	return errors.Is(err, dataset.ErrNoCurrent)
}

// WriteText renders the history as a table, CURRENT marked with '*'.
func (h *History) WriteText(w io.Writer) error {
	cur := "no CURRENT"
	if h.CurrentID != 0 {
		cur = fmt.Sprintf("CURRENT is %d", h.CurrentID)
	}
	plural := "s"
	if len(h.Snapshots) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "%s: %d snapshot%s, %s  %s\n", h.Dataset, len(h.Snapshots), plural, cur, h.Dir)
	if h.CurrentError != "" {
		fmt.Fprintf(w, "  ERROR: %s\n", h.CurrentError)
	}
	if len(h.Snapshots) == 0 {
		return nil
	}
	t := newTable("", "snapshot_id", "parent_id", "created", "rows", "series", "periods").alignRight(1, 2, 4, 5)
	for _, v := range h.Snapshots {
		mark := " "
		if v.Current {
			mark = "*"
		}
		if v.Error != "" {
			t.add(mark, fmt.Sprint(v.SnapshotID), "-", "ERROR: "+v.Error)
			continue
		}
		periods := "-"
		if v.FirstPeriod != "" {
			periods = v.FirstPeriod + " .. " + v.LastPeriod
		}
		t.add(mark, fmt.Sprint(v.SnapshotID), fmt.Sprint(v.ParentID), v.Created, Commas(v.Rows), Commas(v.Series), periods)
	}
	if err := t.write(w, ""); err != nil {
		return err
	}
	if len(h.Flips) > 0 {
		fmt.Fprintf(w, "Changes (HISTORY):\n")
		ft := newTable("time", "action", "from", "to", "live writes", "reason").alignRight(2, 3)
		for _, f := range h.Flips {
			ft.add(f.Time, f.Action, fmt.Sprint(f.From), fmt.Sprint(f.To), checkpointMove(f), f.Reason)
		}
		return ft.write(w, "  ")
	}
	return nil
}

// checkpointMove says what a change did to the live writes' checkpoint
// ("" when it did not move it).
func checkpointMove(f dataset.Flip) string {
	var s string
	switch {
	case f.WALPosition == 0:
	case f.Action == dataset.ActionCompaction:
		s = "folded through " + wal.PositionFromUint64(f.WALPosition).String()
	case f.Action == dataset.ActionDiscard:
		s = fmt.Sprintf("%s rows discarded through %s", Commas(f.Rows), wal.PositionFromUint64(f.WALPosition))
	default:
		s = "retired through " + wal.PositionFromUint64(f.WALPosition).String()
	}
	if f.Recovered {
		s = strings.TrimSpace(s + " (recovered)")
	}
	return s
}

// WriteJSON renders the history as indented JSON.
func (h *History) WriteJSON(w io.Writer) error { return writeJSON(w, h) }

// ShardHistory is one shard's history within a sharded dataset's.
type ShardHistory struct {
	Shard int `json:"shard"`
	*History
}

// WholeHistory is a sharded dataset's history: every shard's, in shard
// order (docs/FORMAT.md, Sharded datasets). Field names are stable
// (docs/CLI.md).
type WholeHistory struct {
	Dataset string         `json:"dataset"`
	Count   int            `json:"count"`
	Shards  []ShardHistory `json:"shards"`
}

// LoadWholeHistory reads the history of every shard of the sharded
// dataset m, whose shard directories are dirs (shard.Whole).
func LoadWholeHistory(m *shard.Map, dirs []string) (*WholeHistory, error) {
	shards, err := shard.EachShard(m, dirs, func(sp shard.Spec, dir string) (ShardHistory, error) {
		h, err := LoadHistory(dir)
		return ShardHistory{Shard: sp.Index, History: h}, err
	})
	if err != nil {
		return nil, err
	}
	return &WholeHistory{Dataset: m.Dataset, Count: m.Count, Shards: shards}, nil
}

// WriteText prints every shard's history under a heading naming the shard.
func (w *WholeHistory) WriteText(out io.Writer) error {
	for _, s := range w.Shards {
		fmt.Fprintf(out, "shard %d/%d (%s):\n", s.Shard, w.Count, s.Dataset)
		if err := s.History.WriteText(out); err != nil {
			return err
		}
	}
	return nil
}
