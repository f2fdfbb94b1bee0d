package snapwrite

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"
)

// Pipe writes a snapshot writer's batches on a goroutine of its own, one
// batch behind the goroutine that makes them, so that a Sink's encoding,
// checksums and write syscalls overlap the making of the next batch (the
// external builder's merge, a compaction's). A failed write stops it at
// once: the Pipe's context is cancelled, so the maker's next Send, or its
// own check of Context, returns instead of every remaining batch being
// made and thrown away.
//
// The hand-over is unbuffered: at most two batches are alive, the one
// being written and the one being made (a queued third would cost a
// batch of memory, tens of MiB at 1M rows, and save no time: whichever
// side is slower waits either way).
type Pipe struct {
	out chan arrow.RecordBatch
	g   *errgroup.Group
	ctx context.Context
}

// NewPipe starts the writing goroutine: write is called for each batch
// sent, in order, and the batch released after it.
func NewPipe(ctx context.Context, write func(arrow.RecordBatch) error) *Pipe {
	g, gctx := errgroup.WithContext(ctx)
	p := &Pipe{out: make(chan arrow.RecordBatch), g: g, ctx: gctx}
	g.Go(func() error {
		for rec := range p.out {
			err := write(rec)
			rec.Release()
			if err != nil {
				return err // cancels p.ctx; Close releases what is left
			}
		}
		return nil
	})
	return p
}

// Context is done once a write failed or the parent context was: the
// maker checks it between batches.
func (p *Pipe) Context() context.Context { return p.ctx }

// Send hands rec to the writer, which releases it; once the Pipe has
// stopped it releases rec itself and returns the context's error.
func (p *Pipe) Send(rec arrow.RecordBatch) error {
	select {
	case p.out <- rec:
		return nil
	case <-p.ctx.Done():
		rec.Release()
		return p.ctx.Err()
	}
}

// Close ends the Pipe: it waits for the batches sent to be written,
// releases any a failed write left, and returns the write's error if one
// failed, else err (the maker's own). Call it exactly once, on every path,
// before the Sink is closed or aborted.
func (p *Pipe) Close(err error) error {
	close(p.out)
	werr := p.g.Wait()
	for rec := range p.out {
		rec.Release()
	}
	if werr != nil {
		return werr
	}
	return err
}
