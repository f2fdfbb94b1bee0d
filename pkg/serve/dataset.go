package serve

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/sidecar"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// dataset is the per-dataset state: a pointer to the live view, swapped
// atomically. Every request does
//
//	v := d.acquire()   // load the pointer, take a reference on its snapshot
//	defer v.Release()
//
// and never touches a snapshot it holds no reference on. A reload (next
// issue) is: open the new snapshot, validate it, d.swap(new); swap publishes
// the new view and drops the dataset's reference on the old one, whose files
// are unmapped when its last in-flight reader releases it.
type dataset struct {
	name string
	dir  string

	cur    atomic.Pointer[view]
	swapMu sync.Mutex // serialises swaps (acquire never takes it)

	// onSwap, if set, is told about each published view (metrics).
	onSwap func(*view)
}

// acquire returns the live view with a reference taken on its snapshot; the
// caller must Release it. It returns nil only if the dataset was closed.
// Acquire fails only when the snapshot's last reference is already gone,
// which happens only after a swap replaced the pointer, so the retry sees
// the newer view.
func (d *dataset) acquire() *view {
	for {
		v := d.cur.Load()
		if v == nil {
			return nil
		}
		if v.Acquire() {
			return v
		}
	}
}

// swap makes s the dataset's live snapshot. It takes over the caller's
// (opener's) reference on s when it succeeds; the previous snapshot loses
// the dataset's reference and is unmapped once its in-flight readers are
// done. If s cannot be served (its schema has a column the server cannot
// stream), swap returns an error, keeps serving the old snapshot and leaves
// s to the caller.
func (d *dataset) swap(s *snapshot.Snapshot) error {
	v, err := newView(d.name, s)
	if err != nil {
		return err
	}
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	old := d.cur.Swap(v)
	if d.onSwap != nil {
		d.onSwap(v)
	}
	if old != nil {
		old.Release()
	}
	return nil
}

// close drops the dataset's reference on its live snapshot; readers still
// holding one finish first.
func (d *dataset) close() {
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	if old := d.cur.Swap(nil); old != nil {
		old.Release()
	}
}

// view is one snapshot as the server serves it: the snapshot plus what is
// derived from its schema once (column lookup, output fields). Nothing in it
// is per series or per row.
type view struct {
	*snapshot.Snapshot
	dataset string
	opened  time.Time

	ids      *array.String // index series_id column
	valueCol arrow.Field
	data     []column // data columns a client may select (period excluded), in file order
	attrs    []column // attribute columns, in index order
	byName   map[string]column
	category int // position in attrs of the "category" attribute, -1 if none

	schemaDefault *arrow.Schema // stream schema of the default columns
	schemaAttrs   *arrow.Schema // ... plus every attribute

	periods [][]arrow.Date32 // per data batch, the period column
	values  []arrow.Array    // per data batch, the value column
}

// column is a selectable output column.
type column struct {
	name  string
	attr  bool
	pos   int            // data schema position, or attrs position
	field arrow.Field    // as streamed
	src   arrow.Array    // attributes only: the index column
	width int            // fixed bytes per row; 0 for variable width
	vari  bool           // variable width (offsets + data)
	typ   arrow.DataType // data type in the file
}

func newView(name string, s *snapshot.Snapshot) (*view, error) {
	v := &view{Snapshot: s, dataset: name, opened: time.Now(), byName: map[string]column{}, category: -1}
	x := s.Index()
	v.ids = x.Record().Column(0).(*array.String)
	sc := s.Schema()
	if sc.NumFields() < 3 {
		return nil, fmt.Errorf("dataset %s: data file has %d columns", name, sc.NumFields())
	}
	for i := 2; i < sc.NumFields(); i++ { // value and the varying columns
		f := sc.Field(i)
		w, vari, err := widthOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: data column %q: %w", name, f.Name, err)
		}
		c := column{name: f.Name, pos: i, field: arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}, width: w, vari: vari, typ: f.Type}
		v.data = append(v.data, c)
		v.byName[f.Name] = c
	}
	v.valueCol = sc.Field(2)
	fields, cols := x.Attributes()
	for i, f := range fields {
		vt := f.Type
		if d, ok := vt.(*arrow.DictionaryType); ok {
			vt = d.ValueType
		}
		if _, clash := v.byName[f.Name]; clash || f.Name == datafile.ColPeriod || f.Name == sidecar.ColSeriesID {
			return nil, fmt.Errorf("dataset %s: attribute %q has the name of a data column", name, f.Name)
		}
		c := column{name: f.Name, attr: true, pos: i, src: cols[i], width: 4, typ: vt,
			field: arrow.Field{Name: f.Name, Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: vt}, Nullable: true}}
		v.attrs = append(v.attrs, c)
		v.byName[f.Name] = c
		if f.Name == "category" {
			v.category = i
		}
	}
	v.schemaDefault = v.schemaFor(v.data)
	v.schemaAttrs = v.schemaFor(append(append([]column(nil), v.data...), v.attrs...))
	for i := 0; i < s.NumBatches(); i++ {
		b := s.Batch(i)
		p, ok := b.Column(1).(*array.Date32)
		if !ok {
			return nil, fmt.Errorf("dataset %s: batch %d: period column is %s", name, i, b.Column(1).DataType())
		}
		v.periods = append(v.periods, p.Date32Values())
		v.values = append(v.values, b.Column(2))
	}
	return v, nil
}

// widthOf is the fixed byte width of a type, or vari for the offset-based
// ones. Other types (nested) are refused: the server would not know how to
// size its messages.
func widthOf(t arrow.DataType) (w int, vari bool, err error) {
	switch t.ID() {
	case arrow.STRING, arrow.BINARY:
		return 4, true, nil
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return 8, true, nil
	case arrow.BOOL:
		return 1, false, nil // rounded up from a bit
	}
	if fw, ok := t.(arrow.FixedWidthDataType); ok {
		return (fw.BitWidth() + 7) / 8, false, nil
	}
	return 0, false, fmt.Errorf("type %s is not supported by the server", t)
}
