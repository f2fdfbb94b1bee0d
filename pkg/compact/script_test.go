package compact_test

// Golden scripts of offline compaction (testdata/*.txt, run by
// internal/datadriven; go test -run TestScripts -rewrite records new
// output). Rows are "ID DATE VALUE" lines. Commands:
//
//	build         build the rows (a Parquet lake) into the dataset: the next snapshot
//	write         log the rows as one live write, as a server's DoPut does
//	compact [batch-rows=N]  compact.Offline (N: data batches of at most N rows)
//	rows [live]   the rows CURRENT's snapshot holds; live: with the logged writes after the checkpoint merged over it
//	checkpoint    the log's checkpoint, and how many logged records lie after it

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/datadriven"
	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/compact"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
	"github.com/energyscope/servingsnap/pkg/wal"
)

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/*.txt", func(t *testing.T, path string) {
		tmp := t.TempDir()
		s := &compactScript{t: t, tmp: tmp, dir: filepath.Join(tmp, "root", "DS")}
		datadriven.RunFile(t, path, s.run)
	})
}

// TestScriptsOneSeriesChunks runs the scripts again with the ids and
// attributes fetched one series at a time: every chunk boundary is
// crossed, and the output must not change.
func TestScriptsOneSeriesChunks(t *testing.T) {
	defer compact.SetDictChunk(1)()
	TestScripts(t)
}

type compactScript struct {
	t      *testing.T
	tmp    string
	dir    string // the dataset
	builds int
}

// the clock of manifests and checkpoints: scripts print no time.
var scriptNow = func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

func (s *compactScript) run(d *datadriven.Directive) string {
	switch d.Cmd {
	case "build":
		return s.build(d)
	case "write":
		return s.write(d)
	case "compact":
		opt := compact.Options{Tool: "servingsnap v0.0.0-script", Now: scriptNow}
		if v, ok := d.ArgOne("batch-rows"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				d.Fatalf(s.t, "batch-rows=%s: %v", v, err)
			}
			opt.BatchRows = n
		}
		res, err := compact.Offline(context.Background(), s.dir, opt)
		if err != nil {
			return "error: " + strings.ReplaceAll(err.Error(), s.tmp, "TMP")
		}
		return fmt.Sprintf("snapshot %d (parent %d): %d rows, %d series, folded through %v",
			res.SnapshotID, res.ParentID, res.Rows, res.Series, wal.PositionFromUint64(res.WALPosition))
	case "rows":
		_, withLog := d.Arg("live")
		return s.rows(withLog)
	case "checkpoint":
		return s.checkpoint()
	}
	d.Fatalf(s.t, "unknown command")
	return ""
}

type scriptRow struct {
	id, period string
	value      float64
}

func (s *compactScript) parseRows(d *datadriven.Directive) []scriptRow {
	var rows []scriptRow
	for _, l := range strings.Split(d.Input, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			d.Fatalf(s.t, "row %q: want ID DATE VALUE", l)
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			d.Fatalf(s.t, "row %q: %v", l, err)
		}
		rows = append(rows, scriptRow{f[0], f[1], v})
	}
	return rows
}

func (s *compactScript) build(d *datadriven.Directive) string {
	s.builds++
	lake := filepath.Join(s.tmp, fmt.Sprintf("lake-%d", s.builds))
	var ids, periods, vals []any
	for _, r := range s.parseRows(d) {
		ids, periods, vals = append(ids, r.id), append(periods, r.period), append(vals, r.value)
	}
	testlake.WriteParquet(s.t, lake, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: ids},
		testlake.Col{Name: "period", Vals: periods},
		testlake.Col{Name: "value", Vals: vals, Typ: arrow.PrimitiveTypes.Float64})
	sum, err := sortwrite.Build(context.Background(), sortwrite.Options{Input: lake, Out: s.dir, Parallel: 1, Now: scriptNow})
	if err != nil {
		return "error: " + strings.ReplaceAll(err.Error(), s.tmp, "TMP")
	}
	return fmt.Sprintf("snapshot %d: %d rows, %d series", sum.SnapshotID, sum.Rows, sum.Series)
}

// view is CURRENT's snapshot open for reading, with the delta schema its
// live writes have.
type view struct {
	snap *snapshot.Snapshot
	r    *query.SnapshotReader
	sc   *livedelta.Schema
}

func (s *compactScript) open() *view {
	snap, err := snapshot.Open(s.dir, snapshot.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { snap.Close() })
	r, err := query.FromSnapshot("DS", snap)
	if err != nil {
		s.t.Fatal(err)
	}
	fields, _ := snap.Index().Attributes()
	sc, err := livedelta.NewSchema(snap.Schema(), fields)
	if err != nil {
		s.t.Fatal(err)
	}
	return &view{snap, r, sc}
}

type baseTarget struct{ r *query.SnapshotReader }

func (b baseTarget) Base() livedelta.Base     { return b.r }
func (b baseTarget) Publish(*livedelta.State) {}

// writer opens the dataset's write path as a server does: the log,
// replayed from its checkpoint.
func (s *compactScript) writer(v *view) *live.Writer {
	cp, err := v.snap.Dataset.WALCheckpoint()
	if err != nil {
		s.t.Fatal(err)
	}
	w, _, err := live.Open(filepath.Join(s.dir, dataset.WALDir), v.sc, cp.Folded, baseTarget{v.r}, live.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	return w
}

func (s *compactScript) write(d *datadriven.Directive) string {
	rows := s.parseRows(d)
	v := s.open()
	w := s.writer(v)
	defer w.Close()
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil))
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.id)
		b.Field(1).(*array.StringBuilder).Append(r.period)
		b.Field(2).(*array.Float64Builder).Append(r.value)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	norm, err := livedelta.Normalize(context.Background(), memory.DefaultAllocator, v.sc, rec, 0, v.r)
	if err != nil {
		return "error: " + err.Error()
	}
	defer norm.Release()
	ack, err := w.Put(context.Background(), norm)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("logged %d row(s), durable through %v", ack.Rows, wal.PositionFromUint64(ack.WALPosition))
}

// rows prints every row of a view, series by series.
func (s *compactScript) rows(withLog bool) string {
	v := s.open()
	var r query.Reader = v.r
	head := fmt.Sprintf("snapshot %d", v.snap.ID())
	if withLog {
		w := s.writer(v)
		defer w.Close()
		r = query.NewComposite(v.r, w.State())
		head += fmt.Sprintf(" + %d logged row(s) replayed", w.State().Rows())
	}
	sel, err := r.Select(query.Selector{Kind: query.ByPrefix})
	if err != nil {
		s.t.Fatal(err)
	}
	out := []string{head}
	var ps []query.Piece
	for k := 0; k < sel.Len(); k++ {
		code := sel.Code(k)
		ps, err = r.Rows(code, query.AllPeriods, ps[:0])
		if err != nil {
			s.t.Fatal(err)
		}
		for _, p := range ps {
			periods := p.Rec.Column(datafile.ColumnPeriod).(*array.Date32)
			vals := p.Rec.Column(datafile.ColumnValue).(*array.Float64)
			for i := p.Lo; i < p.Hi; i++ {
				out = append(out, fmt.Sprintf("%s %s %s", r.SeriesID(code), periods.Value(int(i)).FormattedString(),
					strconv.FormatFloat(vals.Value(int(i)), 'g', -1, 64)))
			}
		}
	}
	return strings.Join(out, "\n")
}

func (s *compactScript) checkpoint() string {
	log := filepath.Join(s.dir, dataset.WALDir)
	var out string
	c, ok, err := wal.ReadCheckpoint(log)
	switch {
	case err != nil:
		return "error: " + err.Error()
	case !ok:
		out = "no checkpoint"
	default:
		out = fmt.Sprintf("folded through %v by %s", c.Position(), c.Kind)
		if c.SnapshotID != 0 {
			out += fmt.Sprintf(" of snapshot %d", c.SnapshotID)
		}
	}
	info, err := wal.Scan(log, c.Position(), func(wal.Position, []byte) error { return nil })
	if err != nil && !errors.Is(err, wal.ErrPosition) {
		return out + "\nerror: " + err.Error()
	}
	return out + fmt.Sprintf("\n%d records logged, %d after the checkpoint", info.Records, info.After)
}
