package live

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// RecordInfo describes one record of a dataset's log as an operator needs
// it: where it is, whether a snapshot already holds it, and what it holds.
type RecordInfo struct {
	Position    string   `json:"position"` // segment:offset, after the record (what its write was acknowledged with)
	Segment     uint32   `json:"segment"`
	Offset      uint32   `json:"offset"`
	Folded      bool     `json:"folded"` // at or before the checkpoint: a vintage holds it, or it was retired
	Rows        int64    `json:"rows"`
	Series      []string `json:"series"` // distinct ids, sorted
	FirstPeriod string   `json:"first_period,omitempty"`
	LastPeriod  string   `json:"last_period,omitempty"`
	Problem     string   `json:"problem,omitempty"` // why a replay refuses it ("" when it would not)
}

// SegmentReport is one segment of a dataset's log.
type SegmentReport struct {
	Name    string `json:"name"`
	Bytes   int64  `json:"bytes"`
	Records int    `json:"records"` // intact records
	Rows    int64  `json:"rows"`
	First   string `json:"first_position,omitempty"` // after its first intact record
	End     string `json:"end_position"`             // after its last intact record
	Folded  bool   `json:"folded"`                   // every record in it is at or before the checkpoint
	Problem string `json:"problem,omitempty"`        // framing damage, a missing predecessor, or a record a replay refuses
}

// LogReport is what CheckLog found.
type LogReport struct {
	Checkpoint string          `json:"checkpoint"` // the folded position a replay starts after
	Segments   []SegmentReport `json:"segments"`
	Records    int             `json:"records"`
	Pending    int             `json:"pending_records"` // after the checkpoint: replayed at start-up
	Rows       int64           `json:"pending_rows"`
	// Problems are what would stop a replay, each naming a segment (and
	// an offset where known): framing damage or a missing segment after
	// the checkpoint, and records after it that do not decode or hold
	// what no DoPut accepts. Damage before the checkpoint is shown in its
	// segment but is not a problem: a replay never reads it.
	Problems []string `json:"problems"`
}

// OK reports whether a server's replay of the log would succeed.
func (r LogReport) OK() bool { return len(r.Problems) == 0 }

// CheckLog reads the log in dir without its lock and changing nothing, as
// a replay after folded would, and describes every segment and record:
// each record is decoded and checked (decodeRecord, the replay's own
// checks against the dataset's write schema s) and handed to each (which
// may be nil) in log order.
func CheckLog(dir string, s *livedelta.Schema, folded wal.Position, each func(RecordInfo) error) (LogReport, error) {
	rep := LogReport{Checkpoint: folded.String(), Segments: []SegmentReport{}, Problems: []string{}}
	rows := map[uint32]int64{}
	first := map[uint32]string{}
	info, err := wal.Scan(dir, wal.Position{}, func(pos wal.Position, payload []byte) error {
		ri := describe(pos, payload, s)
		ri.Folded = pos.Compare(folded) <= 0
		rows[pos.Segment] += ri.Rows
		if _, ok := first[pos.Segment]; !ok {
			first[pos.Segment] = pos.String()
		}
		if !ri.Folded {
			rep.Pending++
			rep.Rows += ri.Rows
			if ri.Problem != "" {
				rep.Problems = append(rep.Problems, fmt.Sprintf("record at %s: %s (snapbuild wal salvage --quarantine %s sets it aside)", pos, ri.Problem, pos))
			}
		}
		if each != nil {
			return each(ri)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.Records = info.Records
	for _, si := range info.Segments {
		sr := SegmentReport{Name: fmt.Sprintf("%08d.wal", si.Number), Bytes: si.Size, Records: si.Records, Rows: rows[si.Number],
			First: first[si.Number], End: si.End.String(), Problem: si.Problem,
			Folded: si.Number < folded.Segment || si.Number == folded.Segment && si.End.Compare(folded) <= 0}
		if si.Problem != "" && !sr.Folded {
			rep.Problems = append(rep.Problems, fmt.Sprintf("segment %s: %s", sr.Name, si.Problem))
		}
		rep.Segments = append(rep.Segments, sr)
	}
	return rep, nil
}

// describe decodes one record as a replay would and says what it holds;
// a record a replay refuses gets its Problem, and what could still be
// read of it.
func describe(pos wal.Position, payload []byte, s *livedelta.Schema) RecordInfo {
	ri := RecordInfo{Position: pos.String(), Segment: pos.Segment, Offset: pos.Offset, Series: []string{}}
	rec, err := decodeRecord(payload, s)
	if err != nil {
		ri.Problem = err.Error()
		if u, uerr := decodeStructure(payload, s.Write); uerr == nil {
			summarize(&ri, u)
			u.Release()
		}
		return ri
	}
	summarize(&ri, rec)
	rec.Release()
	return ri
}

// Unvouched describes a payload whose checksum failed (a salvaged
// record's, wal.Lost): what it would hold if its bytes were right, or
// false when it does not even decode. Nothing in it is vouched for.
func Unvouched(payload []byte, s *livedelta.Schema) (RecordInfo, bool) {
	rec, err := decodeStructure(payload, s.Write)
	if err != nil {
		return RecordInfo{}, false
	}
	defer rec.Release()
	ri := RecordInfo{Series: []string{}}
	summarize(&ri, rec)
	return ri, true
}

// summarize fills rows, distinct series and the period bounds of a
// record whose buffers are sound.
func summarize(ri *RecordInfo, rec arrow.RecordBatch) {
	ri.Rows = rec.NumRows()
	ids, _ := rec.Column(livedelta.WriteColumnSeriesID).(*array.String)
	days, _ := rec.Column(livedelta.WriteColumnPeriod).(*array.Date32)
	seen := map[string]bool{}
	var lo, hi int32
	for i := 0; i < int(rec.NumRows()); i++ {
		if ids != nil && ids.IsValid(i) && !seen[ids.Value(i)] {
			seen[ids.Value(i)] = true
			ri.Series = append(ri.Series, ids.Value(i))
		}
		if days != nil && days.IsValid(i) {
			d := int32(days.Value(i))
			if ri.FirstPeriod == "" || d < lo {
				lo = d
			}
			if ri.FirstPeriod == "" || d > hi {
				hi = d
			}
			ri.FirstPeriod, ri.LastPeriod = period.Format(lo), period.Format(hi)
		}
	}
	slices.Sort(ri.Series)
}
