package inspect

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// Output formats of WriteSeries.
const (
	FormatText = "text"
	FormatCSV  = "csv"
	FormatJSON = "json"
)

// Column names a column of a report and its Arrow type.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// LookupAll finds the codes of ids (duplicates dropped, order kept). An
// unknown id is a snapshot.ErrNotFound error naming every unknown id.
func LookupAll(s *snapshot.Snapshot, ids []string) ([]int, error) {
	var codes []int
	var missing []string
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		code, ok := s.Lookup(id)
		if !ok {
			missing = append(missing, strconv.Quote(id))
			continue
		}
		codes = append(codes, code)
	}
	if len(missing) > 0 {
		return nil, notFound("unknown series %s in snapshot %d of %s", strings.Join(missing, ", "), s.ID(), s.Dataset.Name)
	}
	return codes, nil
}

// WriteSeries writes the rows of the series ids whose period lies in r, in
// the order the ids are given, each series sorted by period. The columns
// are series_id, period, value and the data file's other columns. format
// is FormatText (an aligned table), FormatCSV (a header line, then one
// line a row, nulls empty) or FormatJSON (see docs/CLI.md). Unknown ids
// fail before anything is written.
func WriteSeries(w io.Writer, s *snapshot.Snapshot, ids []string, r Range, format string) error {
	codes, err := LookupAll(s, ids)
	if err != nil {
		return err
	}
	fields := s.Schema().Fields()
	cols := []Column{{Name: "series_id", Type: "utf8"}}
	for _, f := range fields[1:] {
		cols = append(cols, Column{Name: f.Name, Type: f.Type.String()})
	}
	// each calls fn with every selected row: the series id and the cells
	// of the data columns after series_code.
	rd, err := query.FromSnapshot(s.Dataset.Name, s)
	if err != nil {
		return err
	}
	safe := newPieceChecker(s)
	each := func(fn func(id string, rec arrow.RecordBatch, row int) error) error {
		var pieces []query.Piece
		for _, code := range codes {
			if pieces, err = rd.Rows(code, query.Range{From: r.From, To: r.To}, pieces[:0]); err != nil {
				return err
			}
			id := rd.SeriesID(code)
			for _, pc := range pieces {
				if err := safe.check(pc.Rec); err != nil {
					return err
				}
				for i := pc.Lo; i < pc.Hi; i++ {
					if err := fn(id, pc.Rec, int(i)); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	ncols := len(fields)
	switch format {
	case FormatText, "":
		t := newTable()
		for _, c := range cols {
			t.header = append(t.header, c.Name)
		}
		t.right = make([]bool, len(cols))
		for i, f := range fields[1:] {
			t.right[i+1] = datafile.IsNumeric(f.Type)
		}
		err := each(func(id string, rec arrow.RecordBatch, row int) error {
			cells := make([]string, 0, ncols)
			cells = append(cells, id)
			for c := 1; c < ncols; c++ {
				cells = append(cells, textOf(CellOf(rec.Column(c), row)))
			}
			t.add(cells...)
			return nil
		})
		if err != nil {
			return err
		}
		return t.write(w, "")
	case FormatCSV:
		cw := csv.NewWriter(w)
		head := make([]string, len(cols))
		for i, c := range cols {
			head[i] = c.Name
		}
		if err := cw.Write(head); err != nil {
			return err
		}
		rowBuf := make([]string, ncols)
		err := each(func(id string, rec arrow.RecordBatch, row int) error {
			rowBuf[0] = id
			for c := 1; c < ncols; c++ {
				rowBuf[c] = CellOf(rec.Column(c), row).Text
			}
			return cw.Write(rowBuf)
		})
		if err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	case FormatJSON:
		bw := bufio.NewWriter(w)
		keys := make([][]byte, len(cols))
		for i, c := range cols {
			keys[i], _ = json.Marshal(c.Name)
		}
		colsJSON, _ := json.Marshal(cols)
		fmt.Fprintf(bw, "{\n  \"dataset\": %s,\n  \"snapshot_id\": %d,\n  \"from\": %s,\n  \"to\": %s,\n  \"columns\": %s,\n  \"rows\": [",
			jsonString(s.Dataset.Name), s.ID(), jsonString(r.FromDate()), jsonString(r.ToDate()), colsJSON)
		first := true
		err := each(func(id string, rec arrow.RecordBatch, row int) error {
			if first {
				bw.WriteString("\n    {")
				first = false
			} else {
				bw.WriteString(",\n    {")
			}
			bw.Write(keys[0])
			bw.WriteByte(':')
			bw.WriteString(jsonString(id))
			for c := 1; c < ncols; c++ {
				bw.WriteByte(',')
				bw.Write(keys[c])
				bw.WriteByte(':')
				b, _ := CellOf(rec.Column(c), row).MarshalJSON()
				bw.Write(b)
			}
			bw.WriteByte('}')
			return nil
		})
		if err != nil {
			return err
		}
		if first {
			bw.WriteString("]\n}\n")
		} else {
			bw.WriteString("\n  ]\n}\n")
		}
		return bw.Flush()
	}
	return fmt.Errorf("unknown format %q (want text, csv or json)", format)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
