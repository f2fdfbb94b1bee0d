package snapwrite

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
)

// Splitter is where a tiered build's data batches go: it takes the same
// sorted, series-aligned batches a datafile.Writer takes and routes each
// series' cold prefix (Policy.ColdRows) to the cold file and the rest to
// the hot data file. The builder's in-memory and external paths and
// compaction all write through one, so the split is decided in one place.
//
// With Policy.AllCold (snapbuild build --format vortex) every row goes to
// the cold file and the hot file gets none: it holds the schema only.
type Splitter struct {
	hot    *datafile.Writer
	cold   *coldfile.Writer
	policy coldfile.Policy
	locs   []coldfile.Location // per series code since the last TakeLocations, as the cold writer reported them
	taken  int                 // series whose locations TakeLocations handed out
	mem    memory.Allocator
}

// NewSplitter routes batches to hot and cold under p, which must be
// Tiered.
func NewSplitter(hot *datafile.Writer, cold *coldfile.Writer, p coldfile.Policy) (*Splitter, error) {
	if !p.Tiered() {
		return nil, errors.New("snapshot writer: a splitter needs a tiered policy (hot-since, hot-rows or all cold)")
	}
	return &Splitter{hot: hot, cold: cold, policy: p, mem: memory.NewGoAllocator()}, nil
}

// Write splits rec, one series after another. The hot part is written as
// one batch (rec's rows without the cold prefixes, gathered once), so the
// hot file keeps the builder's batch boundaries; a batch with nothing hot
// is not written.
func (s *Splitter) Write(rec arrow.RecordBatch) error {
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	codes, ok1 := rec.Column(datafile.ColumnSeriesCode).(*array.Uint32)
	periods, ok2 := rec.Column(datafile.ColumnPeriod).(*array.Date32)
	if !ok1 || !ok2 {
		return fmt.Errorf("snapshot writer: batch is not of the data schema (%s)", rec.Schema())
	}
	cv, pv := codes.Uint32Values(), periods.Date32Values()
	var hot []int64 // rows of rec that stay hot, when some are cold
	anyCold := false
	for lo := int64(0); lo < n; {
		hi := lo + 1
		for hi < n && cv[hi] == cv[lo] {
			hi++
		}
		if want := int64(s.taken + len(s.locs)); int64(cv[lo]) != want {
			return fmt.Errorf("snapshot writer: series code %d where %d was due (codes are dense, in order, each in one batch)", cv[lo], want)
		}
		c := s.policy.ColdRows(pv[lo:hi])
		loc, err := s.cold.Add(rec, lo, lo+c)
		if err != nil {
			return err
		}
		s.locs = append(s.locs, loc)
		if c > 0 && !anyCold {
			anyCold = true
			hot = make([]int64, 0, n)
			for i := int64(0); i < lo; i++ {
				hot = append(hot, i)
			}
		}
		if anyCold {
			for i := lo + c; i < hi; i++ {
				hot = append(hot, i)
			}
		}
		lo = hi
	}
	switch {
	case !anyCold:
		return s.hot.Write(rec)
	case len(hot) == 0:
		return nil
	}
	part, err := take(s.mem, rec, hot)
	if err != nil {
		return fmt.Errorf("snapshot writer: gathering the hot rows: %w", err)
	}
	defer part.Release()
	return s.hot.Write(part)
}

// take gathers rows of rec into a new batch of rec's schema.
func take(mem memory.Allocator, rec arrow.RecordBatch, rows []int64) (arrow.RecordBatch, error) {
	idx := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, len(rows),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(rows))}, nil, 0, 0))
	defer idx.Release()
	ctx := compute.WithAllocator(context.Background(), mem)
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := compute.TakeArray(ctx, rec.Column(i), idx)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(rows))), nil
}

// Locations are, per series code, where its cold rows went (after
// TakeLocations: for the series written since).
func (s *Splitter) Locations() []coldfile.Location { return s.locs }

// TakeLocations appends to hot and cold where the rows of each series
// written since the last call went, and forgets them (see
// datafile.Writer.TakeLocations).
func (s *Splitter) TakeLocations(hot []datafile.Location, cold []coldfile.Location) ([]datafile.Location, []coldfile.Location) {
	if s.policy.AllCold {
		hot = append(hot, make([]datafile.Location, len(s.locs))...)
	} else {
		hot = s.hot.TakeLocations(hot)
	}
	cold = append(cold, s.locs...)
	s.taken += len(s.locs)
	s.locs = s.locs[:0]
	return hot, cold
}

// HotLocations are, per series code, where its hot rows went: the hot
// writer's, or with every row cold, an empty location per series (row
// count 0, at row 0 of batch 0, which is how a version-3 index records a
// series without hot rows).
func (s *Splitter) HotLocations() []datafile.Location {
	if s.policy.AllCold {
		return make([]datafile.Location, len(s.locs))
	}
	return s.hot.Locations()
}
