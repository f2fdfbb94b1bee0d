package served

import (
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// View is what a request reads: one snapshot (its reference count pins
// the mappings) and, when the dataset takes live writes, the delta State
// merged over it; the read layer over both is built once per view.
// Nothing in it is per series or per row of the snapshot.
//
// A View is immutable once published. A request gets one from
// Dataset.Acquire and must Release it; every slice it streams points into
// the snapshot's mapping until then.
type View struct {
	snap    *snapshot.Snapshot
	base    *query.SnapshotReader
	r       query.Reader     // base, or base and st merged on read
	st      *livedelta.State // nil or empty: no live writes
	dataset string
	opened  time.Time

	drained  func(*View) // called once, when the snapshot's files are unmapped
	doneOnce sync.Once
}

func newView(name string, s *snapshot.Snapshot) (*View, error) {
	r, err := query.FromSnapshot(name, s)
	if err != nil {
		return nil, err
	}
	return &View{snap: s, base: r, r: r, dataset: name, opened: time.Now()}, nil
}

// withState is a view of the same snapshot with st merged on read. It
// takes a reference of its own on the snapshot; false if the snapshot is
// already gone.
func (v *View) withState(st *livedelta.State) (*View, bool) {
	if !v.snap.Acquire() {
		return nil, false
	}
	nv := &View{snap: v.snap, base: v.base, r: v.base, st: st, dataset: v.dataset, opened: v.opened, drained: v.drained}
	if st != nil && len(st.Runs()) > 0 {
		nv.r = query.NewComposite(v.base, st)
	}
	return nv, true
}

// setState makes a view not yet published read st over its base.
func (v *View) setState(st *livedelta.State) {
	v.st, v.r = st, v.base
	if st != nil && len(st.Runs()) > 0 {
		v.r = query.NewComposite(v.base, st)
	}
}

// Dataset is the name of the dataset the view belongs to.
func (v *View) Dataset() string { return v.dataset }

// ID is the id of the view's snapshot.
func (v *View) ID() uint64 { return v.snap.ID() }

// Manifest is the view's snapshot's manifest.
func (v *View) Manifest() *manifest.Manifest { return v.snap.Manifest }

// Snapshot is the view's base snapshot, pinned while the view is held.
func (v *View) Snapshot() *snapshot.Snapshot { return v.snap }

// Reader is what queries plan over: the base, with the delta merged on
// read when the dataset holds live writes.
func (v *View) Reader() query.Reader { return v.r }

// Base is the read layer over the snapshot alone.
func (v *View) Base() *query.SnapshotReader { return v.base }

// Delta is the live writes merged over the base (nil: none).
func (v *View) Delta() *livedelta.State { return v.st }

// Opened is when the view's snapshot was opened.
func (v *View) Opened() time.Time { return v.opened }

// DefaultSchema is the schema of a query with default columns.
func (v *View) DefaultSchema() *arrow.Schema { return v.r.Shape().DefaultSchema() }

// Readers is the number of references on the snapshot besides the
// dataset's own and the caller's.
func (v *View) Readers() int64 { return v.snap.Refs() - 2 }

// Release drops a reference on the view's snapshot; the last one unmaps
// its files. A snapshot's count never rises again once it reached zero, so
// seeing zero after our own Release means the files are gone (the Once
// absorbs several releasers seeing it).
func (v *View) Release() {
	v.snap.Release()
	if v.snap.Refs() == 0 && v.drained != nil {
		v.doneOnce.Do(func() { v.drained(v) })
	}
}

// acquire takes a reference on the view's snapshot; false if it is gone.
func (v *View) acquire() bool { return v.snap.Acquire() }
