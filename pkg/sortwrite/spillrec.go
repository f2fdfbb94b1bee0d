package sortwrite

import (
	"encoding/binary"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// A spill record is one row, fixed size, little-endian:
//
//	input row  uint32   global input row (tie-break, error locations)
//	series     uint32   series dictionary code
//	period     int32    date32 days
//	value      as below
//	then per other column (t.others order) the run does not leave out:
//	  string   uint32   dictionary code (nullCode for null)
//	  fixed    1 byte valid (0/1), then the value's width bytes
//	  bool     1 byte valid, 1 byte value
//	  null     nothing
//
// A run leaves out every column still taken for an attribute when it is
// written (constant within each series over every row read so far): such
// a column's value in each of the run's rows is its series' first value
// (external.firsts), kept once per series in memory. Its per-row codes
// were a gather at random rows of the run, a fifth of the external
// build's CPU for lakegen's four string attributes, spilled and read
// back for nothing when the column stays an attribute (the index takes
// it from firsts). A column found to vary later keeps its firsts (frozen)
// for the runs written before; the merge fills the column back into
// those runs' records from them (recLayout.moves), so every record it
// handles has the merge's layout: the columns that are not attributes
// in the end.
const spillHeader = 12

// recLayout is where each column sits in the records of a run or of the
// merge.
type recLayout struct {
	size int
	// offs is, per t.others, the column's offset in the record, -1 when
	// the record leaves it out.
	offs []int
}

// layoutOf is the record layout leaving out the other columns i with
// omit[i] (omit may be nil: none).
func layoutOf(t *table, omit []bool) recLayout {
	l := recLayout{size: spillHeader + t.value.recordWidth(), offs: make([]int, len(t.others))}
	for i, st := range t.others {
		if i < len(omit) && omit[i] {
			l.offs[i] = -1
			continue
		}
		l.offs[i] = l.size
		l.size += st.recordWidth()
	}
	return l
}

// recordSize is the size of a record with every column.
func recordSize(t *table) int { return layoutOf(t, nil).size }

// omitted lists the other columns omit leaves out (nil if none).
func omitted(omit []bool) []int {
	var out []int
	for i, o := range omit {
		if o {
			out = append(out, i)
		}
	}
	return out
}

// fieldMove is one column of a merge record taken from a run record:
// from its offset in the run's record, or, when the run left it out, from
// fill (its series' value, by the run's series code).
type fieldMove struct {
	from, to, width int
	fill            *store
}

// moves is how to turn records of layout run into records of layout
// merge, every column merge holds being in run or filled from fills[i]
// (nil when run holds every column of merge, in place: no conversion).
func moves(t *table, run, merge recLayout, fills []*store) []fieldMove {
	same := run.size == merge.size
	var mv []fieldMove
	for i, st := range t.others {
		to := merge.offs[i]
		if to < 0 {
			continue
		}
		w := st.recordWidth()
		if run.offs[i] != to {
			same = false
		}
		if run.offs[i] < 0 {
			mv = append(mv, fieldMove{from: -1, to: to, width: w, fill: fills[i]})
		} else {
			mv = append(mv, fieldMove{from: run.offs[i], to: to, width: w})
		}
	}
	if same {
		return nil
	}
	return mv
}

// expand writes the run record raw into rec (the merge's layout): the
// header and value as they are, the other columns by mv.
func expand(rec, raw []byte, head int, mv []fieldMove) error {
	copy(rec[:head], raw[:head])
	le := binary.LittleEndian
	code := int(le.Uint32(raw[4:]))
	for _, m := range mv {
		if m.fill == nil {
			copy(rec[m.to:m.to+m.width], raw[m.from:m.from+m.width])
			continue
		}
		f := m.fill
		switch f.kind {
		case kindString:
			if code >= len(f.codes) {
				return corrupt.Errorf("series code %d has no first value of a column the run leaves out", code)
			}
			le.PutUint32(rec[m.to:], f.codes[code])
		case kindFixed, kindBool:
			w := f.width
			if code >= len(f.valid) || (code+1)*w > len(f.data) {
				return corrupt.Errorf("series code %d has no first value of a column the run leaves out", code)
			}
			rec[m.to] = f.valid[code]
			copy(rec[m.to+1:m.to+1+w], f.data[code*w:(code+1)*w])
		}
	}
	return nil
}
