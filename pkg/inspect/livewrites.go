package inspect

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// LiveWrites is what snapinspect shows of a dataset's write-ahead log: the
// live writes a server merges over the snapshot until a compaction folds
// them in. It is read without the log's lock, so a running server is not
// disturbed (a write being appended may be missing or seen as a torn tail).
type LiveWrites struct {
	Segments []LiveSegment `json:"segments"`
	First    string        `json:"first_position"` // segment:offset
	End      string        `json:"end_position"`
	Folded   string        `json:"folded_position"` // the log's checkpoint: writes after it shadow the snapshot
	Records  int           `json:"records"`         // retained writes
	Pending  int           `json:"pending_records"` // writes after the folded position: replayed over this snapshot
	Rows     int64         `json:"pending_rows"`
}

// LiveSegment is one WAL segment.
type LiveSegment struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	Records int    `json:"records"`
	Problem string `json:"problem"` // "" when it reads to its end
}

// liveWrites reads the dataset's WAL, or returns nil when there is none;
// folded is its checkpoint, where a server's replay starts.
func liveWrites(dir string, folded uint64) (*LiveWrites, error) {
	wdir := filepath.Join(dir, dataset.WALDir)
	if _, err := os.Stat(wdir); err != nil {
		return nil, nil
	}
	lw := &LiveWrites{Segments: []LiveSegment{}, Folded: wal.PositionFromUint64(folded).String()}
	info, err := wal.Scan(wdir, wal.PositionFromUint64(folded), func(_ wal.Position, payload []byte) error {
		r, err := ipc.NewReader(bytes.NewReader(payload))
		if err != nil {
			return nil // counted as a record; its rows are unknown
		}
		defer r.Release()
		for r.Next() {
			lw.Rows += r.RecordBatch().NumRows()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	for _, s := range info.Segments {
		lw.Segments = append(lw.Segments, LiveSegment{Name: fmt.Sprintf("%08d.wal", s.Number), Bytes: s.Size, Records: s.Records, Problem: s.Problem})
	}
	lw.First, lw.End, lw.Records, lw.Pending = info.First.String(), info.End.String(), info.Records, info.After
	return lw, nil
}

func (lw *LiveWrites) writeText(w io.Writer) error {
	fmt.Fprintf(w, "\nlive writes (wal/, merged over this snapshot by a server until compacted)\n")
	kv := newTable()
	kv.add("pending", fmt.Sprintf("%s writes, %s rows after the folded position %s", Commas(int64(lw.Pending)), Commas(lw.Rows), lw.Folded))
	kv.add("retained", fmt.Sprintf("%s writes, %s .. %s", Commas(int64(lw.Records)), lw.First, lw.End))
	if err := kv.write(w, "  "); err != nil {
		return err
	}
	t := newTable()
	t.header = []string{"segment", "size", "records", "problem"}
	t.right = []bool{false, true, true, false}
	for _, s := range lw.Segments {
		t.add(s.Name, HumanBytes(s.Bytes), Commas(int64(s.Records)), s.Problem)
	}
	return t.write(w, "  ")
}
