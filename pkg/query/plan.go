package query

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// storedSeries is the selection size up to which a plan keeps the pieces
// it located while counting rows; larger selections locate them again while
// streaming, so a whole-dataset answer holds memory for one batch, not for
// every series.
const storedSeries = 4096

// Plan is a request resolved against one Reader: which series, which rows,
// which columns, and the exact row count. Building it costs a lookup per
// listed series (or a binary search for a prefix, a scan of one index
// column for a category) and a binary search per series when a period
// range cuts it; no row is copied.
type Plan struct {
	r      Reader
	req    Request
	sel    Selection
	cols   []Column
	schema *arrow.Schema
	rows   int64 // exact, after Limit

	// fromIndex: a latest query without a period range whose only data
	// column is the value: its rows are the index's latest period and
	// value, and the data is not touched.
	fromIndex bool
	// latestK and latestP are, for a fromIndex plan over a small selection,
	// the positions of the series that have a latest row and its period,
	// kept by count: over a delta each Latest merges the series' newest
	// rows of every run, worth doing once per request, not twice.
	latestK, latestP []int32
	latestKept       bool

	pieces  []piece  // located pieces, when the selection is small
	stored  bool     // count keeps the pieces it locates
	located bool     // pieces holds every piece
	one     [1]piece // pieces' storage for a single series
	buf     []Piece  // scratch for Reader.Rows
	bufOne  [1]Piece // buf's storage while a series has one piece
	em      emitter  // Stream's, kept here so a stream allocates no emitter
}

// piece is rows of one series: k is the series' position in the
// selection (its dictionary code in the answer).
type piece struct {
	k int32
	Piece
}

// NewPlan resolves req against r. Limits apply here, so describing a query
// and running it refuse the same requests.
func NewPlan(r Reader, req *Request, lim Limits) (*Plan, error) {
	info := r.Info()
	if req.Snapshot != 0 && req.Snapshot != info.SnapshotID {
		return nil, Errorf(ErrStale, "dataset %q is serving snapshot %d, the request asks for snapshot %d", info.Dataset, info.SnapshotID, req.Snapshot)
	}
	if req.Range.From > req.Range.To {
		return nil, Errorf(ErrInvalid, "period range starts after it ends")
	}
	p := &Plan{r: r, req: *req}
	p.buf = p.bufOne[:0]
	var err error
	if p.cols, p.schema, err = r.Shape().columns(req); err != nil {
		return nil, err
	}
	listed := req.Select.Kind == ByIDs
	if listed && lim.MaxSeries > 0 && len(req.Select.IDs) > lim.MaxSeries {
		return nil, Errorf(ErrLimit, "%d series requested from dataset %q, limit %d per request; use a prefix or category for more", len(req.Select.IDs), info.Dataset, lim.MaxSeries)
	}
	if p.sel, err = r.Select(req.Select); err != nil {
		return nil, err
	}
	p.fromIndex = req.Latest && req.Range.IsAll() && p.onlyValue()
	if err := p.count(); err != nil {
		return nil, err
	}
	if listed && lim.MaxRows > 0 && p.rows > lim.MaxRows {
		return nil, Errorf(ErrLimit, "query matches %d rows in dataset %q, limit %d per answer to a list of series; narrow the period range, page with a limit, or select by prefix", p.rows, info.Dataset, lim.MaxRows)
	}
	if req.Limit > 0 && p.rows > req.Limit {
		p.rows = req.Limit
	}
	return p, nil
}

// Schema is the answer's schema.
func (p *Plan) Schema() *arrow.Schema { return p.schema }

// Rows is the exact number of rows the answer holds.
func (p *Plan) Rows() int64 { return p.rows }

// Series is the number of selected series (some may have no rows in the
// range).
func (p *Plan) Series() int { return p.sel.Len() }

// Reader is the view the plan runs over.
func (p *Plan) Reader() Reader { return p.r }

// onlyValue reports whether the value is the only data column of the
// answer (attributes aside): what the index's latest columns can answer.
func (p *Plan) onlyValue() bool {
	vp := p.r.Shape().valuePos
	for _, c := range p.cols {
		if !c.Attr && c.Pos != vp {
			return false
		}
	}
	return true
}

// count computes the row count, keeping the located pieces of a small
// selection.
func (p *Plan) count() error {
	n := p.sel.Len()
	if p.fromIndex {
		p.latestKept = n <= storedSeries
		if p.latestKept {
			p.latestK, p.latestP = make([]int32, 0, n), make([]int32, 0, n)
		}
		for k := 0; k < n; k++ {
			lp, ok := p.r.Latest(p.sel.Code(k))
			if !ok {
				continue
			}
			p.rows++
			if p.latestKept {
				p.latestK, p.latestP = append(p.latestK, int32(k)), append(p.latestP, lp)
			}
		}
		return nil
	}
	p.stored = n <= storedSeries
	if p.stored {
		if n == 1 {
			p.pieces = p.one[:0]
		} else {
			p.pieces = make([]piece, 0, n)
		}
	}
	err := p.each(func(pc piece) error {
		p.rows += pc.Len()
		if p.stored {
			p.pieces = append(p.pieces, pc)
		}
		return nil
	})
	p.located = p.stored
	return err
}

// each calls fn with every piece in output order, locating them unless
// they are stored.
func (p *Plan) each(fn func(piece) error) error {
	if p.located {
		for _, pc := range p.pieces {
			if err := fn(pc); err != nil {
				return err
			}
		}
		return nil
	}
	rg := p.req.Range
	for k := 0; k < p.sel.Len(); k++ {
		code := p.sel.Code(k)
		if p.req.Latest {
			pc, ok, err := p.r.LatestRow(code, rg)
			if err != nil {
				return err
			}
			if ok {
				if err := fn(piece{k: int32(k), Piece: pc}); err != nil {
					return err
				}
			}
			continue
		}
		var err error
		if p.buf, err = p.r.Rows(code, rg, p.buf[:0]); err != nil {
			return err
		}
		for _, pc := range p.buf {
			if err := fn(piece{k: int32(k), Piece: pc}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Stats is what streaming an answer sent.
type Stats struct {
	Rows    int64
	Batches int
}

// Stream sends the answer as record batches of about budget bytes each
// through write (see emit.go for the batching rules), polling ctx between
// batches. Every buffer it allocates comes from mem and is released before
// it returns; a batch passed to write is valid only during the call.
func (p *Plan) Stream(ctx context.Context, mem memory.Allocator, budget int64, write func(arrow.RecordBatch) error) (Stats, error) {
	e := &p.em
	err := e.init(ctx, p, mem, budget, write)
	if err != nil {
		return Stats{}, err
	}
	defer e.release()
	err = e.run()
	return Stats{Rows: e.rows, Batches: e.batches}, err
}
