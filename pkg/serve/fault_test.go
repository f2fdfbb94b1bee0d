package serve

// The fault suite (docs/OPERATIONS.md "Faults"): damage to one dataset's
// files under a running server, each case against a real server process
// (the test binary as a server, helpers_test.go), so a crash is a failed
// test and not a dead test binary. In each, the process survives, the
// other dataset keeps answering and the damaged one says why.

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/arrowfile"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// serverProc is a server process started on a root.
type serverProc struct {
	flight string
	http   string
	cmd    *exec.Cmd
	exited chan error
}

// startProc runs the test binary as a server on root: reload polls every
// reload (0: none) and an HTTP listener for /metrics.
func startProc(t *testing.T, root string, reload time.Duration, env ...string) *serverProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+root, helperEnv+"_RELOAD="+reload.String(), helperEnv+"_HTTP=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, exited: make(chan error, 1)}
	br := bufio.NewReader(out)
	for _, dst := range []*string{&p.flight, &p.http} {
		line, err := br.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			t.Fatalf("server process: %v", err)
		}
		*dst = strings.TrimSpace(line)
	}
	go func() { io.Copy(io.Discard, br); p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
		}
	})
	return p
}

// alive fails the test if the server process has exited.
func (p *serverProc) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.exited:
		t.Fatalf("the server process exited: %v", err)
	default:
	}
}

func (p *serverProc) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// datasetStatus is the status action's entry for name.
func datasetStatus(t *testing.T, c flight.Client, name string) DatasetStatus {
	t.Helper()
	for _, d := range statusOf(t, c).Datasets {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no dataset %s in status", name)
	return DatasetStatus{}
}

// faultRoot builds dataset A with vintages snapshots (each the same lake)
// and dataset B with one, and returns the root.
func faultRoot(t *testing.T, vintages int) string {
	t.Helper()
	root := t.TempDir()
	batches := func(o *sortwrite.Options) { o.BatchRows = 2000 }
	lake, ds := testsnap.Sample(t, root, "A", 150, 1, batches)
	for i := 1; i < vintages; i++ {
		testsnap.Build(t, lake, ds, batches)
	}
	testsnap.Sample(t, root, "B", 20, 2, nil)
	for _, l := range []string{"lake-A", "lake-B"} {
		os.RemoveAll(filepath.Join(root, l))
	}
	return root
}

func dataPath(t *testing.T, ds string, id uint64) (string, manifest.File) {
	t.Helper()
	m, err := dsOpen(t, ds).Load(id)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := m.FileByRole(manifest.RoleData)
	return filepath.Join(ds, filepath.FromSlash(f.Path)), f
}

var allOf = func(name string) []byte { return ticket(map[string]any{"dataset": name, "prefix": ""}) }

// TestFaultTruncatedDataFile: A's served data file is truncated under the
// server (SIGBUS on the next read of its mapping). The query that faults
// gets an error; the process lives; B answers; A reports the fault in
// status and metrics and serves its previous vintage.
func TestFaultTruncatedDataFile(t *testing.T) {
	root := faultRoot(t, 2)
	p := startProc(t, root, 0)
	c := dialAddr(t, p.flight)
	ctx := context.Background()
	if _, err := get(ctx, c, allOf("A")); err != nil {
		t.Fatal(err)
	}
	path, f := dataPath(t, filepath.Join(root, "A"), 2)
	os.Chmod(path, 0o644) // published files are read-only; root (an operator's restore) writes anyway
	if err := os.Truncate(path, f.Size/3); err != nil {
		t.Fatal(err)
	}
	_, err := get(ctx, c, allOf("A"))
	if err == nil {
		t.Fatal("a query over a truncated data file succeeded")
	}
	if status.Code(err) != codes.Internal {
		t.Errorf("query error: %v, want Internal", err)
	}
	p.alive(t)
	if r, err := get(ctx, c, allOf("B")); err != nil || len(r.ids) == 0 {
		t.Fatalf("the other dataset: %v", err)
	}
	if !waitFor(10*time.Second, func() bool { return datasetStatus(t, c, "A").FallbackID == 1 }) {
		t.Fatalf("A does not fall back to snapshot 1: %+v", datasetStatus(t, c, "A"))
	}
	st := datasetStatus(t, c, "A")
	// the fault is found either by its address (a memory fault) or, when
	// arrow-go recovered it into an error of its own, by the check of the
	// served files that any unexpected error triggers
	if !st.Failing || st.DamagedID != 2 || st.SnapshotID != 1 || st.Faults < 1 ||
		!strings.Contains(st.FailingReason, "memory fault") && !strings.Contains(st.FailingReason, "data.arrow changed while served") {
		t.Errorf("status of A: %+v", st)
	}
	if b := datasetStatus(t, c, "B"); b.Failing || b.Faults != 0 {
		t.Errorf("status of B: %+v", b)
	}
	r, err := get(ctx, c, allOf("A"))
	if err != nil || metaOf(r.schema, MetaSnapshotID) != "1" || len(r.ids) == 0 {
		t.Fatalf("A after the fallback: %v (snapshot %s)", err, metaOf(r.schema, MetaSnapshotID))
	}
	m := p.metrics(t)
	for _, want := range []string{`servingsnap_dataset_failing{dataset="A"} 1`, `servingsnap_dataset_failing{dataset="B"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(m, `servingsnap_faults_total{dataset="A",kind="memory_fault"} 1`) && !strings.Contains(m, `servingsnap_faults_total{dataset="A",kind="file_changed"} 1`) {
		t.Error("metrics count no fault of A")
	}
	// the operator rolls back to the fallback: CURRENT names a good
	// served snapshot, the failing state ends
	w, err := dsOpen(t, filepath.Join(root, "A")).LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Rollback(1, dsdir.Change{Tool: "fault_test", Reason: "damaged 2"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := doAction(ctx, c, "reload", "A"); err != nil {
		t.Fatal(err)
	}
	if st := datasetStatus(t, c, "A"); st.Failing || st.SnapshotID != 1 {
		t.Errorf("after the rollback to 1: %+v", st)
	}
	p.alive(t)
}

// TestFaultRewrittenInPlace: A's only snapshot's data file is rewritten in
// place (same size, other bytes: a cp over it). The poller sees the change
// before any reader; with no other vintage A is Unavailable, naming the
// file, while B answers; restoring the file and a reload end the failing
// state.
func TestFaultRewrittenInPlace(t *testing.T) {
	root := faultRoot(t, 1)
	p := startProc(t, root, 50*time.Millisecond)
	c := dialAddr(t, p.flight)
	ctx := context.Background()
	path, _ := dataPath(t, filepath.Join(root, "A"), 1)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), orig...)
	for i := len(bad) / 4; i < len(bad)/2; i++ {
		bad[i] ^= 0xa5
	}
	os.Chmod(path, 0o644)
	time.Sleep(10 * time.Millisecond) // a distinct mtime even on coarse clocks
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return datasetStatus(t, c, "A").Failing }) {
		t.Fatalf("A not failing after its data file was rewritten: %+v", datasetStatus(t, c, "A"))
	}
	st := datasetStatus(t, c, "A")
	if st.FallbackID != 0 || !strings.Contains(st.FailingReason, "data.arrow") {
		t.Errorf("status of A: %+v", st)
	}
	_, err = get(ctx, c, allOf("A"))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "is failing") {
		t.Errorf("query of the failing dataset: %v, want Unavailable", err)
	}
	if _, err := get(ctx, c, allOf("B")); err != nil {
		t.Fatalf("the other dataset: %v", err)
	}
	checkHealth(t, p.flight, map[string]healthpb.HealthCheckResponse_ServingStatus{
		"": healthpb.HealthCheckResponse_SERVING, "A": healthpb.HealthCheckResponse_NOT_SERVING, "B": healthpb.HealthCheckResponse_SERVING})
	if !strings.Contains(p.metrics(t), `servingsnap_faults_total{dataset="A",kind="file_changed"} 1`) {
		t.Error("metrics lack the file_changed fault")
	}
	// restore, then an explicit reload re-verifies and serves it again
	if err := os.WriteFile(path, orig, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := doAction(ctx, c, "reload", "A"); err != nil {
		t.Fatalf("reload after the restore: %v", err)
	}
	if st := datasetStatus(t, c, "A"); st.Failing {
		t.Fatalf("A still failing after the restore: %+v", st)
	}
	if _, err := get(ctx, c, allOf("A")); err != nil {
		t.Fatalf("A after the restore: %v", err)
	}
	checkHealth(t, p.flight, map[string]healthpb.HealthCheckResponse_ServingStatus{"A": healthpb.HealthCheckResponse_SERVING})
	p.alive(t)
}

// badIndexOffsets writes vintage 2 of ds: vintage 1's files with one value
// offset of the index's first plain string attribute pointed far past the
// column's data, checksums recomputed (so only structure can tell), and
// flips CURRENT to it. It returns the attribute's name and the ids of two
// series that are not adjacent, the second one's value being the bad one.
func badIndexOffsets(t *testing.T, ds string) (attr string, ids []string) {
	t.Helper()
	d := dsOpen(t, ds)
	m, err := d.Load(1)
	if err != nil {
		t.Fatal(err)
	}
	xf, _ := m.FileByRole(manifest.RoleIndex)
	src := filepath.Join(ds, filepath.FromSlash(xf.Path))
	mp, err := arrowfile.LoadVerified(src, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := mp.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	x, err := index.New(rec)
	if err != nil {
		t.Fatal(err)
	}
	fields, cols := x.Attributes()
	col := -1
	for i, f := range fields {
		if f.Type.ID() == arrow.STRING {
			col = i
			break
		}
	}
	if col < 0 {
		t.Fatalf("no plain string attribute in %v", fields)
	}
	const row = 40
	// the offsets buffer's bytes are in the file as they are in memory
	offs := cols[col].Data().Buffers()[1].Bytes()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, offs)
	if at < 0 || bytes.Contains(b[at+1:], offs) {
		t.Fatal("the attribute's offsets are not once in the index file")
	}
	pos := at + 4*(cols[col].Data().Offset()+row+1)
	ids = []string{x.Entry(3).SeriesID, x.Entry(row).SeriesID}
	rec.Release()
	mp.Close()
	b[pos], b[pos+1], b[pos+2], b[pos+3] = 0x00, 0xff, 0xff, 0x7f // 0x7fffff00
	// vintage 2: the same files, the index changed, checksums recomputed
	dir2 := filepath.Join(ds, filepath.FromSlash(dsdir.SnapshotPath(2)))
	if err := os.MkdirAll(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	m2 := *m
	m2.SnapshotID, m2.ParentID = 2, 1
	m2.Files = nil
	for _, f := range m.Files {
		from := filepath.Join(ds, filepath.FromSlash(f.Path))
		f.Path = strings.Replace(f.Path, dsdir.SnapshotPath(1), dsdir.SnapshotPath(2), 1)
		to := filepath.Join(ds, filepath.FromSlash(f.Path))
		body, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if f.Role == manifest.RoleIndex {
			body = b
		}
		if err := os.WriteFile(to, body, 0o444); err != nil {
			t.Fatal(err)
		}
		h := fileutil.NewHash()
		h.Write(body)
		f.Checksum = fileutil.FormatChecksum(h)
		m2.Files = append(m2.Files, f)
	}
	body, err := manifest.Marshal(&m2)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ds, filepath.FromSlash(dsdir.ManifestPath(2))), body, 0o444); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(ds, dsdir.LeasesDir), 0o755)
	os.WriteFile(filepath.Join(ds, filepath.FromSlash(dsdir.LeasePath(2))), nil, 0o644)
	w, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.SetCurrent(2); err != nil {
		t.Fatal(err)
	}
	return fields[col].Name, ids
}

// TestFaultBadIndexOffsetAtQuery: vintage 2 of A has an index string
// offset far out of bounds (checksums recomputed). Whether the reload
// refuses it (open checks the index's offsets) or serves it, a query with
// attributes over the bad row is an error or an answer from a good
// snapshot, never a crash (arrow-go's compute runs its gather on a
// goroutine no recover reaches); B answers throughout.
func TestFaultBadIndexOffsetAtQuery(t *testing.T) {
	root := faultRoot(t, 1)
	p := startProc(t, root, 0)
	c := dialAddr(t, p.flight)
	ctx := context.Background()
	_, ids := badIndexOffsets(t, filepath.Join(root, "A"))
	rerr := doAction(ctx, c, "reload", "A")
	tk := ticket(map[string]any{"dataset": "A", "series": ids, "attributes": true})
	r, err := get(ctx, c, tk)
	p.alive(t)
	switch {
	case rerr != nil: // refused at open: snapshot 1 is still served
		if err != nil || metaOf(r.schema, MetaSnapshotID) != "1" {
			t.Fatalf("after a refused reload (%v): %v", rerr, err)
		}
	case err == nil:
		t.Fatalf("a query over a bad index offset succeeded from snapshot %s", metaOf(r.schema, MetaSnapshotID))
	default:
		if !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("query error %v does not say corrupt", err)
		}
		if !waitFor(10*time.Second, func() bool { return datasetStatus(t, c, "A").Failing }) {
			t.Errorf("A not failing after a corrupt read: %+v", datasetStatus(t, c, "A"))
		}
	}
	if _, err := get(ctx, c, allOf("B")); err != nil {
		t.Fatalf("the other dataset: %v", err)
	}
	p.alive(t)
}

// TestBadIndexOffsetInMemory: the same damage made to the served index
// after open, whatever open checks: the file is rewritten in place under
// the server, and since a version-2 index is mapped shared, the served
// bytes change with it. The query with attributes is then an error marked
// corrupt, in this process (a panic in arrow-go's compute goroutine would
// end the test binary).
func TestBadIndexOffsetInMemory(t *testing.T) {
	root := faultRoot(t, 1)
	srv := startServer(t, Config{Root: root, Options: Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}})
	c := dial(t, srv)
	d := srv.Service().datasets["A"]
	v := acquireView(d)
	fields, cols := v.Snapshot().Index().Attributes()
	ids := []string{v.Snapshot().Index().Entry(3).SeriesID, v.Snapshot().Index().Entry(40).SeriesID}
	var offsets []byte // a plain string attribute's offsets, as mapped
	for i, f := range fields {
		if f.Type.ID() == arrow.STRING {
			b := cols[i].Data().Buffers()[1].Bytes()
			at := cols[i].Data().Offset() * 4
			offsets = bytes.Clone(b[at : at+42*4])
			break
		}
	}
	v.Release()
	if offsets == nil {
		t.Fatalf("no plain string attribute in %v", fields)
	}
	// Find those offsets in the index file and overwrite entry 41 in place.
	m, err := dsOpen(t, filepath.Join(root, "A")).Load(1)
	if err != nil {
		t.Fatal(err)
	}
	xf, _ := m.FileByRole(manifest.RoleIndex)
	path := filepath.Join(root, "A", filepath.FromSlash(xf.Path))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := bytes.Index(raw, offsets)
	if pos < 0 || bytes.Contains(raw[pos+1:], offsets) {
		t.Fatalf("the attribute's offsets are not found once in %s", path)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte{0x00, 0xff, 0xff, 0x7f} // 0x7fffff00, little-endian
	if _, err := f.WriteAt(bad, int64(pos+41*4)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = get(context.Background(), c, ticket(map[string]any{"dataset": "A", "series": ids, "attributes": true}))
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("query over a bad offset: %v, want a corrupt error", err)
	}
	for _, r := range rootForms(t, root) {
		if strings.Contains(err.Error(), r) {
			t.Errorf("the client's error holds the server's path %s: %v", r, err)
		}
	}
	if _, err := get(context.Background(), c, allOf("B")); err != nil {
		t.Fatal(err)
	}
}

func dsOpen(t *testing.T, ds string) *dsdir.Dir {
	t.Helper()
	d, err := dsdir.Open(ds)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// doAction runs an action to its end; its error is the call's.
func doAction(ctx context.Context, c flight.Client, typ, body string) error {
	st, err := c.DoAction(ctx, &flight.Action{Type: typ, Body: []byte(body)})
	if err != nil {
		return err
	}
	for {
		if _, err := st.Recv(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestPutMalformedArrow: a DoPut batch whose dictionary column's string
// offsets run past its data (well-formed IPC, malformed Arrow) is
// InvalidArgument naming the column; unchecked, decoding the dictionary
// in arrow-go's compute goroutine would end the process.
func TestPutMalformedArrow(t *testing.T) {
	srv := startServer(t, Config{Root: liveRoot(t), Options: Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}})
	c := dial(t, srv)
	mem := memory.DefaultAllocator
	sb := array.NewStringBuilder(mem)
	sb.AppendValues([]string{"u", "v", "w"}, nil)
	dict := sb.NewStringArray()
	defer dict.Release()
	arrow.Int32Traits.CastFromBytes(dict.Data().Buffers()[1].Bytes())[1] = 1 << 30
	ib := array.NewInt32Builder(mem)
	ib.AppendValues([]int32{0, 1}, nil)
	ind := ib.NewInt32Array()
	defer ind.Release()
	units := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, ind, dict)
	defer units.Release()
	base := putRows{"series_id": {"A", "B"}, "period": {"2020-04", "2020-03"}, "value": {4.0, 12.0}}.record(t)
	defer base.Release()
	fields := append(base.Schema().Fields(), arrow.Field{Name: "units", Type: units.DataType(), Nullable: true})
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), append(base.Columns(), units), 2)
	defer rec.Release()
	_, err := doPut(context.Background(), c, "LIVE", rec)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `column "units"`) {
		t.Fatalf("DoPut of malformed Arrow: %v, want InvalidArgument naming the column", err)
	}
	if r, err := get(context.Background(), c, ticket(map[string]any{"dataset": "LIVE", "prefix": ""})); err != nil || len(r.ids) != 5 {
		t.Fatalf("after the refused put: %v", err)
	}
}

// TestPutInvalidUTF8: a DoPut batch whose series ids are not UTF-8 one by
// one (here a character split across two of them, which the values buffer
// as a whole would pass) is InvalidArgument naming the column and row, and
// nothing of it is applied.
func TestPutInvalidUTF8(t *testing.T) {
	srv := startServer(t, Config{Root: liveRoot(t)})
	c := dial(t, srv)
	// (attributes given: the new series are otherwise refused for lacking them)
	rec := putRows{"series_id": {"A", "x\xc3", "\xa9"}, "period": {"2020-04", "2020-03", "2020-02"}, "value": {4.0, 12.0, 1.0}, "units": {"u", "w", "w"}}.record(t)
	defer rec.Release()
	_, err := doPut(context.Background(), c, "LIVE", rec)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `column "series_id"`) || !strings.Contains(err.Error(), "row 1") {
		t.Fatalf("DoPut of a split character: %v, want InvalidArgument naming column series_id and row 1", err)
	}
	if r, err := get(context.Background(), c, ticket(map[string]any{"dataset": "LIVE", "series": []string{"A"}})); err != nil || len(r.periods) != 3 {
		t.Fatalf("after the refused put: %v, %d rows of A", err, len(r.periods))
	}
}
