package sortwrite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/progress"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// The two-phase split of an unbucketed lake (snapbuild split, then build
// --from-split): part J of M reads 1/M of the input files, in the order
// the builder reads them, and writes for each shard i of N that shard's
// rows as one piece, sorted runs in the external sort's record format
// (splitfmt.go), plus what a shard's build needs from the rows it does not
// read: the part's dictionaries and each series' first value of every
// column still taken for an attribute (the part's meta file). A shard's
// build then merges its M pieces exactly as the external sort merges its
// runs, and reads no lake file: the lake is read once by the parts, the
// pieces once by the shards.

// SplitPart names one part of a split: part Index of Count.
type SplitPart = shard.Spec

// SplitSummary reports one part of a split; its JSON form is what
// `snapbuild split --json` prints.
type SplitSummary struct {
	Dir           string `json:"dir"`
	Part          int    `json:"part"`
	Parts         int    `json:"parts"`
	Shards        int    `json:"shards"`
	ShardFunction string `json:"shard_function"`
	// Inputs and InputBytes are the part's data files; Files the table's.
	Inputs     int   `json:"inputs"`
	InputBytes int64 `json:"input_bytes"`
	Files      int   `json:"files"`
	// BytesRead is what the part read: its files (each counted once,
	// though it is checksummed as well as decoded) and the footers of the
	// others (for the unified schema and the rows' numbers).
	BytesRead    int64            `json:"bytes_read"`
	Rows         int64            `json:"rows"`
	Runs         int              `json:"runs"`
	PieceBytes   int64            `json:"piece_bytes"`
	Pieces       []SplitPiece     `json:"pieces"`
	Lineage      manifest.Lineage `json:"lineage"`
	MemoryBudget int64            `json:"memory_budget"`
	Seconds      float64          `json:"seconds"`
	PeakRSS      int64            `json:"peak_rss"`
}

// SplitPiece is one shard's piece of a part.
type SplitPiece struct {
	Shard int    `json:"shard"`
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// Split writes part p of the split of opt.Input into dir, for the
// opt.Shard.Count shards of opt.Shard's function. Only Parquet folders
// and Delta tables split: an Iceberg table's rows are read through
// iceberg-go, file by file, with no footer to unify the schema from.
func Split(ctx context.Context, opt Options, p SplitPart, dir string) (*SplitSummary, error) {
	start := time.Now()
	opt.split = true
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if opt.Shard.Count < 1 {
		return nil, fmt.Errorf("split: give the number of shards")
	}
	if p.Count < 1 || p.Index < 0 || p.Index >= p.Count {
		return nil, fmt.Errorf("split part %s: the part must be from 0 to %d", p, p.Count-1)
	}
	if err := checkSplitDir(dir); err != nil {
		return nil, err
	}
	rep := progress.Or(opt.Progress)
	lo := opt.Lake
	lo.Input = opt.Input
	tbl, err := source.Open(ctx, lo)
	if err != nil {
		return nil, err
	}
	defer tbl.Close()
	if tbl.ReadsRecords() {
		return nil, fmt.Errorf("%s is an Iceberg table: split reads Parquet folders and Delta tables; partition the table by bucket(B, %s) and build each shard with --shard-function %s instead",
			tbl.Location, opt.SeriesColumn, shard.HashIcebergBucket)
	}
	if len(tbl.Files) == 0 {
		return nil, fmt.Errorf("%s at version %s holds no data files: nothing to split", tbl.Location, tbl.SnapshotID)
	}
	lin := lineageOf(tbl, opt)
	ph := rep.Phase("scan", 0, 0)
	t, err := scan(ctx, opt, tbl)
	if err != nil {
		return nil, interrupted(ctx, err)
	}
	ph.Done()
	sum := &SplitSummary{Dir: dir, Part: p.Index, Parts: p.Count, Shards: opt.Shard.Count, ShardFunction: opt.Shard.HashName(),
		Files: len(t.inputs), Lineage: lin, MemoryBudget: t.budget}
	a, b := partFiles(t.inputs, p)
	for i, in := range t.inputs {
		if i >= a && i < b {
			sum.BytesRead += in.Size
			sum.InputBytes += in.Size
		} else if in.meta != nil {
			sum.BytesRead += int64(in.meta.Size()) + 8 // the footer and its length, magic
		}
	}
	all := t.inputs
	t.keepInputs(a, b)
	t.rows = 0
	for _, in := range t.inputs {
		t.rows += int(in.Rows)
	}
	sum.Inputs, sum.Rows = len(t.inputs), int64(t.rows)
	w, err := newPieceWriter(dir, p, opt, recordSize(t), blockSize(t.budget, opt.Shard.Count))
	if err != nil {
		return nil, err
	}
	defer w.abort()
	e := &external{t: t, opt: opt, budget: t.budget, out: w}
	w.e = e
	old := debug.SetMemoryLimit(e.limitFor(spillSlack)) // each run sets it from what it holds
	defer debug.SetMemoryLimit(old)
	e.isAttr = make([]bool, len(t.others))
	for i, st := range t.others {
		e.isAttr[i] = true
		e.firsts = append(e.firsts, st.like())
	}
	sums := make([]string, len(t.inputs))
	if err := e.spillRuns(ctx, sums, rep); err != nil {
		return nil, interrupted(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, interrupted(ctx, err)
	}
	if err := t.checkSeriesIDs(); err != nil {
		return nil, err
	}
	e.noteShards()
	meta, err := writePartMeta(dir, p, e)
	if err != nil {
		return nil, err
	}
	head := pieceHead{
		Format: pieceFormat, Version: pieceVersion, Tool: opt.Tool,
		Part: p.Index, Parts: p.Count, Shards: opt.Shard.Count, ShardFunction: opt.Shard.HashName(),
		SeriesColumn: opt.SeriesColumn, PeriodColumn: opt.PeriodColumn, ValueColumn: opt.ValueColumn,
		MixedPeriodTypes: opt.MixedPeriodTypes, Lineage: lin, Files: len(all), RecordSize: recordSize(t),
		PartRows: sum.Rows, Meta: meta,
	}
	var total int64
	for _, in := range all {
		total += in.Rows
	}
	head.TableRows = total
	for i, in := range t.inputs {
		head.Inputs = append(head.Inputs, pieceInput{Path: in.Rel, Size: in.Size, Rows: in.Rows, FirstRow: in.FirstRow,
			GroupRows: in.GroupRows, Checksum: sums[i]})
	}
	pieces, err := w.finish(head)
	if err != nil {
		return nil, err
	}
	sum.Pieces = pieces
	for _, pc := range pieces {
		sum.PieceBytes += pc.Bytes
	}
	sum.Runs = w.runs
	sum.Seconds = time.Since(start).Seconds()
	sum.PeakRSS = peakRSS()
	return sum, nil
}

// checkSplitDir refuses a split directory that is not a local path: the
// pieces live on a file system every job mounts (a shared volume), not in
// an object store.
func checkSplitDir(dir string) error {
	if dir == "" {
		return fmt.Errorf("split: a split directory is required")
	}
	if strings.Contains(dir, "://") {
		return fmt.Errorf("split directory %s: give a directory of a file system every job mounts (a shared volume), not an object store URL", dir)
	}
	return nil
}

// keepInputs narrows t to its inputs [a, b): the files, and each column's
// field positions per file (Column.In), which the readers index by the
// file's place in t.inputs.
func (t *table) keepInputs(a, b int) {
	t.inputs = t.inputs[a:b]
	for i := range t.unified.Columns {
		c := &t.unified.Columns[i]
		c.In = c.In[a:b]
	}
	for _, s := range t.allStores() {
		s.col.In = s.col.In[a:b]
	}
}

// partFiles is the range of inputs part p reads: the inputs in the
// builder's order, cut into Count consecutive ranges of about equal
// bytes (a file goes to the part its first byte falls in).
func partFiles(ins []*input, p SplitPart) (lo, hi int) {
	var total int64
	for _, in := range ins {
		total += in.Size
	}
	partOf := func(i int, at int64) int {
		if total == 0 {
			return i * p.Count / max(len(ins), 1)
		}
		return int(min(at*int64(p.Count)/total, int64(p.Count-1)))
	}
	lo, hi = -1, -1
	var at int64
	for i, in := range ins {
		q := partOf(i, at)
		at += in.Size
		if q == p.Index {
			if lo < 0 {
				lo = i
			}
			hi = i + 1
		}
	}
	if lo < 0 {
		return 0, 0
	}
	return lo, hi
}

// pieceWriter writes a part's pieces, one per shard, taking the sorted
// runs of the external sort's read phase (runOut).
type pieceWriter struct {
	dir   string
	p     SplitPart
	opt   Options
	e     *external
	enc   *zstd.Encoder
	files []*os.File
	tmp   []string
	bw    []*blockWriter
	hash  []*hashWriter
	runs  int
	// per shard, the runs written: offset, bytes, records
	pruns [][]pieceRun
	rows  []int64
}

func newPieceWriter(dir string, p SplitPart, opt Options, size, block int) (*pieceWriter, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		return nil, err
	}
	w := &pieceWriter{dir: dir, p: p, opt: opt, enc: enc, pruns: make([][]pieceRun, opt.Shard.Count), rows: make([]int64, opt.Shard.Count)}
	scratch := &blockScratch{}
	for i := range opt.Shard.Count {
		sd := filepath.Join(dir, shardDirName(i))
		if err := os.MkdirAll(sd, 0o755); err != nil {
			w.abort()
			return nil, fmt.Errorf("split: %w", err)
		}
		// A temporary name of its own: two runs of one part (a retried
		// pod beside one not yet gone) never write one file.
		f, err := os.CreateTemp(sd, "."+pieceName(p)+runExt+".*.tmp")
		if err != nil {
			w.abort()
			return nil, fmt.Errorf("split: %w", err)
		}
		w.files, w.tmp = append(w.files, f), append(w.tmp, f.Name())
		if err := f.Chmod(0o644); err != nil { // read by other jobs
			w.abort()
			return nil, fmt.Errorf("split: %w", err)
		}
		h := newHashWriter(f)
		w.hash = append(w.hash, h)
		w.bw = append(w.bw, newBlockWriter(h, size, block, enc, scratch))
	}
	return w, nil
}

// run ends the run before (its blocks flushed) and starts the next, whose
// records are size bytes and leave out the other columns omit lists.
func (w *pieceWriter) run(size int, omit []int) error {
	if err := w.endRun(); err != nil {
		return err
	}
	w.runs++
	for i := range w.pruns {
		w.bw[i].setSize(size)
		w.pruns[i] = append(w.pruns[i], pieceRun{Offset: w.bw[i].n, RecordSize: size, Omit: omit})
	}
	return nil
}

func (w *pieceWriter) endRun() error {
	for i, bw := range w.bw {
		if err := bw.flush(); err != nil {
			return fmt.Errorf("split: %w", err)
		}
		if k := len(w.pruns[i]); k > 0 {
			r := &w.pruns[i][k-1]
			r.Bytes = bw.n - r.Offset
			if r.Records == 0 {
				w.pruns[i] = w.pruns[i][:k-1]
			}
		}
	}
	return nil
}

func (w *pieceWriter) write(recs []byte, size int) error {
	shardOf := w.e.shardOf
	for at := 0; at < len(recs); at += size {
		rec := recs[at : at+size]
		i := shardOf[le32(rec[4:])]
		if err := w.bw[i].write(rec); err != nil {
			return fmt.Errorf("split: %w", err)
		}
		w.pruns[i][len(w.pruns[i])-1].Records++
		w.rows[i]++
	}
	return nil
}

// finish closes the pieces, moves them into place and writes each one's
// manifest last: a piece without its manifest is never taken.
func (w *pieceWriter) finish(head pieceHead) ([]SplitPiece, error) {
	if err := w.endRun(); err != nil {
		return nil, err
	}
	var out []SplitPiece
	for i, f := range w.files {
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
		w.files[i] = nil
		sd := filepath.Join(w.dir, shardDirName(i))
		name := pieceName(w.p) + runExt
		if err := os.Rename(w.tmp[i], filepath.Join(sd, name)); err != nil {
			return nil, fmt.Errorf("split: %w", err)
		}
		w.tmp[i] = ""
		h := head
		h.Shard = i
		h.Rows = w.rows[i]
		h.Runs = w.pruns[i]
		if h.Runs == nil {
			h.Runs = []pieceRun{}
		}
		h.Piece = pieceFile{Path: name, Size: w.bw[i].n, Checksum: w.hash[i].sum()}
		if err := writePieceHead(filepath.Join(sd, pieceName(w.p)+headExt), &h); err != nil {
			return nil, err
		}
		out = append(out, SplitPiece{Shard: i, Path: filepath.Join(sd, name), Rows: h.Rows, Bytes: h.Piece.Size})
	}
	return out, nil
}

// abort removes what an unfinished split part wrote.
func (w *pieceWriter) abort() {
	for i, f := range w.files {
		if f != nil {
			f.Close()
		}
		if w.tmp[i] != "" {
			os.Remove(w.tmp[i])
		}
	}
}
