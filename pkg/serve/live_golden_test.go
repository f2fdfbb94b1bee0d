package serve

// Golden scripts of the live-write lifecycle (testdata/live/*.txt, run by
// TestLiveScripts): every command goes through a real Flight server on
// loopback, as a client would, and state is only looked at in process
// where no Flight call shows it (the delta's size, a frozen generation).
//
// Commands (dataset LIVE; attributes units and category):
//
//	build             input rows "ID PERIOD VALUE [units=U] [category=C]":
//	                  a lake of them is built into the dataset as a new
//	                  snapshot (a nightly build from the lake); no reload
//	put               input rows "ID PERIOD VALUE [units=U] [category=C]"
//	                  (VALUE may be null), one DoPut; a line ";" starts the
//	                  next batch of the same stream, a line "(no rows)" is a
//	                  batch of no rows. Prints each ack; WAL
//	                  positions are printed as @1, @2, … in order of first
//	                  appearance, so scripts do not depend on record sizes
//	get [args]        DoGet; args: series=A,B prefix=P category=C start=
//	                  end= latest attributes columns=a,b limit=N (no
//	                  selector: every series), or a JSON ticket as input
//	latest [args]     get with latest
//	info [args]       GetFlightInfo of the dataset (or of the query args
//	                  describe), checked against a DoGet of the same rows;
//	                  and the delta held in memory
//	compact           DoAction compact
//	compact async     start a compaction and wait until it has frozen the
//	                  delta (it then blocks if the script holds the lock)
//	compact wait      wait for the compaction started by "compact async"
//	lock, unlock      take / drop the dataset's write lock as a build does
//	reload            DoAction reload
//	build supersede   a build with --supersede-writes; "build no-publish"
//	                  stages the snapshot without publishing it; drop=A,B
//	                  leaves attribute columns out of the lake
//	publish N, rollback N [expect=M]
//	                  snapbuild publish --id N / rollback --to N (with the
//	                  script's lock when it holds one)
//	gc keep=K         snapbuild gc --keep K
//	discard [reason]  DoAction discard
//	history           HISTORY's lines, WAL positions as @n
//	replica start|stop|sync
//	                  a second, --read-only server on the same root; sync
//	                  waits until it has applied the writer's last write.
//	                  get, latest and info take on=replica to ask it
//	crash [garbage=N] [zeros=N]
//	                  stop without a clean shutdown: the WAL's files are
//	                  closed first, so nothing more reaches the disk, a
//	                  running compaction is abandoned, then the process's
//	                  state is dropped. garbage/zeros append N bytes to the
//	                  newest segment (a torn write)
//	replay            (a clean stop if running, then) start the server and
//	                  print what it replayed and warned about
//
// Any command but build, lock and unlock starts the server if it is not
// running.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/datadriven"
	"github.com/energyscope/servingsnap/internal/testlake"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/live"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
	"github.com/energyscope/servingsnap/pkg/verify"
)

const scriptDataset = "LIVE"

func TestLiveScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/live/*.txt", func(t *testing.T, path string) {
		s := newLiveScript(t)
		defer s.close()
		datadriven.RunFile(t, path, s.run)
	})
}

// logRecorder is a slog handler keeping every record, so a script can show
// what the server told its operator (replay, torn tails).
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

type recHandler struct {
	r     *logRecorder
	attrs []slog.Attr
}

func (h recHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.r.mu.Lock()
	h.r.recs = append(h.r.recs, rec)
	h.r.mu.Unlock()
	return nil
}
func (h recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return recHandler{h.r, append(slices.Clip(h.attrs), as...)}
}
func (h recHandler) WithGroup(string) slog.Handler { return h }

func (r *logRecorder) take() []logRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.recs
	r.recs = nil
	return out
}

// liveScript is the state of one script: a dataset root and, while
// running, a server and a client.
type liveScript struct {
	t      *testing.T
	tmp    string
	root   string
	dir    string // root/LIVE
	builds int

	srv    *Server
	cancel context.CancelFunc
	done   chan error
	client flight.Client
	logs   *logRecorder

	labels  map[uint64]string // WAL position → @n
	lock    *dsdir.Writer
	bg      *bgCompact
	replica *replicaState
}

type bgCompact struct {
	cancel context.CancelFunc
	done   chan struct{}
	body   []byte
	err    error
}

func newLiveScript(t *testing.T) *liveScript {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return &liveScript{t: t, tmp: tmp, root: root, dir: filepath.Join(root, scriptDataset),
		labels: map[uint64]string{}, logs: &logRecorder{}}
}

func (s *liveScript) close() {
	s.stopReplica()
	if s.srv != nil {
		s.stop(false)
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

func (s *liveScript) start() error {
	s.logs.take()
	srv, err := New(Config{Root: s.root, Addr: "127.0.0.1:0", Options: Options{Limits: DefaultLimits, Logger: slog.New(recHandler{r: s.logs})}})
	if err != nil {
		return err
	}
	c, err := flight.NewClientWithMiddleware(srv.FlightAddr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.closeListeners()
		srv.svc.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.srv, s.cancel, s.client, s.done = srv, cancel, c, make(chan error, 1)
	go func() { s.done <- srv.Serve(ctx) }()
	return nil
}

// stop ends the server: cleanly, or as a crash (see the commands).
func (s *liveScript) stop(crash bool) {
	if crash {
		for _, d := range s.srv.svc.datasets {
			if w := d.LiveWriter(); w != nil {
				w.Log().Close()
			}
		}
	}
	if s.bg != nil {
		// A compaction still running dies with the process: before it
		// publishes anything, because the script holds the lock it waits
		// for (or it has finished).
		s.bg.cancel()
		if s.lock != nil {
			s.lock.Close()
			s.lock = nil
		}
		<-s.bg.done
		s.bg = nil
	}
	s.client.Close()
	s.cancel()
	if err := <-s.done; err != nil {
		s.t.Errorf("Serve: %v", err)
	}
	s.srv, s.client = nil, nil
}

func (s *liveScript) clean(msg string) string {
	return strings.ReplaceAll(msg, s.root, "ROOT")
}

func (s *liveScript) label(pos uint64) string {
	if l, ok := s.labels[pos]; ok {
		return l
	}
	l := fmt.Sprintf("@%d", len(s.labels)+1)
	s.labels[pos] = l
	return l
}

func (s *liveScript) dataset() *served.Dataset { return s.srv.svc.datasets[scriptDataset] }

func (s *liveScript) run(d *datadriven.Directive) string {
	switch d.Cmd {
	case "build":
		return s.build(d)
	case "publish", "rollback":
		return s.flip(d)
	case "gc":
		return s.gc(d)
	case "history":
		return s.history()
	case "lock":
		ds, err := dsdir.Open(s.dir)
		if err != nil {
			return "error: " + err.Error()
		}
		if s.lock, err = ds.LockForWrite(); err != nil {
			return "error: " + err.Error()
		}
		return "locked"
	case "unlock":
		if s.lock == nil {
			return "not locked"
		}
		s.lock.Close()
		s.lock = nil
		return "unlocked"
	case "replay":
		if s.srv != nil {
			s.stop(false)
		}
		if err := s.start(); err != nil {
			return "error: " + s.clean(err.Error())
		}
		return s.startupReport()
	}
	if s.srv == nil {
		if err := s.start(); err != nil {
			return "error: " + s.clean(err.Error())
		}
	}
	switch d.Cmd {
	case "put":
		return s.put(d)
	case "get":
		return s.get(d, false)
	case "latest":
		return s.get(d, true)
	case "info":
		return s.info(d)
	case "compact":
		return s.compact(d)
	case "reload":
		body, err := s.action("reload")
		if err != nil {
			return errText(err)
		}
		var res struct{ Datasets []ReloadResult }
		if err := json.Unmarshal(body, &res); err != nil {
			return err.Error()
		}
		r := res.Datasets[0]
		if r.Result == ReloadSwapped {
			return fmt.Sprintf("reloaded: snapshot %d (was %d)", r.SnapshotID, r.PreviousID)
		}
		return fmt.Sprintf("%s: snapshot %d", r.Result, r.SnapshotID)
	case "crash":
		return s.crash(d)
	case "discard":
		return s.discard(d)
	case "replica":
		return s.replicaCmd(d)
	}
	s.t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// errText is a status error without the request id its message ends
// with (a new one every run).
func errText(err error) string {
	st := status.Convert(err)
	return fmt.Sprintf("error: %s: %s", st.Code(), requestIDRe.ReplaceAllString(st.Message(), ""))
}

// row is one input row: id, period, value (nil: null), attributes.
type row struct {
	id, period string
	value      *float64
	attrs      map[string]string
}

// scriptAttrs are the attributes a row may give; region is written into
// a build's lake only when a row of it has one (a build that adds a
// column).
var scriptAttrs = []string{"units", "category", "region"}

func parseRows(t *testing.T, d *datadriven.Directive, lines []string) []row {
	var rows []row
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 {
			t.Fatalf("%s: row %q: want ID PERIOD VALUE [k=v ...]", d.Pos, l)
		}
		r := row{id: f[0], period: f[1], attrs: map[string]string{}}
		if f[2] != "null" {
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatalf("%s: row %q: %v", d.Pos, l, err)
			}
			r.value = &v
		}
		for _, kv := range f[3:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || !slices.Contains(scriptAttrs, k) {
				t.Fatalf("%s: row %q: attribute %q: want units=…, category=… or region=…", d.Pos, l, kv)
			}
			r.attrs[k] = v
		}
		rows = append(rows, r)
	}
	return rows
}

// build writes the rows as a lake and builds it into the dataset.
func (s *liveScript) build(d *datadriven.Directive) string {
	rows := parseRows(s.t, d, strings.Split(d.Input, "\n"))
	s.builds++
	lake := filepath.Join(s.tmp, fmt.Sprintf("lake-%d", s.builds))
	var ids, periods, vals []any
	attrs := map[string][]any{}
	for _, r := range rows {
		ids, periods = append(ids, r.id), append(periods, r.period)
		if r.value == nil {
			vals = append(vals, nil)
		} else {
			vals = append(vals, *r.value)
		}
		for _, a := range scriptAttrs {
			if v, ok := r.attrs[a]; ok {
				attrs[a] = append(attrs[a], v)
			} else {
				attrs[a] = append(attrs[a], nil)
			}
		}
	}
	cols := []testlake.Col{
		{Name: "series_id", Vals: ids},
		{Name: "period", Vals: periods},
		{Name: "value", Vals: vals, Typ: arrow.PrimitiveTypes.Float64},
	}
	drop, _ := d.Arg("drop")
	for _, a := range scriptAttrs {
		if slices.Contains(drop, a) {
			continue
		}
		if a != "region" || slices.ContainsFunc(attrs[a], func(v any) bool { return v != nil }) {
			cols = append(cols, testlake.Col{Name: a, Vals: attrs[a], Typ: arrow.BinaryTypes.String})
		}
	}
	testlake.WriteParquet(s.t, lake, "part-0.parquet", 0, cols...)
	opt := sortwrite.Options{Input: lake, Out: s.dir, Parallel: 1}
	for _, a := range d.Args {
		switch a.Key {
		case "supersede":
			opt.SupersedeWrites = true
		case "no-publish":
			opt.NoPublish = true
		case "drop":
		default:
			s.t.Fatalf("%s: build [supersede] [no-publish] [drop=COLUMN,…]", d.Pos)
		}
	}
	sum, err := sortwrite.Build(context.Background(), opt)
	if err != nil {
		return "error: " + s.clean(err.Error())
	}
	out := fmt.Sprintf("built snapshot %d: %d rows, %d series", sum.SnapshotID, sum.Rows, sum.Series)
	if opt.NoPublish {
		out += " (not published)"
	}
	if sum.Superseded != 0 {
		out += "; live writes through " + s.label(sum.Superseded) + " retired"
	}
	return out
}

// record is one DoPut batch of rows; attribute columns are sent when a
// row of the batch has them.
func (s *liveScript) record(rows []row) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	ib, pb, vb := array.NewStringBuilder(mem), array.NewStringBuilder(mem), array.NewFloat64Builder(mem)
	fields := []arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}
	builders := []array.Builder{ib, pb, vb}
	for _, r := range rows {
		ib.Append(r.id)
		pb.Append(r.period)
		if r.value == nil {
			vb.AppendNull()
		} else {
			vb.Append(*r.value)
		}
	}
	for _, a := range scriptAttrs {
		if !slices.ContainsFunc(rows, func(r row) bool { _, ok := r.attrs[a]; return ok }) {
			continue
		}
		b := array.NewStringBuilder(mem)
		for _, r := range rows {
			if v, ok := r.attrs[a]; ok {
				b.Append(v)
			} else {
				b.AppendNull()
			}
		}
		fields = append(fields, arrow.Field{Name: a, Type: arrow.BinaryTypes.String, Nullable: true})
		builders = append(builders, b)
	}
	var cols []arrow.Array
	for _, b := range builders {
		cols = append(cols, b.NewArray())
		b.Release()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows)))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func (s *liveScript) put(d *datadriven.Directive) string {
	var recs []arrow.RecordBatch
	var batch []string
	flush := func() {
		if len(batch) > 0 {
			recs = append(recs, s.record(parseRows(s.t, d, batch)))
		}
		batch = nil
	}
	for _, l := range strings.Split(d.Input, "\n") {
		switch strings.TrimSpace(l) {
		case ";":
			flush()
		case "(no rows)": // a batch of its own with no rows
			flush()
			recs = append(recs, s.record(nil))
		default:
			batch = append(batch, l)
		}
	}
	flush()
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	acks, err := doPut(context.Background(), s.client, scriptDataset, recs...)
	var out []string
	for _, a := range acks {
		out = append(out, fmt.Sprintf("ack: %d rows, durable through %s", a["rows"], s.label(a["wal_position"])))
	}
	if err != nil {
		out = append(out, errText(err))
	}
	return strings.Join(out, "\n")
}

// ticketOf is the ticket a get directive describes.
func (s *liveScript) ticketOf(d *datadriven.Directive, latest bool) map[string]any {
	if d.Input != "" {
		var q map[string]any
		if err := json.Unmarshal([]byte(d.Input), &q); err != nil {
			s.t.Fatalf("%s: ticket: %v", d.Pos, err)
		}
		return q
	}
	q := map[string]any{"dataset": scriptDataset}
	for _, a := range d.Args {
		switch a.Key {
		case "series", "columns":
			q[a.Key] = a.Vals
		case "prefix", "category", "start", "end":
			q[a.Key] = strings.Join(a.Vals, ",")
		case "latest", "attributes":
			q[a.Key] = true
		case "limit", "snapshot":
			n, err := strconv.Atoi(a.Vals[0])
			if err != nil {
				s.t.Fatalf("%s: %s: %v", d.Pos, a.Key, err)
			}
			q[a.Key] = n
		default:
			s.t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
		}
	}
	_, hasS := q["series"]
	_, hasP := q["prefix"]
	_, hasC := q["category"]
	if !hasS && !hasP && !hasC {
		q["prefix"] = ""
	}
	if latest {
		q["latest"] = true
	}
	return q
}

// scriptAnswer is a DoGet's rows rendered one a line, and its snapshot id.
type scriptAnswer struct {
	lines    []string
	ids      []string
	snapshot string
}

func (s *liveScript) doGet(q map[string]any) (*scriptAnswer, error) {
	return s.doGetOn(s.client, q)
}

func (s *liveScript) doGetOn(c flight.Client, q map[string]any) (*scriptAnswer, error) {
	ctx := context.Background()
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: ticket(q)})
	if err != nil {
		return nil, err
	}
	rd, err := flight.NewRecordReader(stream)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	a := &scriptAnswer{}
	a.snapshot, _ = rd.Schema().Metadata().GetValue(MetaSnapshotID)
	for rd.Next() {
		rec := rd.RecordBatch()
		sc := rec.Schema()
		for j := 0; j < int(rec.NumRows()); j++ {
			var cells []string
			for i := 0; i < int(rec.NumCols()); i++ {
				name := sc.Field(i).Name
				v := value(rec.Column(i), j)
				var cell string
				switch v := v.(type) {
				case nil:
					cell = "null"
				case arrow.Date32:
					cell = v.FormattedString()
				case float64:
					cell = strconv.FormatFloat(v, 'g', -1, 64)
				default:
					cell = fmt.Sprint(v)
				}
				switch name {
				case "series_id":
					a.ids = append(a.ids, cell)
				case "period", "value":
				default:
					cell = name + "=" + cell
				}
				cells = append(cells, cell)
			}
			a.lines = append(a.lines, strings.Join(cells, " "))
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	return a, nil
}

func (s *liveScript) get(d *datadriven.Directive, latest bool) string {
	c, d := s.on(d)
	a, err := s.doGetOn(c, s.ticketOf(d, latest))
	if err != nil {
		return errText(err)
	}
	if len(a.lines) == 0 {
		return "(no rows)"
	}
	return strings.Join(a.lines, "\n")
}

// info prints the exact counts a client is told, checks them against the
// rows a DoGet of the same query returns, and shows the delta in memory.
func (s *liveScript) info(d *datadriven.Directive) string {
	ctx := context.Background()
	var desc *flight.FlightDescriptor
	if len(d.Args) == 0 && d.Input == "" {
		desc = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{scriptDataset}}
	} else {
		desc = &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: ticket(s.ticketOf(d, false))}
	}
	fi, err := s.client.GetFlightInfo(ctx, desc)
	if err != nil {
		return errText(err)
	}
	var md struct {
		SnapshotID uint64 `json:"snapshot_id"`
	}
	json.Unmarshal(fi.AppMetadata, &md)
	q := map[string]any{"dataset": scriptDataset, "prefix": ""}
	if desc.Type == flight.DescriptorCMD {
		q = s.ticketOf(d, false)
	}
	a, err := s.doGet(q)
	if err != nil {
		return errText(err)
	}
	series := len(slices.Compact(slices.Clone(a.ids)))
	out := []string{fmt.Sprintf("snapshot %d: %d rows, %d series", md.SnapshotID, fi.TotalRecords, series)}
	if int64(len(a.lines)) != fi.TotalRecords {
		out = append(out, fmt.Sprintf("MISMATCH: GetFlightInfo says %d rows, DoGet returned %d", fi.TotalRecords, len(a.lines)))
	}
	if desc.Type == flight.DescriptorPATH {
		v := acquireView(s.dataset())
		inf := v.Reader().Info()
		v.Release()
		if inf.Series != int64(series) || inf.Rows != fi.TotalRecords {
			out = append(out, fmt.Sprintf("MISMATCH: the view counts %d rows, %d series", inf.Rows, inf.Series))
		}
		if w := s.liveWriter(); w != nil {
			st := settled(w)
			var frozen int64
			for _, r := range st.Frozen() {
				frozen += int64(r.Len())
			}
			line := fmt.Sprintf("delta: %d rows held, %d new", st.Rows(), st.Added())
			if frozen > 0 {
				line += fmt.Sprintf(", %d frozen", frozen)
			}
			out = append(out, line)
		} else {
			out = append(out, "delta: none")
		}
	}
	return strings.Join(out, "\n")
}

// liveWriter is the dataset's write path, nil before its first write.
func (s *liveScript) liveWriter() *live.Writer {
	return s.dataset().LiveWriter()
}

func (s *liveScript) action(kind string) ([]byte, error) {
	return runAction(context.Background(), s.client, kind, scriptDataset)
}

func runAction(ctx context.Context, c flight.Client, kind, body string) ([]byte, error) {
	res, err := c.DoAction(ctx, &flight.Action{Type: kind, Body: []byte(body)})
	if err != nil {
		return nil, err
	}
	r, err := res.Recv()
	if err != nil {
		return nil, err
	}
	for {
		if _, err := res.Recv(); err != nil {
			break
		}
	}
	return r.Body, nil
}

func (s *liveScript) compactText(body []byte) string {
	var res struct{ Datasets []CompactResult }
	if err := json.Unmarshal(body, &res); err != nil {
		return err.Error()
	}
	r := res.Datasets[0]
	if r.Result != "compacted" {
		return fmt.Sprintf("%s: snapshot %d", r.Result, r.SnapshotID)
	}
	if r.Result == "moved" {
		return fmt.Sprintf("moved: CURRENT moved twice under the compaction; the delta stays live over snapshot %d", r.SnapshotID)
	}
	out := fmt.Sprintf("compacted: snapshot %d (parent %d), %d rows; folded %d delta rows through %s",
		r.SnapshotID, r.ParentID, r.Rows, r.DeltaRows, s.label(r.WALPosition))
	if r.Rebased != 0 {
		out += fmt.Sprintf("; rebased: frozen over %d, CURRENT moved", r.Rebased)
	}
	// What a compaction publishes passes snapverify --deep.
	rep, err := verify.Verify(s.dir, verify.Options{SnapshotID: r.SnapshotID, Deep: true})
	switch {
	case err != nil:
		out += "\nsnapverify: " + s.clean(err.Error())
	case !rep.OK:
		for _, f := range rep.Findings {
			out += fmt.Sprintf("\nsnapverify: %+v", f)
		}
	}
	return out
}

func (s *liveScript) compact(d *datadriven.Directive) string {
	switch {
	case len(d.Args) == 0:
		body, err := s.action("compact")
		if err != nil {
			return errText(err)
		}
		return s.compactText(body)
	case d.Args[0].Key == "async":
		ctx, cancel := context.WithCancel(context.Background())
		bg := &bgCompact{cancel: cancel, done: make(chan struct{})}
		s.bg = bg
		go func() {
			defer close(bg.done)
			bg.body, bg.err = runAction(ctx, s.client, "compact", scriptDataset)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-bg.done:
				return "finished before freezing: " + s.compactWait()
			default:
			}
			if w := s.liveWriter(); w != nil {
				if fr := w.State().Frozen(); len(fr) > 0 {
					var n int
					for _, r := range fr {
						n += r.Len()
					}
					return fmt.Sprintf("frozen: %d rows", n)
				}
			}
			time.Sleep(time.Millisecond)
		}
		return "compaction did not freeze in 10 s"
	case d.Args[0].Key == "wait":
		return s.compactWait()
	}
	s.t.Fatalf("%s: compact [async|wait]", d.Pos)
	return ""
}

func (s *liveScript) compactWait() string {
	if s.bg == nil {
		return "no compaction running"
	}
	<-s.bg.done
	bg := s.bg
	s.bg = nil
	if bg.err != nil {
		return errText(bg.err)
	}
	return s.compactText(bg.body)
}

func (s *liveScript) crash(d *datadriven.Directive) string {
	s.stop(true)
	out := []string{"crashed"}
	for _, kind := range []string{"garbage", "zeros"} {
		v, ok := d.ArgOne(kind)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			s.t.Fatalf("%s: %s=%q", d.Pos, kind, v)
		}
		tail := make([]byte, n)
		if kind == "garbage" {
			for i := range tail {
				tail[i] = byte(0xa5 ^ i)
			}
		}
		seg := newestSegment(s.t, filepath.Join(s.dir, WALDir))
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			s.t.Fatal(err)
		}
		f.Write(tail)
		f.Close()
		out = append(out, fmt.Sprintf("appended %d %s bytes to %s", n, kind, filepath.Base(seg)))
	}
	return strings.Join(out, "\n")
}

func newestSegment(t testing.TB, dir string) string {
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no WAL segment in %s: %v", dir, err)
	}
	sort.Strings(segs)
	return segs[len(segs)-1]
}

// startupReport is what the server logged about its WAL at start-up.
func (s *liveScript) startupReport() string {
	var out []string
	replayed := false
	for _, r := range s.logs.take() {
		switch r.msg {
		case "wal replayed":
			replayed = true
			after := "the start of the log"
			if f := parsePosition(r.attrs["checkpoint"]); f != 0 {
				after = s.label(f)
			}
			out = append(out, fmt.Sprintf("replayed %s records (%s rows) after %s", r.attrs["records"], r.attrs["rows"], after))
		case "wal: torn tail cut":
			seg, _ := strconv.ParseUint(r.attrs["segment"], 10, 32)
			off, _ := strconv.ParseUint(r.attrs["offset"], 10, 32)
			out = append(out, fmt.Sprintf("%s: torn tail cut: segment %d at %s, %s bytes", r.level, seg, s.label(seg<<32|off), r.attrs["bytes"]))
		default:
			if r.level >= slog.LevelWarn {
				out = append(out, fmt.Sprintf("%s: %s", r.level, s.clean(r.msg)))
			}
		}
	}
	if !replayed {
		out = append([]string{"replayed nothing"}, out...)
	}
	return strings.Join(out, "\n")
}

// settled is the writer's State once its merger has folded every run it
// would: the rows held count shadowed rows until a merge drops them, so
// without the wait a script's output would depend on the merger's timing.
// A merge that fails leaves its candidate; the wait ends after a while.
func settled(w *live.Writer) *livedelta.State {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := w.State()
		if _, ok := st.MergeCandidate(); !ok || time.Now().After(deadline) {
			return st
		}
		time.Sleep(time.Millisecond)
	}
}
