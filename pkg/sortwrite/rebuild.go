package sortwrite

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/progress"
)

// Rebuilt is a lake read, sorted and indexed in memory by Build's own code
// and never written: rows in output order (series id bytewise, then
// period), one entry per series. It exists for the benchmark's Go
// rebuild-at-start baseline (bench/gobaseline), so that the old design is
// measured at its best with this project's Parquet reader, interning and
// radix sort, not with a slower hand-written rebuild.
type Rebuilt struct {
	Rows    int
	Dropped int64 // duplicate keys removed (Options.OnDuplicate "last")

	IDs       []string // per series, in output order
	Start     []int    // per series: first output row; a series ends where the next starts (or at Rows)
	LatestRow []int    // per series: output row of the last non-null value, -1 if none

	Period []int32       // per output row: the period's first day (date32)
	Value  arrow.Array   // per output row: the value column, as Build writes it
	Attr   []string      // names of the per-series attributes (constant within every series)
	Attrs  []arrow.Array // per attribute: one value per series
}

// Release frees the Arrow arrays.
func (r *Rebuilt) Release() {
	if r.Value != nil {
		r.Value.Release()
	}
	for _, a := range r.Attrs {
		a.Release()
	}
}

// Rebuild runs Build's scan, parallel read and sort on opt's input and
// gathers the sorted value column and the per-series attributes in memory.
// opt.Out is not used (nothing is written); the other options mean what
// they mean for Build. Columns that vary within a series (neither key,
// value nor attribute) are read but not kept.
func Rebuild(ctx context.Context, opt Options) (*Rebuilt, error) {
	if opt.Out == "" {
		opt.Out = "-" // defaults() wants one; Rebuild writes nothing
	}
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	lo := opt.Lake
	lo.Input = opt.Input
	tbl, err := source.Open(ctx, lo)
	if err != nil {
		return nil, err
	}
	defer tbl.Close()
	if len(tbl.Files) == 0 {
		return nil, fmt.Errorf("%s at version %s holds no data files: nothing to rebuild", tbl.Location, tbl.SnapshotID)
	}
	t, err := scan(ctx, opt, tbl)
	if err != nil {
		return nil, err
	}
	defer t.mem.release() // Rebuilt holds copies (gathered arrays), not the stores
	if t.external {
		return nil, fmt.Errorf("%s: about %d MiB of rows do not fit the memory budget (%d MiB): a rebuild at start-up is in memory or nothing",
			tbl.Location, inMemoryNeed(t.unified, int64(t.rows))>>20, t.budget>>20)
	}
	if err := t.readAll(ctx, opt.Parallel, make([]string, len(t.inputs)), progress.Or(nil)); err != nil {
		return nil, err
	}
	l, err := t.layout(ctx, opt)
	if err != nil {
		return nil, err
	}
	o := l.ord
	n := o.len()
	r := &Rebuilt{Rows: n, Dropped: l.dropped, Period: make([]int32, n),
		IDs: make([]string, len(l.series)), Start: make([]int, len(l.series)), LatestRow: make([]int, len(l.series))}
	rows := make([]uint32, n)
	for j := 0; j < n; j++ {
		rows[j], r.Period[j] = o.row(j), o.period(j)
	}
	firstRows := make([]uint32, len(l.series))
	for i, s := range l.series {
		r.IDs[i], r.Start[i], r.LatestRow[i] = s.id, s.start, -1
		firstRows[i] = rows[s.start]
		for j := s.end - 1; j >= s.start; j-- {
			if !t.value.isNull(int(rows[j])) {
				r.LatestRow[i] = j
				break
			}
		}
	}
	if r.Value, err = t.value.gather(rows); err != nil {
		return nil, err
	}
	for i, st := range t.others {
		if !l.isAttr[i] {
			continue
		}
		a, err := st.gather(firstRows)
		if err != nil {
			r.Release()
			return nil, err
		}
		r.Attr = append(r.Attr, st.col.Name)
		r.Attrs = append(r.Attrs, a)
	}
	return r, nil
}
