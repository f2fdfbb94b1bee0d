package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/compact"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/livedelta"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/wal"
)

// liveRoot builds dataset LIVE: A (3 monthly rows), B (2), attribute units.
func liveRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	testlake.WriteParquet(t, lake, "part-0.parquet", 0,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "A", "A", "B", "B")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2020-01", "2020-02", "2020-03", "2020-01", "2020-02")},
		testlake.Col{Name: "value", Vals: testlake.Floats(1, 2, 3, 10, 11)},
		testlake.Col{Name: "units", Vals: testlake.Strs("u", "u", "u", "v", "v")},
	)
	root := filepath.Join(dir, "root")
	testsnap.Build(t, lake, filepath.Join(root, "LIVE"), nil)
	return root
}

// putRows is one DoPut of one batch; cols are name → values (string ids
// and periods, float64 values, string attributes).
type putRows map[string][]any

func (p putRows) record(t testing.TB) arrow.RecordBatch {
	t.Helper()
	var fields []arrow.Field
	var arrs []arrow.Array
	for _, name := range []string{"series_id", "period", "value", "units", "category", "flag", "bogus"} {
		vals, ok := p[name]
		if !ok {
			continue
		}
		var b array.Builder
		if name == "value" {
			b = array.NewFloat64Builder(memory.DefaultAllocator)
		} else if _, days := vals[0].(arrow.Date32); days {
			b = array.NewDate32Builder(memory.DefaultAllocator)
		} else {
			b = array.NewStringBuilder(memory.DefaultAllocator)
		}
		for _, v := range vals {
			switch v := v.(type) {
			case nil:
				b.AppendNull()
			case float64:
				b.(*array.Float64Builder).Append(v)
			case string:
				b.(*array.StringBuilder).Append(v)
			case arrow.Date32:
				b.(*array.Date32Builder).Append(v)
			}
		}
		fields = append(fields, arrow.Field{Name: name, Type: b.Type(), Nullable: true})
		arrs = append(arrs, b.NewArray())
		b.Release()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, int64(arrs[0].Len()))
	for _, a := range arrs {
		a.Release()
	}
	return rec
}

// doPut sends batches to dataset in one DoPut and returns the acks.
func doPut(ctx context.Context, c flight.Client, dataset string, recs ...arrow.RecordBatch) ([]map[string]uint64, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(recs[0].Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{dataset}})
	var acks []map[string]uint64
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			if errors.Is(err, io.EOF) {
				// the server ended the stream: its status says why
				if _, rerr := stream.Recv(); rerr != nil && !errors.Is(rerr, io.EOF) {
					return acks, rerr
				}
			}
			return acks, fmt.Errorf("write batch %d: %w", len(acks), err)
		}
		r, err := stream.Recv()
		if err != nil {
			return acks, err
		}
		var a map[string]uint64
		if err := json.Unmarshal(r.AppMetadata, &a); err != nil {
			return acks, err
		}
		acks = append(acks, a)
	}
	w.Close()
	stream.CloseSend()
	for {
		if _, err := stream.Recv(); err != nil {
			if status.Code(err) == codes.OK || strings.Contains(err.Error(), "EOF") {
				return acks, nil
			}
			return acks, err
		}
	}
}

// rowsOf renders every row of a DoGet answer as "ID PERIOD VALUE".
func rowsOf(t *testing.T, c flight.Client, q map[string]any) string {
	t.Helper()
	r, err := get(context.Background(), c, ticket(q))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, id := range r.ids {
		v := "null"
		if r.values[i] != nil {
			v = fmt.Sprint(*r.values[i])
		}
		out = append(out, fmt.Sprintf("%s %s %s", id, fmtDay(r.periods[i]), v))
	}
	return strings.Join(out, "\n")
}

func fmtDay(d int32) string { return arrow.Date32(d).FormattedString() }

func TestLiveWritesMergeCompactReplay(t *testing.T) {
	root := liveRoot(t)
	ctx := context.Background()
	all := map[string]any{"dataset": "LIVE", "prefix": ""}

	srv := startServer(t, Config{Root: root})
	c := dial(t, srv)
	rec := putRows{
		"series_id": {"A", "A", "C"},
		"period":    {"2020-02", "2020-04", "2020-01"},
		"value":     {20.0, 4.0, 100.0},
		"units":     {"u", "u", "w"},
	}.record(t)
	acks, err := doPut(ctx, c, "LIVE", rec)
	if err != nil || len(acks) != 1 || acks[0]["rows"] != 3 || acks[0]["wal_position"] == 0 {
		t.Fatalf("put: %v %v", acks, err)
	}
	want := "A 2020-01-01 1\nA 2020-02-01 20\nA 2020-03-01 3\nA 2020-04-01 4\nB 2020-01-01 10\nB 2020-02-01 11\nC 2020-01-01 100"
	if got := rowsOf(t, c, all); got != want {
		t.Fatalf("merged:\n%s\nwant:\n%s", got, want)
	}
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"LIVE"}})
	if err != nil || info.TotalRecords != 7 {
		t.Fatalf("info: %v records, %v", info.GetTotalRecords(), err)
	}
	if got := rowsOf(t, c, map[string]any{"dataset": "LIVE", "prefix": "", "latest": true, "columns": []string{"value"}}); got != "A 2020-04-01 4\nB 2020-02-01 11\nC 2020-01-01 100" {
		t.Errorf("latest:\n%s", got)
	}

	// Refused batches: nothing of them is applied.
	for _, bad := range []struct {
		rows putRows
		msg  string
	}{
		{putRows{"series_id": {"A"}, "period": {"2020-05"}, "value": {1.0}, "bogus": {"x"}}, `column "bogus": unknown column`},
		{putRows{"series_id": {"A", "D"}, "period": {"2020-05", "2020-01"}, "value": {1.0, 2.0}}, `batch 0, row 1, column "series_id": series "D" is new: give its attributes`},
		{putRows{"series_id": {"A", nil}, "period": {"2020-05", "2020-01"}, "value": {1.0, 2.0}}, `row 1, column "series_id": null series id`},
		{putRows{"series_id": {"A"}, "period": {"2020-13"}, "value": {1.0}}, `row 0, column "period"`},
		// date32 holds years far outside 0001-9999; tickets and SQL cannot name them
		{putRows{"series_id": {"A", "A"}, "period": {arrow.Date32(0), arrow.Date32(math.MaxInt32)}, "value": {1.0, 2.0}}, `row 1, column "period": "5881580-07-11": period outside 0001-01-01..9999-12-31`},
		{putRows{"series_id": {"A"}, "period": {arrow.Date32(period.MinDays - 1)}, "value": {1.0}}, `row 0, column "period": "0000-12-31": period outside`},
		{putRows{"series_id": {"B"}, "period": {"2020-05"}, "value": {1.0}, "units": {"zzz"}}, `the dataset says "v"`},
	} {
		_, err := doPut(ctx, c, "LIVE", bad.rows.record(t))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("put %v: %v, want InvalidArgument containing %q", bad.rows, err, bad.msg)
		}
	}
	if got := rowsOf(t, c, all); got != want {
		t.Fatalf("after refused puts:\n%s", got)
	}

	// Compaction folds the delta into snapshot 2; answers do not change.
	res, err := c.DoAction(ctx, &flight.Action{Type: "compact", Body: []byte("LIVE")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := res.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Body), `"result":"compacted"`) || !strings.Contains(string(r.Body), `"snapshot_id":2`) {
		t.Fatalf("compact: %s", r.Body)
	}
	if got := rowsOf(t, c, all); got != want {
		t.Fatalf("after compact:\n%s", got)
	}
	s2, err := snapshot.OpenID(filepath.Join(root, "LIVE"), 2, snapshot.Options{VerifyData: true})
	if err != nil {
		t.Fatal(err)
	}
	if s2.Manifest.Stats.Rows != 7 || s2.Manifest.WALPosition != acks[0]["wal_position"] {
		t.Errorf("snapshot 2: %d rows, wal_position %d (acked %d)", s2.Manifest.Stats.Rows, s2.Manifest.WALPosition, acks[0]["wal_position"])
	}
	s2.Close()

	// A write after the compaction survives a restart: it is replayed.
	if _, err := doPut(ctx, c, "LIVE", putRows{"series_id": {"B"}, "period": {"2020-03"}, "value": {12.0}}.record(t)); err != nil {
		t.Fatal(err)
	}
	srv.svc.Close()
	srv2 := startServer(t, Config{Root: root})
	c2 := dial(t, srv2)
	want2 := strings.Replace(want, "B 2020-02-01 11", "B 2020-02-01 11\nB 2020-03-01 12", 1)
	if got := rowsOf(t, c2, all); got != want2 {
		t.Fatalf("after restart:\n%s\nwant:\n%s", got, want2)
	}

	// With the server gone, snapbuild compact folds the replayed write.
	if _, err := compact.Offline(ctx, filepath.Join(root, "LIVE"), compact.Options{}); err == nil {
		t.Fatal("offline compaction ran while a server holds the WAL")
	}
	srv2.svc.Close()
	out, err := compact.Offline(ctx, filepath.Join(root, "LIVE"), compact.Options{})
	if err != nil || out.SnapshotID != 3 || out.Rows != 8 {
		t.Fatalf("offline compact: %+v, %v", out, err)
	}
	if _, err := compact.Offline(ctx, filepath.Join(root, "LIVE"), compact.Options{}); !errors.Is(err, compact.ErrNothing) {
		t.Fatalf("second offline compact: %v, want nothing to do", err)
	}
	srv3 := startServer(t, Config{Root: root})
	if got := rowsOf(t, dial(t, srv3), all); got != want2 {
		t.Fatalf("after offline compaction:\n%s", got)
	}
}

// TestCompactionInBatches: a compaction writes its data file a batch
// behind its merge, on a goroutine of its own. With one series a batch,
// every series goes through that hand-off; a compaction cancelled between
// two batches publishes nothing and leaves no staged files, and the next
// one folds in every row.
func TestCompactionInBatches(t *testing.T) {
	root := liveRoot(t)
	dir := filepath.Join(root, "LIVE")
	ctx := context.Background()
	all := map[string]any{"dataset": "LIVE", "prefix": ""}
	srv := startServer(t, Config{Root: root})
	c := dial(t, srv)
	if _, err := doPut(ctx, c, "LIVE", putRows{
		"series_id": {"A", "B", "C", "D"},
		"period":    {"2020-02", "2020-03", "2020-01", "2020-05"},
		"value":     {20.0, 12.0, 100.0, 7.0},
		"units":     {"u", "v", "w", "x"},
	}.record(t)); err != nil {
		t.Fatal(err)
	}
	want := rowsOf(t, c, all)
	srv.svc.Close()

	cctx, cancel := context.WithCancel(ctx)
	yields := 0
	_, err := compact.Offline(cctx, dir, compact.Options{BatchRows: 1, Yield: func() {
		if yields++; yields == 2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled compaction: %v, want context.Canceled", err)
	}
	ds, err := dsdir.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := ds.CurrentID(); err != nil || cur != 1 {
		t.Fatalf("after a cancelled compaction CURRENT is %d (%v), want 1", cur, err)
	}
	if staged, _ := os.ReadDir(ds.Path(dsdir.TmpDir)); len(staged) != 0 {
		t.Errorf("a cancelled compaction left %d staged directories behind", len(staged))
	}

	yields = 0
	res, err := compact.Offline(ctx, dir, compact.Options{BatchRows: 1, Yield: func() { yields++ }})
	if err != nil || res.SnapshotID != 2 || res.Series != 4 || res.Rows != 8 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if yields != 4 {
		t.Errorf("%d batches written, want one per series (4)", yields)
	}
	s2, err := snapshot.OpenID(dir, 2, snapshot.Options{VerifyData: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := s2.Manifest.Files[0].Batches; s2.Manifest.Files[0].Role == manifest.RoleData && n != 4 {
		t.Errorf("data file of %d batches, want 4", n)
	}
	s2.Close()
	srv2 := startServer(t, Config{Root: root})
	if got := rowsOf(t, dial(t, srv2), all); got != want {
		t.Fatalf("after compaction:\n%s\nwant:\n%s", got, want)
	}
}

// TestDiscardedDeltaAndWritesAfter: `snapbuild compact --discard` sets the
// WAL aside; the next server serves the snapshot alone and takes writes
// again into a new log that starts after what the snapshot folded in.
func TestDiscardedDeltaAndWritesAfter(t *testing.T) {
	root := liveRoot(t)
	ctx := context.Background()
	all := map[string]any{"dataset": "LIVE", "series": []string{"A"}}
	srv := startServer(t, Config{Root: root})
	c := dial(t, srv)
	if _, err := doPut(ctx, c, "LIVE", putRows{"series_id": {"A"}, "period": {"2020-04"}, "value": {4.0}}.record(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.svc.Compact(ctx, "LIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := doPut(ctx, c, "LIVE", putRows{"series_id": {"A"}, "period": {"2020-05"}, "value": {5.0}}.record(t)); err != nil {
		t.Fatal(err)
	}
	srv.svc.Close()
	moved, err := compact.Discard(filepath.Join(root, "LIVE"), "test", "", time.Now())
	if err != nil || !strings.Contains(moved, "wal.discarded-") {
		t.Fatalf("discard: %q, %v", moved, err)
	}
	srv2 := startServer(t, Config{Root: root})
	c2 := dial(t, srv2)
	want := "A 2020-01-01 1\nA 2020-02-01 2\nA 2020-03-01 3\nA 2020-04-01 4"
	if got := rowsOf(t, c2, all); got != want {
		t.Fatalf("after discard:\n%s\nwant:\n%s", got, want)
	}
	if _, err := doPut(ctx, c2, "LIVE", putRows{"series_id": {"A"}, "period": {"2020-06"}, "value": {6.0}}.record(t)); err != nil {
		t.Fatalf("write after discard: %v", err)
	}
	srv2.svc.Close()
	srv3 := startServer(t, Config{Root: root})
	if got := rowsOf(t, dial(t, srv3), all); got != want+"\nA 2020-06-01 6" {
		t.Fatalf("after restart:\n%s", got)
	}
}

// TestCompactionByThreshold: with --compact-rows the server folds the delta
// by itself once it holds that many rows.
func TestCompactionByThreshold(t *testing.T) {
	root := liveRoot(t)
	srv := startServer(t, Config{Root: root, Options: Options{Compact: CompactPolicy{Rows: 3}}})
	c := dial(t, srv)
	ctx := context.Background()
	if _, err := doPut(ctx, c, "LIVE", putRows{"series_id": {"A", "A"}, "period": {"2020-04", "2020-05"}, "value": {4.0, 5.0}}.record(t)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if id := acquireView(srv.svc.datasets["LIVE"]); id.ID() != 1 {
		t.Fatalf("compacted below the threshold: serving %d", id.ID())
	} else {
		id.Release()
	}
	if _, err := doPut(ctx, c, "LIVE", putRows{"series_id": {"B"}, "period": {"2020-03"}, "value": {12.0}}.record(t)); err != nil {
		t.Fatal(err)
	}
	d := srv.svc.datasets["LIVE"]
	if !waitFor(10*time.Second, func() bool { v := acquireView(d); defer v.Release(); return v.ID() == 2 }) {
		t.Fatal("no compaction at 3 delta rows")
	}
	if st := dsStatus(d).Delta; st == nil || st.Compactions != 1 || st.Rows != 0 {
		t.Fatalf("delta status after the compaction: %+v", st)
	}
	if got := rowsOf(t, c, map[string]any{"dataset": "LIVE", "series": []string{"A", "B"}}); !strings.HasSuffix(got, "A 2020-05-01 5\nB 2020-01-01 10\nB 2020-02-01 11\nB 2020-03-01 12") {
		t.Fatalf("rows after the compaction:\n%s", got)
	}
}

// TestTooLargeStatus: a write over the log's record limit reaches the
// client as ResourceExhausted, saying what to do.
func TestTooLargeStatus(t *testing.T) {
	err := fmt.Errorf("dataset %q: batch %d: %w", "LIVE", 3, fmt.Errorf("live: a write of 1000000 rows is 40000000 bytes in the log: %w", wal.ErrTooLarge))
	st := status.Convert(toStatus(err))
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "batch 3") || !strings.Contains(st.Message(), "fewer rows") {
		t.Fatalf("%v: %s", st.Code(), st.Message())
	}
}

// TestPutBatchOfMaxPutRows: one DoPut batch of --max-put-rows rows of the
// documented schema (series_id, period, value) is accepted with the
// default limits: gRPC's receive limit follows --max-put-bytes, not its
// own 4 MiB default (which held about 260k such rows).
func TestPutBatchOfMaxPutRows(t *testing.T) {
	root := liveRoot(t)
	ctx := context.Background()
	srv := startServer(t, Config{Root: root})
	c := dial(t, srv)
	n := int(DefaultLimits.MaxPutRows)
	ids := array.NewStringBuilder(memory.DefaultAllocator)
	days := array.NewDate32Builder(memory.DefaultAllocator)
	vals := array.NewFloat64Builder(memory.DefaultAllocator)
	defer ids.Release()
	defer days.Release()
	defer vals.Release()
	for i := 0; i < n; i++ {
		id, d := "A", i/2
		if i%2 == 1 {
			id = "B"
		}
		ids.Append(id)
		days.Append(arrow.Date32(int32(d) - 300_000))
		vals.Append(float64(i))
	}
	cols := []arrow.Array{ids.NewArray(), days.NewArray(), vals.NewArray()}
	sc := arrow.NewSchema([]arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}, {Name: "period", Type: arrow.FixedWidthTypes.Date32}, {Name: "value", Type: arrow.PrimitiveTypes.Float64}}, nil)
	rec := array.NewRecordBatch(sc, cols, int64(n))
	for _, a := range cols {
		a.Release()
	}
	defer rec.Release()
	if sz := livedelta.RecordBytes(rec); sz <= minRecvMsgBytes {
		t.Fatalf("the batch is %d bytes: it must exceed gRPC's 4 MiB default to test anything", sz)
	}
	acks, err := doPut(ctx, c, "LIVE", rec)
	if err != nil || len(acks) != 1 || acks[0]["rows"] != uint64(n) {
		t.Fatalf("put of %d rows: %v %v", n, acks, err)
	}
}

func TestRecvMsgBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ticket int
		put    int64
		want   int
	}{
		{"small limits keep gRPC's 4 MiB", 1 << 10, 1 << 20, minRecvMsgBytes},
		{"the ticket limit", 8 << 20, 1 << 20, 8<<20 + envelopeBytes},
		{"the write budget", 1 << 20, 256 << 20, 256<<20 + envelopeBytes},
		{"an unbounded write budget", 1 << 20, 0, math.MaxInt32},
		{"capped at gRPC's ceiling", 1 << 20, 4 << 30, math.MaxInt32},
	} {
		if got := recvMsgBytes(Limits{MaxTicketBytes: tc.ticket, MaxPutBytes: tc.put}); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestWALFailureIsUnavailable: a write refused because the log failed to
// write (a full disk) is Unavailable, which a client may retry: the log
// heals by itself once the cause is gone.
func TestWALFailureIsUnavailable(t *testing.T) {
	err := fmt.Errorf("dataset %q: batch 0: %w", "LIVE", fmt.Errorf("%w: %w", wal.ErrFailed, syscall.ENOSPC))
	st := status.Convert(toStatus(err))
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "no space left on device") {
		t.Fatalf("%v: %s, want Unavailable naming the cause", st.Code(), st.Message())
	}
}
