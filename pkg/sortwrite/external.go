package sortwrite

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/progress"
	"github.com/energyscope/servingsnap/pkg/snapwrite"
)

// The external sort: used when the in-memory build would not fit the
// memory budget (Options.MemoryLimit).
//
//  1. Runs. Consecutive row groups are read, as by the in-memory build,
//     into column stores sized to the budget (a run). The run is sorted by
//     (series id, period) with the same radix sort, ranking series by the
//     ids seen so far (string order is all a run needs), and written to the
//     spill directory as fixed-size packed records (spillrec.go). The
//     dictionaries stay in memory across runs, so a string column is four
//     bytes a row on disk; per-series state (the first value of every
//     candidate attribute) is kept beside them, and a run's records leave
//     out the columns still taken for attributes: their values are those.
//  2. Merge. The runs are merged k-way by (final series rank, period, input
//     row): the input row keeps --on-duplicate=last's "later input row wins"
//     exactly as the in-memory stable sort does. Duplicates are dropped or
//     refused, series and batches are cut by the in-memory rules, and the
//     batches stream into datafile.Writer; the index then streams into
//     index.Writer from per-series state.
//
// Both paths therefore write the same bytes for the same input (a test
// compares them). A run that is already sorted (inputs written in key
// order) skips the sort: the check costs one pass over its keys.

// The budget covers the whole process. programReserve is what the program
// itself keeps resident whatever the build (its code and read-only data,
// mapped from the executable: about 45 MiB; the runtime); the external
// sort plans its runs, its merge and the collector's limit within the
// rest, the work memory.
const programReserve = 48 << 20

// memory shares of the work memory: the run's columns and sort keys get
// runShare; the rest covers dictionaries and per-series state, decoded
// Parquet row groups in flight, and the garbage collector's headroom.
const runShare = 0.45

// spillSlack is what reading a run holds besides its columns and the
// per-series state: decoded Parquet pages in flight, the encoded chunks of
// the spill being written (measured about 10 MiB).
const spillSlack = 16 << 20

// spillBuffer is the read (merge) and write (runs) buffer per spill file.
const spillBuffer = 1 << 20

// perRowRun is the bytes a row costs in a run: the stores, the period, the
// packed key and its radix scratch.
func perRowRun(t *table) int64 {
	n := int64(4 + 4 + 8 + 8) // series code, period, key, scratch
	for _, s := range t.allStores()[1:] {
		n += int64(s.recordWidth())
	}
	return n
}

// allStores is the series store, the value store, then the others.
func (t *table) allStores() []*store {
	return append([]*store{t.series, t.value}, t.others...)
}

// recordWidth is the bytes one row of the store takes in a spill record.
func (s *store) recordWidth() int {
	switch s.kind {
	case kindString:
		return 4
	case kindFixed, kindBool:
		return 1 + s.width
	}
	return 0
}

// fit is resize, but drops arrays of more than twice n rows first (a run
// shorter than the one before by half lets their memory go).
func (s *store) fit(n int) {
	s.codes, s.data, s.valid = fitSlice(s.codes, n), fitSlice(s.data, n*s.width), fitSlice(s.valid, n)
	s.resize(n)
}

// fitSlice is v, or nil when its capacity is more than twice n.
func fitSlice[T any](v []T, n int) []T {
	if cap(v) > 2*n {
		return nil
	}
	return v
}

// resize makes the store hold n rows, reusing its arrays when they are big
// enough (runs reuse one allocation).
func (s *store) resize(n int) {
	switch s.kind {
	case kindString:
		s.codes = resizeSlice(s.codes, n)
	case kindFixed, kindBool:
		s.data = resizeSlice(s.data, n*s.width)
		s.valid = resizeSlice(s.valid, n)
	}
}

func resizeSlice[T any](v []T, n int) []T {
	if cap(v) >= n {
		return v[:n]
	}
	return make([]T, n)
}

// like returns an empty store of the same column sharing s's dictionary.
func (s *store) like() *store {
	return &store{col: s.col, kind: s.kind, width: s.width, dict: s.dict}
}

// extResult is what the external build hands back to Build.
type extResult struct {
	built
	runs       int
	spilled    int64
	runSeconds float64 // reading and sorting the runs
}

// external is the state of one external build.
type external struct {
	t      *table
	opt    Options
	dir    string // spill directory
	budget int64

	runs  []runSource // sorted runs, in run order
	bytes int64       // bytes spilled

	// out, when set, takes each sorted run instead of a spill file of its
	// own: the split's pieces (split.go).
	out runOut
	// shardOf is the shard of each series code under opt.Shard (grown as
	// codes are interned); nil when the build is not sharded. A sharded
	// build spills only its shard's rows and counts the others.
	shardOf     []int
	otherShards int64

	// Per series code: whether a row was seen, and the first value of each
	// other column (firsts[i] mirrors t.others[i], indexed by series code).
	// A column that stops being an attribute after a run left it out
	// keeps its firsts, no longer updated, for the merge to fill that
	// run's records from (spillrec.go).
	seen   []bool
	firsts []*store
	isAttr []bool
	// written is how many runs were written.
	written int
}

// work is the memory the external sort plans with: the budget less the
// program's reserve.
func (e *external) work() int64 { return max(e.budget-programReserve, 0) }

// limitFor is the collector's memory limit for a phase whose live heap is
// need: the work memory, or, when need does not fit, need, a quarter more
// and the runtime's own (runtimeSlack): a limit near the live heap would
// make the collector run without pause.
func (e *external) limitFor(need int64) int64 { return max(e.work(), need+need/4+runtimeSlack) }

// runtimeSlack is what the Go runtime counts against its memory limit
// besides the live heap: goroutine stacks, its metadata, freed spans not
// yet returned to the system (measured about 12 MiB while runs are read).
const runtimeSlack = 12 << 20

// runRows is how many rows one run holds under the budget, after the
// per-series state of the series read so far (seriesCost) and the
// dictionaries are set aside: later runs are shorter when the series are
// many.
func (e *external) runRows() int {
	n := (int64(float64(e.work())*runShare) - e.seriesCost() - e.dictCost()) / perRowRun(e.t)
	return int(max(n, minRunRows))
}

// dictCost is the memory of the string columns' dictionaries (the series
// ids among them), which the build keeps to the end.
func (e *external) dictCost() int64 {
	var n int64
	for _, s := range e.t.allStores() {
		if s.kind == kindString && s.dict != nil {
			n += s.dict.footprint()
		}
	}
	return n
}

// seriesCost is the state the build holds per series interned so far,
// bounded by the series, not the rows: whether a row was seen, the ranks
// (the codes in id order and their inverse), and the first value of every
// other column kept (one taken for an attribute, or a run left out).
func (e *external) seriesCost() int64 {
	per := int64(1 + 4 + 4)
	for i, f := range e.firsts {
		if e.isAttr[i] || f.rows() > 0 {
			per += int64(f.recordWidth())
		}
	}
	return int64(len(e.t.series.dict.values)) * per
}

// rows is how many rows the store holds.
func (s *store) rows() int {
	switch s.kind {
	case kindString:
		return len(s.codes)
	case kindFixed, kindBool:
		return len(s.valid)
	}
	return 0
}

// minRunRows keeps the number of runs (open files, read buffers) sane
// when the budget is tiny; such a build may then exceed its budget.
const minRunRows = 4 << 10

// batchCost is what one data batch of the merge holds (batcher.go): per
// row the series code, the period, and each column of the data file that
// is not an attribute as the batcher keeps it and the writer gets it (a
// fixed-width column's bytes and validity byte; a string column's code,
// offset and a few bytes of string). The merge holds two (the one being
// written, the one being made): with the per-series state, the floor of a
// build's memory whatever the budget (the two about 34 MiB for 1M-row
// batches of a lakegen lake).
func (e *external) batchCost() int64 {
	per := int64(4 + 4) // series code, period
	for i, s := range e.t.allStores()[1:] {
		if i > 0 && i-1 < len(e.isAttr) && e.isAttr[i-1] {
			continue
		}
		switch s.kind {
		case kindString:
			per += 4 + 4 + 8
		case kindFixed, kindBool:
			per += int64(s.recordWidth())
		}
	}
	return int64(e.opt.BatchRows) * per
}

// mergeNeed is the merge's live heap: two data batches, the runs' read
// buffers, the per-series state, the dictionaries, and the latest value
// and data file location of every series.
func (e *external) mergeNeed() int64 {
	perSeries := int64(e.t.value.recordWidth() + 4 + 2*32) // a location appended: up to twice its 32 bytes
	return 2*e.batchCost() + int64(e.readBuffer())*int64(len(e.runs)) + e.seriesCost() + e.dictCost() +
		int64(len(e.t.series.dict.values))*perSeries
}

// readBuffer is the merge's read buffer per run: 1 MiB, less when many
// runs would make the buffers a tenth of the work memory (at least
// 64 KiB).
func (e *external) readBuffer() int {
	b := e.work() / 10 / int64(max(len(e.runs), 1))
	return int(min(max(b, minReadBuffer), spillBuffer))
}

// buildExternal runs the external sort and writes data and index into
// staged, spilling into spillDir. sums receives the input checksums.
func (t *table) buildExternal(ctx context.Context, opt Options, budget int64, staged, spillDir string, sums []string, rep progress.Reporter) (*extResult, error) {
	// A soft limit makes the collector work harder near the budget instead
	// of letting garbage double the heap; each run and the merge set it
	// from what they hold (limitFor).
	e := &external{t: t, opt: opt, dir: spillDir, budget: budget}
	old := debug.SetMemoryLimit(e.limitFor(spillSlack))
	defer debug.SetMemoryLimit(old)

	e.isAttr = make([]bool, len(t.others))
	for i, st := range t.others {
		e.isAttr[i] = true
		e.firsts = append(e.firsts, st.like())
	}
	start := time.Now()
	if err := e.spillRuns(ctx, sums, rep); err != nil {
		return nil, err
	}
	runSeconds := time.Since(start).Seconds()
	runs := len(e.runs) // as spilled (the merge may merge them in passes first)
	res, err := e.merge(ctx, staged, rep)
	if err != nil {
		return nil, err
	}
	res.runSeconds = runSeconds
	res.runs, res.spilled = runs, e.bytes
	res.otherShards = e.otherShards
	return res, nil
}

// spillRuns reads the input run by run, sorting and spilling each.
func (e *external) spillRuns(ctx context.Context, sums []string, rep progress.Reporter) (err error) {
	t := e.t
	// A row group is read whole: one over the entire budget is refused;
	// one over the run size (a tiny budget) makes the runs that long.
	most := max(e.budget/perRowRun(t), 1)
	var group int // the most rows of a row group
	var inBytes int64
	for _, in := range t.inputs {
		inBytes += in.Size
	}
	ph := rep.Phase("read and sort runs", int64(t.rows), inBytes)
	defer func() { progress.Finish(ph, err) }()
	var units []unit
	for fi, in := range t.inputs {
		r := in.FirstRow
		for g, n := range in.GroupRows {
			if n > most {
				return fmt.Errorf("%s row group %d holds %d rows, more than the memory budget of %d MiB can sort at once (%d rows); raise --memory or rewrite the file with smaller row groups",
					in.Rel, g, n, e.budget>>20, most)
			}
			group = max(group, int(n))
			units = append(units, unit{in: in, fileIdx: fi, group: g, firstRow: r, rows: n})
			r += n
		}
	}
	defer func() {
		for _, in := range t.inputs {
			in.release()
		}
	}()
	// Checksums run beside the runs, one file at a time.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cg, cctx := errgroup.WithContext(cctx)
	cg.Go(func() (err error) {
		for i, in := range t.inputs {
			if sums[i], err = in.verifiedChecksum(cctx); err != nil {
				return err
			}
		}
		return nil
	})
	fail := func(err error) error {
		cancel()
		cg.Wait()
		return err
	}

	rt := &table{inputs: t.inputs, unified: t.unified, periodCol: t.periodCol,
		series: t.series.like(), value: t.value.like()}
	for _, s := range t.others {
		rt.others = append(rt.others, s.like())
	}
	var keys, scratch []uint64
	var byID []uint32 // series codes seen so far, in id order
	for lo := 0; lo < len(units); {
		limit := max(e.runRows(), group)
		hi, rows := lo, int64(0)
		for hi < len(units) && (hi == lo || rows+units[hi].rows <= int64(limit)) {
			rows += units[hi].rows
			hi++
		}
		debug.SetMemoryLimit(e.limitFor(rows*perRowRun(t) + e.seriesCost() + e.dictCost() + spillSlack))
		rt.base, rt.rows = int(units[lo].firstRow), int(rows)
		for _, s := range rt.allStores() {
			s.fit(rt.rows)
		}
		rt.periods = resizeSlice(fitSlice(rt.periods, rt.rows), rt.rows)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(e.opt.Parallel, 1))
		for _, u := range units[lo:hi] {
			g.Go(func() error { return rt.readUnit(gctx, u) })
		}
		if err := g.Wait(); err != nil {
			return fail(err)
		}
		byID = e.rankNew(byID)
		// The attribute check reads the run in input order and the sort
		// only reads the key columns: they run side by side.
		attrsDone := make(chan struct{})
		go func() {
			defer close(attrsDone)
			e.trackAttrs(rt)
		}()
		rank := make([]uint32, len(t.series.dict.values))
		for r, c := range byID {
			rank[c] = uint32(r)
		}
		keys, scratch = resizeSlice(fitSlice(keys, rt.rows), rt.rows), resizeSlice(fitSlice(scratch, rt.rows), rt.rows)
		o := sortRowsInto(rank, rt.series.codes, rt.periods, keys, scratch)
		<-attrsDone
		if err := e.writeRun(rt, o); err != nil {
			return fail(err)
		}
		var b int64
		for _, u := range units[lo:hi] {
			b += u.in.Size * u.rows / max(u.in.Rows, 1)
		}
		ph.Add(rows, b)
		lo = hi
	}
	return cg.Wait()
}

// rankNew sorts the codes first seen in the last run into byID (the codes
// seen before stay in order; the new ones are sorted and merged in).
func (e *external) rankNew(byID []uint32) []uint32 {
	ids := e.t.series.dict.values
	n := len(byID)
	if len(ids) == n {
		return byID
	}
	fresh := make([]uint32, 0, len(ids)-n)
	for c := n; c < len(ids); c++ {
		fresh = append(fresh, uint32(c))
	}
	cmp := func(a, b uint32) int { return strings.Compare(ids[a], ids[b]) }
	slices.SortFunc(fresh, cmp)
	out := make([]uint32, 0, len(ids))
	i, j := 0, 0
	for i < len(byID) && j < len(fresh) {
		if cmp(byID[i], fresh[j]) < 0 {
			out = append(out, byID[i])
			i++
		} else {
			out = append(out, fresh[j])
			j++
		}
	}
	out = append(out, byID[i:]...)
	return append(out, fresh[j:]...)
}

// trackAttrs compares every row of the run with its series' first value in
// each column still taken for an attribute (constantPerSeries, one run at
// a time): any row stands for the series when all are equal.
func (e *external) trackAttrs(rt *table) {
	n := len(e.t.series.dict.values)
	for len(e.seen) < n {
		e.seen = append(e.seen, false)
	}
	for i, f := range e.firsts {
		if e.isAttr[i] {
			f.grow(n)
		}
	}
	codes := rt.series.codes
	for r, c := range codes {
		if !e.seen[c] {
			e.seen[c] = true
			for i, st := range rt.others {
				if e.isAttr[i] {
					e.firsts[i].copyRow(int(c), st, r)
				}
			}
			continue
		}
		for i, st := range rt.others {
			if e.isAttr[i] && !e.firsts[i].sameRow(int(c), st, r) {
				e.isAttr[i] = false
				// The runs written so far left the column out: the merge
				// fills it back from the first values, as they are now
				// (every row of those runs equals its series' first).
				if e.written == 0 {
					e.firsts[i].resize(0)
				}
			}
		}
	}
}

// grow extends the store to n rows (new rows null).
func (s *store) grow(n int) {
	switch s.kind {
	case kindString:
		for len(s.codes) < n {
			s.codes = append(s.codes, nullCode)
		}
	case kindFixed, kindBool:
		if len(s.valid) < n {
			s.valid = append(s.valid, make([]byte, n-len(s.valid))...)
			s.data = append(s.data, make([]byte, n*s.width-len(s.data))...)
		}
	}
}

// copyRow sets row i of s to row j of src (same column).
func (s *store) copyRow(i int, src *store, j int) {
	switch s.kind {
	case kindString:
		s.codes[i] = src.codes[j]
	case kindFixed, kindBool:
		w := s.width
		s.valid[i] = src.valid[j]
		copy(s.data[i*w:(i+1)*w], src.data[j*w:(j+1)*w])
	}
}

// sameRow reports whether row i of s equals row j of src (nulls equal).
func (s *store) sameRow(i int, src *store, j int) bool {
	switch s.kind {
	case kindString:
		return s.codes[i] == src.codes[j]
	case kindFixed, kindBool:
		if s.valid[i] != src.valid[j] {
			return false
		}
		w := s.width
		return string(s.data[i*w:(i+1)*w]) == string(src.data[j*w:(j+1)*w])
	}
	return true
}

// runOut takes the records of sorted runs, in order: run begins a run
// whose records leave out the other columns omit lists (spillrec.go),
// write takes whole records (size bytes each) of the current run.
type runOut interface {
	run(size int, omit []int) error
	write(recs []byte, size int) error
}

// writeRun encodes the sorted run rt and writes it to the next spill file,
// or to e.out, leaving out the columns still taken for attributes. A
// sharded build keeps only its shard's records.
func (e *external) writeRun(rt *table, o *order) (err error) {
	if e.opt.Shard.Count > 0 {
		e.noteShards()
	}
	omit := slices.Clone(e.isAttr)
	l := layoutOf(rt, omit)
	e.written++
	if e.out != nil {
		if err := e.out.run(l.size, omitted(omit)); err != nil {
			return err
		}
		return e.encodeRun(rt, o, l, func(buf []byte, size int) error { return e.out.write(buf, size) })
	}
	path := filepath.Join(e.dir, fmt.Sprintf("run-%06d.spill", len(e.runs)))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	e.runs = append(e.runs, runSource{path: path, name: path, omit: omit})
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("spill %s: %w", path, cerr)
		}
	}()
	return e.encodeRun(rt, o, l, func(buf []byte, size int) error {
		if e.shardOf != nil {
			buf = e.keepShard(buf, size)
		}
		if _, err := f.Write(buf); err != nil {
			return fmt.Errorf("spill %s: %w", path, err)
		}
		e.bytes += int64(len(buf))
		return nil
	})
}

// noteShards extends shardOf to every series code interned so far.
func (e *external) noteShards() {
	ids := e.t.series.dict.values
	for c := len(e.shardOf); c < len(ids); c++ {
		e.shardOf = append(e.shardOf, e.opt.Shard.Of(ids[c]))
	}
}

// keepShard compacts recs to the records of the build's shard, counting
// the others.
func (e *external) keepShard(recs []byte, size int) []byte {
	le := binary.LittleEndian
	w := 0
	for at := 0; at < len(recs); at += size {
		if e.shardOf[le.Uint32(recs[at+4:])] != e.opt.Shard.Index {
			e.otherShards++
			continue
		}
		if w != at {
			copy(recs[w:w+size], recs[at:at+size])
		}
		w += size
	}
	return recs[:w]
}

// encodeRun packs the sorted run rt into records of layout l and hands
// them to emit in order, a chunk at a time.
func (e *external) encodeRun(rt *table, o *order, l recLayout, emit func(buf []byte, size int) error) error {
	// The value, then the other columns l holds, at their offsets.
	stores, offs := []*store{rt.value}, []int{spillHeader}
	for i, st := range rt.others {
		if l.offs[i] >= 0 {
			stores, offs = append(stores, st), append(offs, l.offs[i])
		}
	}
	size := l.size
	le := binary.LittleEndian
	// encode packs sorted positions [lo, hi) into buf. Encoding is a
	// gather at random rows of the run; two chunks are encoded at once
	// (one per core), then written in order. It goes a column at a time
	// (the rows' numbers first, then each column's values into its place
	// in every record): each pass is a short loop whose loads do not
	// depend on each other, so the CPU has many of the gather's cache
	// misses in flight at once, where a record at a time (every column of
	// one row, behind a switch per column) left it one row's few. The
	// bytes are the same.
	encode := func(buf []byte, rows []uint32, lo, hi int) {
		rows = rows[:hi-lo]
		for k := range rows {
			rows[k] = o.row(lo + k)
		}
		for k, r := range rows {
			rec := buf[k*size : k*size+spillHeader]
			le.PutUint32(rec[0:], uint32(rt.base+int(r)))
		}
		for k, r := range rows {
			le.PutUint32(buf[k*size+4:], rt.series.codes[r])
		}
		for k, r := range rows {
			le.PutUint32(buf[k*size+8:], uint32(rt.periods[r]))
		}
		for si, s := range stores {
			p := offs[si]
			switch s.kind {
			case kindString:
				for k, r := range rows {
					le.PutUint32(buf[k*size+p:], s.codes[r])
				}
			case kindFixed, kindBool:
				w := s.width
				for k, r := range rows {
					buf[k*size+p] = s.valid[r]
				}
				if w == 8 {
					for k, r := range rows {
						le.PutUint64(buf[k*size+p+1:], le.Uint64(s.data[int(r)*8:]))
					}
				} else {
					for k, r := range rows {
						at := k*size + p + 1
						copy(buf[at:at+w], s.data[int(r)*w:(int(r)+1)*w])
					}
				}
			}
		}
	}
	const chunk = 32 << 10
	n := o.len()
	bufA, bufB := make([]byte, chunk*size), make([]byte, chunk*size)
	rowsA, rowsB := make([]uint32, chunk), make([]uint32, chunk)
	for lo := 0; lo < n; lo += 2 * chunk {
		midA, hiB := min(lo+chunk, n), min(lo+2*chunk, n)
		done := make(chan struct{})
		go func() {
			defer close(done)
			encode(bufB, rowsB, midA, hiB)
		}()
		encode(bufA, rowsA, lo, midA)
		<-done
		if err := emit(bufA[:(midA-lo)*size], size); err != nil {
			return err
		}
		if err := emit(bufB[:(hiB-midA)*size], size); err != nil {
			return err
		}
	}
	return nil
}

// runSource is one sorted run the merge reads: a spill file, or a run
// inside a split's piece (block-compressed, its codes the piece's part's,
// mapped to the build's by remap).
type runSource struct {
	path   string
	name   string // in errors
	off    int64
	size   int64 // bytes from off; 0: to the end of the file
	blocks bool  // block-compressed (splitfmt.go)
	remap  *codeRemap
	// records, when above 0, is how many records the run must hold.
	records int64
	// omit is, per t.others, whether the run's records leave the column
	// out (nil: none); fills has, for each column left out, its value per
	// series code of the run (nil: external.firsts).
	omit  []bool
	fills []*store
}

// runReader reads one spill file's records in order.
type runReader struct {
	f   *os.File
	br  io.Reader
	rec []byte // the current record, in the merge's layout
	// raw and mv, when the run's layout is not the merge's: the record as
	// read, and how to make rec of it (spillrec.go).
	raw   []byte
	mv    []fieldMove
	head  int
	key   uint64 // final rank << 32 | period (ordered as unsigned)
	row   uint32
	name  string
	remap *codeRemap
	want  int64 // records the run must hold (0: unknown)
	read  int64
}

// openRun opens a run of table t for the merge, whose records have layout
// merge, with a read buffer of buf bytes. fills is where the columns the
// run leaves out come from when src does not say.
func openRun(t *table, src runSource, merge recLayout, fills []*store, buf int) (*runReader, error) {
	if src.fills != nil {
		fills = src.fills
	}
	run := layoutOf(t, src.omit)
	mv := moves(t, run, merge, fills)
	for _, m := range mv {
		if m.from < 0 && m.fill == nil {
			return nil, fmt.Errorf("%s: leaves out a column with no first values to fill it from", src.name)
		}
	}
	f, err := os.Open(src.path)
	if err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	var rd io.Reader = f
	if src.size > 0 || src.off > 0 {
		n := src.size
		if n == 0 {
			n = 1<<63 - 1 - src.off
		}
		rd = io.NewSectionReader(f, src.off, n)
	}
	r := &runReader{f: f, rec: make([]byte, merge.size), name: src.name, remap: src.remap, want: src.records,
		mv: mv, head: spillHeader + t.value.recordWidth()}
	if mv != nil {
		r.raw = make([]byte, run.size)
	}
	if src.blocks {
		r.br = newBlockReader(bufio.NewReaderSize(rd, buf), run.size, src.name)
	} else {
		r.br = bufio.NewReaderSize(rd, buf)
	}
	return r, nil
}

func (r *runReader) next(rank []uint32) (bool, error) {
	raw := r.rec
	if r.mv != nil {
		raw = r.raw
	}
	if _, err := io.ReadFull(r.br, raw); err != nil {
		if err == io.EOF {
			if r.want > 0 && r.read != r.want {
				return false, corrupt.Errorf("%s: ends after %d records, its manifest says %d", r.name, r.read, r.want)
			}
			return false, nil
		}
		if err == io.ErrUnexpectedEOF {
			return false, corrupt.Errorf("spill %s: ends inside a record", r.name)
		}
		return false, fmt.Errorf("spill %s: %w", r.name, err)
	}
	r.read++
	if r.mv != nil {
		if err := expand(r.rec, raw, r.head, r.mv); err != nil {
			return false, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	if r.remap != nil {
		if err := r.remap.apply(r.rec); err != nil {
			return false, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	le := binary.LittleEndian
	r.row = le.Uint32(r.rec[0:])
	code := le.Uint32(r.rec[4:])
	if int(code) >= len(rank) {
		return false, fmt.Errorf("spill %s: series code %d out of range", r.name, code)
	}
	r.key = uint64(rank[code])<<32 | uint64(le.Uint32(r.rec[8:])^1<<31)
	return true, nil
}

// runHeap orders the runs' current records by (key, input row).
type runHeap []*runReader

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return h[i].row < h[j].row
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// merge merges the runs into data.arrow and index.arrow in staged.
func (e *external) merge(ctx context.Context, staged string, rep progress.Reporter) (_ *extResult, err error) {
	ph := rep.Phase("merge and write", int64(e.t.rows), e.bytes)
	defer func() { progress.Finish(ph, err) }()
	t := e.t
	ids := t.series.dict.values
	// The series are those with a row (a dictionary may hold a value no
	// row kept) of the build's shard.
	byID := make([]uint32, 0, len(ids))
	for c := range ids {
		if c < len(e.seen) && e.seen[c] && (e.shardOf == nil || e.shardOf[c] == e.opt.Shard.Index) {
			byID = append(byID, uint32(c))
		}
	}
	slices.SortFunc(byID, func(a, b uint32) int { return strings.Compare(ids[a], ids[b]) })
	nSeries := len(byID)
	rank := make([]uint32, len(ids))
	for r, c := range byID {
		rank[c] = uint32(r)
	}

	res := &extResult{}
	var extra, attrs []arrow.Field
	var extraIdx, attrIdx []int // positions in t.others
	for i, st := range t.others {
		f := arrow.Field{Name: st.col.Name, Type: st.col.Type, Nullable: true}
		if e.isAttr[i] {
			attrs, attrIdx = append(attrs, f), append(attrIdx, i)
			res.attrs = append(res.attrs, st.col.Name)
		} else {
			extra, extraIdx = append(extra, f), append(extraIdx, i)
		}
	}
	if res.attrs == nil {
		res.attrs = []string{}
	}
	res.schemas.data = datafile.Schema(t.value.col.Type, extra)

	// The merge's records hold the columns that are not attributes.
	ml := layoutOf(t, e.isAttr)
	if err := e.narrow(ctx, rank, ml); err != nil {
		return nil, err
	}
	debug.SetMemoryLimit(e.limitFor(e.mergeNeed()))
	h := make(runHeap, 0, len(e.runs))
	defer func() {
		for _, r := range h {
			r.f.Close()
		}
	}()
	size := ml.size
	for _, src := range e.runs {
		r, err := openRun(t, src, ml, e.firsts, e.readBuffer())
		if err != nil {
			return nil, err
		}
		ok, err := r.next(rank)
		if err != nil {
			r.f.Close()
			return nil, err
		}
		if !ok {
			r.f.Close()
			continue
		}
		h = append(h, r)
	}
	heap.Init(&h)

	dw, err := snapwrite.NewSink(staged, res.schemas.data, e.opt.Tiers)
	if err != nil {
		return nil, err
	}
	defer dw.Abort()

	// Per series (by rank): the latest non-null value and its period.
	latest := t.value.like()
	latest.grow(nSeries)
	latestP := make([]int32, nSeries)

	// A tiered sink's cold writer may keep slices of a batch: its buffers
	// are not recycled.
	b := newBatcher(e, ml, extraIdx, res.schemas.data, !e.opt.Tiers.Tiered())
	// The data file is written a batch behind the merge, on a goroutine of
	// its own; a failed write stops the merge at its next batch.
	b.pipe = snapwrite.NewPipe(ctx, b.write(dw))
	wctx := b.pipe.Context()

	le := binary.LittleEndian
	var (
		pend     = make([]byte, size)
		pendKey  uint64
		pendRow  uint32
		havePend bool
		curRank  = uint32(noRow)
		first    = true
	)
	emit := func() error {
		rk := uint32(pendKey >> 32)
		p := int32(le.Uint32(pend[8:]))
		if rk != curRank {
			if err := b.endSeries(wctx); err != nil {
				return err
			}
			curRank = rk
		}
		if first || p < res.minP {
			res.minP = p
		}
		if first || p > res.maxP {
			res.maxP = p
		}
		first = false
		// The value column is numeric (scan checks): valid byte, then data.
		if pend[spillHeader] == 1 {
			latest.valid[rk] = 1
			w := latest.width
			copy(latest.data[int(rk)*w:(int(rk)+1)*w], pend[spillHeader+1:spillHeader+1+w])
			latestP[rk] = p
		}
		b.add(pend)
		res.rows++
		return nil
	}
	var mergeErr error
	nrec := 0
	for len(h) > 0 {
		r := h[0]
		if havePend && pendKey == r.key {
			if e.opt.OnDuplicate == OnDuplicateError {
				code := le.Uint32(r.rec[4:])
				mergeErr = fmt.Errorf("duplicate key (%s %q, %s %s): %s and %s; pass --on-duplicate=last to keep the later row",
					e.opt.SeriesColumn, ids[code], e.opt.PeriodColumn, period.Format(int32(le.Uint32(r.rec[8:]))),
					t.location(int64(pendRow)), t.location(int64(r.row)))
				break
			}
			res.dropped++
		} else if havePend {
			if mergeErr = emit(); mergeErr != nil {
				break
			}
		}
		copy(pend, r.rec)
		pendKey, pendRow, havePend = r.key, r.row, true
		ok, err := r.next(rank)
		if err != nil {
			mergeErr = err
			break
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			r.f.Close()
			heap.Pop(&h)
		}
		if nrec++; nrec&(1<<16-1) == 0 {
			ph.Add(1<<16, int64(1<<16*size))
			if err := wctx.Err(); err != nil {
				mergeErr = err
				break
			}
		}
	}
	if mergeErr == nil && havePend {
		mergeErr = emit()
	}
	if mergeErr == nil {
		mergeErr = b.endSeries(wctx)
	}
	if mergeErr == nil {
		mergeErr = b.flush(wctx, b.n)
	}
	if err := b.pipe.Close(mergeErr); err != nil {
		return nil, err
	}
	files, err := dw.Close()
	if err != nil {
		return nil, err
	}
	res.series = int64(nSeries)
	xinfo, err := e.writeIndex(filepath.Join(staged, "index.arrow"), dw, byID, latest, latestP, attrs, attrIdx, &res.schemas)
	if err != nil {
		return nil, err
	}
	res.files = append(files, manifest.File{Path: "index.arrow", Role: manifest.RoleIndex, Format: manifest.FormatArrowIPCFile,
		Size: xinfo.Size, Rows: xinfo.Rows, Batches: xinfo.Batches, Checksum: xinfo.Checksum})
	return res, nil
}

// writeIndex writes index.arrow: series in rank order, the latest values
// kept during the merge, attributes from the per-series first values.
func (e *external) writeIndex(path string, sink *snapwrite.Sink, byID []uint32, latest *store, latestP []int32,
	attrs []arrow.Field, attrIdx []int, sc *schemas) (arrowfile.Info, error) {
	t := e.t
	n := len(byID)
	xw, locs, err := newIndexWriter(path, t.value.col.Type, attrs, sink, n)
	if err != nil {
		return arrowfile.Info{}, err
	}
	defer xw.Abort() // (after Close, nothing to do)
	identity := make([]uint32, n)
	for i := range identity {
		identity[i] = uint32(i)
	}
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	la, err := latest.gather(identity)
	if err != nil {
		return arrowfile.Info{}, err
	}
	cols = append(cols, la)
	for _, i := range attrIdx {
		a, err := e.firsts[i].gather(byID)
		if err != nil {
			return arrowfile.Info{}, err
		}
		cols = append(cols, a)
	}
	ids := t.series.dict.values
	return addSeries(xw, n, la, cols[1:], sc, sink, func(i int, s *index.Series) {
		s.ID, s.Location, s.HasLatest = ids[byID[i]], locs[i], !latest.isNull(i)
		if s.HasLatest {
			s.LatestPeriod = latestP[i]
		}
	})
}
