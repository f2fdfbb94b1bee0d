package served

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/delta"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// ErrReadOnly: the dataset takes no live writes (the server runs
// read-only).
var ErrReadOnly = errors.New("the server is read-only (--read-only)")

// liveTarget is the dataset as its write path sees it (live.Target).
type liveTarget struct{ d *Dataset }

func (t liveTarget) Base() delta.Base { return t.d.cur.Load().base }

// Publish swaps in a view of the same snapshot with st merged on read.
// Called with the writer's lock held, in log order.
func (t liveTarget) Publish(st *delta.State) {
	d := t.d
	cur := d.cur.Load()
	if cur == nil {
		return
	}
	nv, ok := cur.withState(st)
	if !ok {
		return
	}
	if _, err := d.install(nv); err != nil {
		nv.Release()
	}
}

// schemaOf is the delta schema a snapshot's rows imply.
func schemaOf(v *View) (*delta.Schema, error) {
	fields, _ := v.snap.Index().Attributes()
	return delta.NewSchema(v.snap.Schema(), fields)
}

// Writer returns the dataset's write path, opening (and replaying) its
// WAL first if need be: the first write of a dataset that never took one
// creates its log.
func (d *Dataset) Writer() (*live.Writer, error) {
	if d.opt.ReadOnly {
		return nil, fmt.Errorf("dataset %q: %w", d.name, ErrReadOnly)
	}
	return d.writer(true)
}

// writer returns the dataset's write path, opening (and replaying) its
// WAL first if need be. create says whether a dataset without a WAL gets
// one (a write) or not (start-up).
func (d *Dataset) writer(create bool) (*live.Writer, error) {
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	if d.live != nil {
		return d.live, nil
	}
	dir := filepath.Join(d.dir, dsdir.WALDir)
	if _, err := os.Stat(dir); err != nil && !create {
		return nil, nil
	}
	// Reloads wait (swapMu) while the log replays onto the served snapshot.
	d.swapMu.Lock()
	defer d.swapMu.Unlock()
	v := d.acquire()
	if v == nil {
		return nil, fmt.Errorf("dataset %s: %w", d.name, ErrClosed)
	}
	defer v.Release()
	s, err := schemaOf(v)
	if err != nil {
		return nil, err
	}
	folded := d.foldedPosition(v.Manifest())
	w, info, err := live.Open(dir, s, folded, liveTarget{d}, live.Options{Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", d.name, err)
	}
	if t := info.Truncated; t != nil {
		d.log.Warn("wal: torn tail cut", "dataset", d.name, "segment", t.Segment, "offset", t.Offset, "bytes", t.Bytes, "cause", fmt.Sprint(t.Cause))
	}
	if info.Records > 0 {
		d.log.Info("wal replayed", "dataset", d.name, "records", info.Records, "rows", info.Rows,
			"ms", float64(info.Duration.Microseconds())/1000, "folded", folded)
	}
	d.live = w
	return w, nil
}

// LiveWriter is the dataset's write path if it has one open (nil: it took
// no write since start-up and had no log to replay).
func (d *Dataset) LiveWriter() *live.Writer { return d.liveWriter() }

// liveWriter is the dataset's write path if it has one (nil: none).
func (d *Dataset) liveWriter() *live.Writer {
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	return d.live
}

// foldedPosition is dataset.Dir.FoldedPosition, logging a lineage that
// cannot be read (every record in the log is then replayed).
func (d *Dataset) foldedPosition(m *manifest.Manifest) uint64 {
	pos, err := d.ds.FoldedPosition(m)
	if err != nil {
		d.log.Warn("wal: replaying every record in the log", "dataset", d.name, "error", err.Error())
	}
	return pos
}

// installBase serves a newly opened snapshot. With live writes, the
// delta moves over to it (its rows keep shadowing the new base until a
// compaction folds them), under the writer's lock so no write is lost in
// between. Requires swapMu held.
func (d *Dataset) installBase(v *View) error {
	w := d.liveWriter()
	if w == nil {
		_, err := d.install(v)
		return err
	}
	// The delta is counted over the new base off the writer's lock
	// (PrepareRebase), and caught up under it with the last writes.
	pre, done, release := w.PrepareRebase(func(st *delta.State) *delta.State { return st.Rebase(v.base) })
	defer release()
	return w.Do(func(st *delta.State) (*delta.State, error) {
		if len(st.Runs()) > 0 {
			s, err := schemaOf(v)
			if err != nil {
				return nil, err
			}
			if !s.Write.Equal(st.Schema().Write) {
				return nil, fmt.Errorf("snapshot %d has other columns than the live delta (%d rows); compact before changing the schema", v.ID(), st.Rows())
			}
		}
		// writes go on over the new base: its code cache warms now,
		// before the next batch asks for it
		d.codes(v)
		st2, ok := st.CatchUp(pre, done)
		if !ok {
			st2 = st.Rebase(v.base)
		}
		v.setState(st2)
		if _, err := d.install(v); err != nil {
			return nil, err
		}
		return st2, nil
	})
}

// Put checks one batch of a client's write (batch is its number in the
// stream, for messages) against the served view, normalizes it and logs it
// through w, returning once it is durable and visible. The caller has
// validated the batch's Arrow data (it came off the wire) and counted it
// in flight (w.Incoming). Every allocation comes from mem.
func (d *Dataset) Put(ctx context.Context, w *live.Writer, mem memory.Allocator, rec arrow.RecordBatch, batch int) (live.Ack, error) {
	v := d.acquire()
	if v == nil {
		return live.Ack{}, fmt.Errorf("dataset %q: %w", d.name, ErrClosed)
	}
	k := newPutKnown(d, v)
	schema := w.State().Schema()
	norm, seriesCodes, err := delta.NormalizeCodes(ctx, mem, schema, rec, batch, k, k)
	if err != nil {
		v.Release()
		return live.Ack{}, err
	}
	checked := time.Now()
	// The write is sorted into a run on the caller's goroutine while the
	// committer logs it, which leaves the write path (one write at a time,
	// between the fsync and the ack) only the key index's bookkeeping.
	// Prepare reads the base's periods (which rows a write adds), so the
	// view stays held until it is done: a reload meanwhile must not unmap
	// the files under it.
	base := v.base
	release := sync.OnceFunc(v.Release)
	ack, err := w.PutPrepare(ctx, norm, func() (*delta.Prepared, error) {
		defer release()
		return delta.Prepare(ctx, mem, schema, norm, base, seriesCodes)
	})
	release() // PutPrepare may refuse the write before it prepares
	norm.Release()
	ack.Stages.Checked = checked
	if err != nil {
		return ack, fmt.Errorf("dataset %q: batch %d: %w", d.name, batch, err)
	}
	if ack.Rows > 0 { // a batch of no rows adds nothing for --compact-age to age
		d.stMu.Lock()
		if d.cs.since.IsZero() {
			d.cs.since = time.Now()
		}
		d.stMu.Unlock()
	}
	return ack, nil
}

// putKnown answers Normalize's attribute look-ups for one batch. The base
// index's attribute columns are fetched once per batch rather than once
// per series (sidecar.Index.Attributes copies its field list on every
// call, which was most of a DoPut's normalisation CPU); a series the base
// lacks is asked of the view's reader, which knows the delta's new series.
// It answers what query.SnapshotReader.Attr and query.Composite.Attr do:
// the base first. Base look-ups go through the dataset's codeCache.
type putKnown struct {
	codes codeReader
	cols  []arrow.Array
	rest  delta.Known // nil: no series beyond the base
}

func newPutKnown(d *Dataset, v *View) putKnown {
	x := v.snap.Index()
	k := putKnown{codes: d.codes(v).reader()}
	_, k.cols = x.Attributes()
	k.rest, _ = v.r.(delta.Known)
	return k
}

// BaseCode is the series' row in the base index (delta.BaseCoder).
func (k putKnown) BaseCode(id string) (int, bool) { return k.codes.lookup(id) }

// BaseCodes is BaseCode of every id (delta.BatchCoder).
func (k putKnown) BaseCodes(ids *array.String, codes []int32) { k.codes.lookupAll(ids, codes) }

func (k putKnown) Attr(id string, a int) (arrow.Array, int, bool) {
	if c, ok := k.codes.lookup(id); ok {
		if a >= len(k.cols) {
			return nil, 0, true
		}
		return k.cols[a], c, true
	}
	if k.rest == nil {
		return nil, 0, false
	}
	return k.rest.Attr(id, a)
}
