package sortwrite

import (
	"fmt"
	"strings"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// liveBoundary sets the position of the dataset's live writes the new
// snapshot m records (its wal_position): the checkpoint, or superseded (the
// log's end when the build started) when that is further. Under the write
// lock it also refuses a snapshot whose columns a live delta cannot be
// carried over to: with writes after that position, or a server holding
// the log, a column the delta has that m drops or retypes would leave the
// dataset unable to replay its log (docs/OPERATIONS.md "Live writes and a
// lake build"). Columns m adds are fine: the delta's rows have them null.
func liveBoundary(w *dataset.Writer, ds *dataset.Dir, m *manifest.Manifest, superseded uint64) error {
	cp, err := w.Checkpoint()
	if err != nil {
		return err
	}
	m.WALPosition = max(cp.Folded, superseded)
	cur, err := ds.Current()
	if err != nil {
		return nil // nothing published, or CURRENT damaged: no delta can lie over it
	}
	conflicts := columnConflicts(cur.Schema, m.Schema)
	if len(conflicts) == 0 {
		return nil
	}
	why, err := liveAfter(ds, m.WALPosition)
	if err != nil || why == "" {
		return err
	}
	return fmt.Errorf("dataset %s: %s; this build %s, which the live writes over CURRENT (snapshot %d) carry: "+
		"fold them in first (DoAction compact, or snapbuild compact with the server stopped), retire them "+
		"(DoAction discard, or build --supersede-writes with no server writing), or keep the column's name and type",
		ds.Name, why, strings.Join(conflicts, " and "), cur.SnapshotID)
}

// liveAfter says why the dataset may hold live writes after position pos
// ("" if it cannot): a server holding its log (it may take one any
// moment), or records after pos in it.
func liveAfter(ds *dataset.Dir, pos uint64) (string, error) {
	if ds.WALHeld() {
		return "a server holds its write-ahead log", nil
	}
	end, err := ds.LiveEnd()
	if err != nil {
		return "", err
	}
	if end > pos {
		return "its write-ahead log holds writes this build does not retire", nil
	}
	return "", nil
}

// columnConflicts lists what the columns of a live write to a snapshot of
// schema from cannot keep in one of schema to: columns dropped, and
// columns whose type changed. Added columns are none of these.
func columnConflicts(from, to manifest.Schema) []string {
	old, next := liveColumns(from), liveColumns(to)
	var out []string
	for _, c := range liveColumnOrder(from) {
		t, ok := next[c]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("drops column %q", c))
		case t != old[c]:
			out = append(out, fmt.Sprintf("changes column %q from %s to %s", c, old[c], t))
		}
	}
	return out
}

// liveColumns maps the columns a live write of a snapshot of schema s
// carries (the data columns from period on, and the attributes) to their
// value types; an attribute's dictionary type counts as its value type.
func liveColumns(s manifest.Schema) map[string]string {
	out := map[string]string{}
	for i, c := range s.Data {
		if i >= datafile.ColumnPeriod {
			out[c.Name] = c.Type
		}
	}
	for _, a := range s.Attributes {
		for _, c := range s.Index {
			if c.Name == a {
				out[a] = valueType(c.Type)
			}
		}
	}
	return out
}

func liveColumnOrder(s manifest.Schema) []string {
	var out []string
	for i, c := range s.Data {
		if i >= datafile.ColumnPeriod {
			out = append(out, c.Name)
		}
	}
	return append(out, s.Attributes...)
}

// valueType is the value type of an Arrow type name: a dictionary's
// ("dictionary<values=utf8, indices=int32, ordered=false>") values, any
// other type itself.
func valueType(t string) string {
	rest, ok := strings.CutPrefix(t, "dictionary<values=")
	if !ok {
		return t
	}
	if i := strings.Index(rest, ", indices="); i >= 0 {
		return rest[:i]
	}
	return t
}
