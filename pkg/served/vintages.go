package served

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// DefaultVintages is how many vintages besides the live one a dataset
// keeps open for requests that name one (Options.Vintages).
const DefaultVintages = 4

// ErrNoVintage: the vintage asked for is not retained (never published,
// or removed by gc). It matches fs.ErrNotExist too.
var ErrNoVintage = errors.New("no such vintage")

type noVintageError struct{ msg string }

func (e *noVintageError) Error() string { return e.msg }
func (e *noVintageError) Is(t error) bool {
	return t == ErrNoVintage || t == fs.ErrNotExist
}

// ErrVintagesOff: the server keeps no vintages open (Options.Vintages < 0).
var ErrVintagesOff = errors.New("vintages are not served")

// vintageCache holds the views of vintages requests named, most recently
// used last; each entry holds the cache's reference on its snapshot, so
// its files stay mapped and its gc lease held until it is evicted and its
// last reader is done. Guarded by Dataset.vintMu, which is also held while
// a vintage is opened (a first use waits for another's open).
type vintageCache struct {
	views  []*View
	closed bool // the dataset closed: nothing more is opened
}

func (d *Dataset) vintageCap() int {
	switch n := d.opt.Vintages; {
	case n < 0:
		return 0
	case n == 0:
		return DefaultVintages
	default:
		return n
	}
}

// AcquireVintage returns a view of retained vintage id as it was
// published: no live writes are merged over it (they belong to the
// current lineage), so the live snapshot's id reads its base alone. Any
// other vintage is opened on first use the way a reload opens what
// CURRENT names (openView: every file checksummed) and kept open in a
// cache of Options.Vintages views, least recently used out; while a view
// is cached or read, its snapshot (and so its gc lease) stays held. The
// caller must Release the view.
func (d *Dataset) AcquireVintage(id uint64) (*View, error) {
	live := d.acquire()
	if live == nil {
		return nil, fmt.Errorf("dataset %q: %w", d.name, ErrClosed)
	}
	if live.ID() == id {
		defer live.Release()
		if f := d.faultOf(id); f != nil {
			return nil, f.err(d.name)
		}
		v, ok := live.withState(nil)
		if !ok {
			return nil, fmt.Errorf("dataset %q: %w", d.name, ErrClosed)
		}
		return v, nil
	}
	live.Release()
	capacity := d.vintageCap()
	if capacity == 0 {
		return nil, fmt.Errorf("dataset %q: snapshot %d is not the one served and this server keeps no vintages open (--vintages): %w", d.name, id, ErrVintagesOff)
	}
	d.vintMu.Lock()
	defer d.vintMu.Unlock()
	if d.vint.closed {
		return nil, fmt.Errorf("dataset %q: %w", d.name, ErrClosed)
	}
	for i, v := range d.vint.views {
		if v.ID() != id {
			continue
		}
		if v.acquire() {
			d.vint.views = append(slices.Delete(d.vint.views, i, i+1), v) // most recent last
			return v, nil
		}
		d.vint.views = slices.Delete(d.vint.views, i, i+1)
		break
	}
	if err := d.ds.CheckVintage(id); err != nil {
		return nil, &noVintageError{fmt.Sprintf("dataset %q: %v", d.name, err)}
	}
	v, err := d.openView(id)
	if err != nil {
		return nil, fmt.Errorf("dataset %q: open vintage %d: %w", d.name, id, err)
	}
	v.drained = func(v *View) { d.untrackMapped(v.snap) }
	d.trackMapped(v.snap)
	if !v.acquire() { // the caller's reference; the opener's is the cache's
		return nil, fmt.Errorf("dataset %q: %w", d.name, ErrClosed)
	}
	d.vint.views = append(d.vint.views, v)
	for len(d.vint.views) > capacity {
		d.vint.views[0].Release()
		d.vint.views = d.vint.views[1:]
	}
	return v, nil
}

// openView opens snapshot id of the dataset and builds its view, with
// every file checksummed: how a reload opens what CURRENT names, and how a
// vintage is opened on first use. The caller owns the opener's reference.
func (d *Dataset) openView(id uint64) (*View, error) {
	s, err := snapshot.OpenID(d.dir, id, d.verified())
	if err != nil {
		return nil, err
	}
	if s.Manifest.Dataset != d.name {
		s.Close()
		return nil, fmt.Errorf("manifest %d names dataset %q", id, s.Manifest.Dataset)
	}
	v, err := newView(d.name, s)
	if err != nil {
		s.Close()
		return nil, err
	}
	return v, nil
}

// OpenVintages are the ids of the vintages kept open (not the live one),
// least recently used first.
func (d *Dataset) OpenVintages() []uint64 {
	d.vintMu.Lock()
	defer d.vintMu.Unlock()
	ids := make([]uint64, len(d.vint.views))
	for i, v := range d.vint.views {
		ids[i] = v.ID()
	}
	return ids
}

// servesVintage reports whether v is a cached vintage's view (a stream
// reading one keeps its lease while it stays cached).
func (d *Dataset) servesVintage(v *View) bool {
	d.vintMu.Lock()
	defer d.vintMu.Unlock()
	return slices.ContainsFunc(d.vint.views, func(c *View) bool { return c.snap == v.snap })
}

// closeVintages drops the cache's references; readers still holding a
// view finish first. Nothing is opened after it.
func (d *Dataset) closeVintages() {
	d.vintMu.Lock()
	defer d.vintMu.Unlock()
	d.vint.closed = true
	for _, v := range d.vint.views {
		v.Release()
	}
	d.vint.views = nil
}
