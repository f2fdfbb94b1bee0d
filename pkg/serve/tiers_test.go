package serve

// Tiered snapshots served (docs/OPERATIONS.md "Tiered snapshots"): the
// oracle is the same lake built all hot (HOT), served by the same server,
// never the read path's own helpers: every tiered build must answer every
// ticket exactly as HOT does, before and after live writes and compaction.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/compact"
	dsdir "github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// tierRoot builds the tiered lake (testsnap.TieredLake) into a fresh root:
// HOT and one dataset per testsnap.TierCases entry.
func tierRoot(t *testing.T) (string, []testsnap.TierCase) {
	t.Helper()
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	testsnap.TieredLake(t, lake)
	root := filepath.Join(dir, "root")
	return root, testsnap.BuildTiers(t, lake, root, 700)
}

// tierTickets are the queries compared: full history, recent only, a
// range straddling the hot-since window, old rows only, latest values
// (whole range: from the index; bounded: from the rows, some of whose
// latest non-null lies in cold rows), a category with attributes, and a
// limit.
func tierTickets(ds string) map[string]map[string]any {
	q := func(kv ...any) map[string]any {
		m := map[string]any{"dataset": ds}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	return map[string]map[string]any{
		"full history":       q("prefix", ""),
		"recent only":        q("prefix", "", "start", "2024-06"),
		"straddling":         q("prefix", "", "start", "2022-10", "end", "2023-03"),
		"old only, a list":   q("series", []string{"T001", "T003", "T013", "T017", "T050"}, "end", "2020-06"),
		"one series":         q("series", []string{"T021"}),
		"latest":             q("prefix", "", "latest", true),
		"latest before 2023": q("prefix", "", "latest", true, "end", "2022-12"),
		"category":           q("category", "Cat/1", "attributes", true, "start", "2021-01"),
		"limit":              q("prefix", "", "start", "2022", "limit", 150),
	}
}

// answerText renders a DoGet answer, every column of every row.
func answerText(r *result) string {
	var b strings.Builder
	for i := range r.ids {
		for _, f := range r.schema.Fields() {
			fmt.Fprintf(&b, "%v ", r.cols[f.Name][i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// sameAsHot runs every ticket against HOT and against ds and compares.
func sameAsHot(t *testing.T, ctx context.Context, c flight.Client, ds string) {
	t.Helper()
	hot := tierTickets("HOT")
	for name, q := range tierTickets(ds) {
		want, err := get(ctx, c, ticket(hot[name]))
		if err != nil {
			t.Fatalf("HOT %s: %v", name, err)
		}
		if len(want.ids) == 0 {
			t.Fatalf("HOT %s: no rows (a comparison that cannot fail)", name)
		}
		got, err := get(ctx, c, ticket(q))
		if err != nil {
			t.Fatalf("%s %s: %v", ds, name, err)
		}
		if w, g := answerText(want), answerText(got); w != g {
			t.Errorf("%s %s: %d rows differ from HOT's %d", ds, name, len(got.ids), len(want.ids))
		}
	}
}

// TestTieredDoGet: each tiered build (hot-since, hot-rows, both, --format
// vortex) answers every ticket as the all-hot build does, with a small
// batch budget (pieces split and coalesced, cold and hot in one batch)
// and a checked allocator that must end at zero; status says which
// datasets are tiered and the cold-cache metrics move.
func TestTieredDoGet(t *testing.T) {
	root, cases := tierRoot(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	lim := DefaultLimits
	lim.BatchBytes = 2048
	srv := startServer(t, Config{Root: root, HTTPAddr: "127.0.0.1:0", Options: Options{Allocator: mem, Limits: lim, ColdCacheBytes: 1 << 20}})
	c := dial(t, srv)
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			sameAsHot(t, ctx, c, tc.Name)
			sameAsHot(t, ctx, c, tc.Name) // again: from the cache
			mem.AssertSize(t, 0)
		})
	}
	st := statusOf(t, c)
	if st.ColdCache == nil || st.ColdCache.BudgetBytes != 1<<20 || st.ColdCache.Hits == 0 || st.ColdCache.Misses == 0 {
		t.Errorf("status cold_cache %+v", st.ColdCache)
	}
	for _, d := range st.Datasets {
		tiered := d.Name != "HOT"
		if d.Tiered != tiered || (d.ColdBytes > 0) != tiered || (d.ColdRows > 0) != tiered {
			t.Errorf("status of %s: tiered %v, cold %d bytes, %d rows", d.Name, d.Tiered, d.ColdBytes, d.ColdRows)
		}
		if d.Name == "VORTEX" && d.ColdRows != d.Rows {
			t.Errorf("VORTEX: %d cold rows of %d", d.ColdRows, d.Rows)
		}
	}
	m := scrape(t, "http://"+srv.HTTPAddr().String()+"/metrics")
	if m["servingsnap_cold_cache_hits_total"] != float64(st.ColdCache.Hits) && m["servingsnap_cold_cache_hits_total"] == 0 {
		t.Errorf("metrics: hits %v", m["servingsnap_cold_cache_hits_total"])
	}
	for _, name := range []string{"servingsnap_cold_cache_bytes", "servingsnap_cold_cache_misses_total", "servingsnap_cold_cache_budget_bytes"} {
		if m[name] <= 0 {
			t.Errorf("metrics: %s = %v", name, m[name])
		}
	}
	if _, ok := m["servingsnap_cold_cache_evictions_total"]; !ok {
		t.Error("metrics lack servingsnap_cold_cache_evictions_total")
	}
}

// TestTieredDoGetNoCache: --cold-cache 0 serves the same answers (every
// cold read decodes), with the cache metrics at zero and no cold_cache in
// status.
func TestTieredDoGetNoCache(t *testing.T) {
	root, _ := tierRoot(t)
	srv := startServer(t, Config{Root: root, HTTPAddr: "127.0.0.1:0"})
	c := dial(t, srv)
	sameAsHot(t, context.Background(), c, "SINCE")
	if st := statusOf(t, c); st.ColdCache != nil {
		t.Errorf("status cold_cache %+v without a cache", st.ColdCache)
	}
	m := scrape(t, "http://"+srv.HTTPAddr().String()+"/metrics")
	if v, ok := m["servingsnap_cold_cache_misses_total"]; !ok || v != 0 {
		t.Errorf("metrics: misses %v %v without a cache", v, ok)
	}
}

var metricLine = regexp.MustCompile(`^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$`)

// scrape reads the unlabelled (or first labelled) value of every metric.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := metricLine.FindStringSubmatch(line); m != nil {
			if _, seen := out[m[1]]; !seen {
				v, _ := strconv.ParseFloat(m[3], 64)
				out[m[1]] = v
			}
		}
	}
	return out
}

// tierPuts are the same live writes for every dataset: revisions of cold
// rows (2019–2020) and of hot rows (2024), nulls over values, rows after
// the last period and inside a gap, and a new series.
func tierPuts() []putRows {
	return []putRows{
		{"series_id": {"T000", "T000", "T001", "T013", "T003"}, "period": {"2019-01", "2024-12", "2019-06", "2020-01", "2021-07"},
			"value": {1.5, 2.5, nil, 13.0, 3.75}},
		{"series_id": {"T007", "T009", "T005", "T005", "T000"}, "period": {"2019-02", "2025-01", "2023-01", "2024-12", "2019-01"},
			"value": {7.5, 9.5, nil, nil, 1.75}},
	}
}

// TestTieredLiveWritesAndCompaction: the same DoPuts into HOT and each
// tiered dataset read the same merged; a compaction of each publishes a
// snapshot that is tiered the same way (manifest version 3, its cold file,
// the build's policy) while HOT's stays untiered, and every answer still
// equals HOT's, then again after a restart on the compacted snapshots.
func TestTieredLiveWritesAndCompaction(t *testing.T) {
	root, cases := tierRoot(t)
	ctx := context.Background()
	srv, stop := runServer(t, Config{Root: root, Addr: "127.0.0.1:0", Options: Options{Limits: DefaultLimits, ColdCacheBytes: 1 << 20}})
	c := dial(t, srv)
	names := []string{"HOT"}
	for _, tc := range cases {
		names = append(names, tc.Name)
	}
	for _, name := range names {
		for _, p := range tierPuts() {
			rec := p.record(t)
			if _, err := doPut(ctx, c, name, rec); err != nil {
				t.Fatalf("put %s: %v", name, err)
			}
			rec.Release()
		}
	}
	// a new series only the delta has (units and category given)
	for _, name := range names {
		rec := putRows{"series_id": {"U000", "U000"}, "period": {"2020-01", "2024-01"}, "value": {100.0, 101.0}, "units": {"new", "new"}, "category": {"Cat/1", "Cat/1"}, "flag": {"n", "n"}}.record(t)
		_, err := doPut(ctx, c, name, rec)
		rec.Release()
		if err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
	}
	for _, tc := range cases {
		sameAsHot(t, ctx, c, tc.Name)
	}
	before := srv.svc.cold.Stats()
	if err := doAction(ctx, c, "compact", ""); err != nil {
		t.Fatal(err)
	}
	// compaction read every series' old rows through a cache of its own:
	// the shared one saw none of it
	if after := srv.svc.cold.Stats(); after.Hits != before.Hits || after.Misses != before.Misses || after.Evictions != before.Evictions {
		t.Errorf("shared cold cache %+v after compaction, %+v before", after, before)
	}
	for _, name := range names {
		d := dsOpen(t, filepath.Join(root, name))
		id, err := d.CurrentID()
		if err != nil || id != 2 {
			t.Fatalf("%s: CURRENT %d %v after compaction, want 2", name, id, err)
		}
		checkTiers(t, d, 2, name != "HOT")
	}
	for _, tc := range cases {
		sameAsHot(t, ctx, c, tc.Name)
	}
	// a restart serves the compacted snapshots alone (the WAL folded in)
	stop()
	srv2 := startServer(t, Config{Root: root, Options: Options{ColdCacheBytes: 1 << 10}})
	c2 := dial(t, srv2)
	for _, tc := range cases {
		sameAsHot(t, ctx, c2, tc.Name)
	}
}

// runServer starts a server that stop ends (before the test does, unlike
// startServer's), so another can open the same root.
func runServer(t *testing.T, cfg Config) (*Server, func()) {
	t.Helper()
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	var once bool
	stop := func() {
		if !once {
			once = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return srv, stop
}

// checkTiers checks snapshot id of d: tiered like vintage 1 (the build),
// or untiered.
func checkTiers(t *testing.T, d *dsdir.Dir, id uint64, tiered bool) {
	t.Helper()
	m, err := d.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Load(1)
	if err != nil {
		t.Fatal(err)
	}
	cf, hasCold := m.FileByRole(manifest.RoleCold)
	want := manifest.Version
	if m.FormatVersion != want || hasCold != tiered {
		t.Errorf("%s snapshot %d: format_version %d, cold file %v; want %d, %v", d.Name, id, m.FormatVersion, hasCold, want, tiered)
	}
	if m.Build.HotSince != b.Build.HotSince || m.Build.HotRows != b.Build.HotRows || m.Build.DataFormat != b.Build.DataFormat {
		t.Errorf("%s snapshot %d: build %+v, the base's %+v", d.Name, id, m.Build, b.Build)
	}
	if tiered && (cf.Rows == 0 || cf.Tier != manifest.TierCold || cf.Format != manifest.FormatVortex) {
		t.Errorf("%s snapshot %d: cold file %+v", d.Name, id, cf)
	}
	if df, _ := m.FileByRole(manifest.RoleData); m.Stats.Rows != df.Rows+cf.Rows {
		t.Errorf("%s snapshot %d: stats %d rows, files %d + %d", d.Name, id, m.Stats.Rows, df.Rows, cf.Rows)
	}
}

// TestTieredOfflineCompaction: `snapbuild compact` (compact.Offline) of a
// tiered dataset with a WAL keeps its tiers and reads like HOT compacted
// the same way.
func TestTieredOfflineCompaction(t *testing.T) {
	root, cases := tierRoot(t)
	ctx := context.Background()
	names := []string{"HOT", cases[0].Name, cases[3].Name} // SINCE, VORTEX
	func() {
		srv, stop := runServer(t, Config{Root: root, Addr: "127.0.0.1:0", Options: Options{Limits: DefaultLimits}})
		defer stop()
		c := dial(t, srv)
		for _, name := range names {
			for _, p := range tierPuts() {
				rec := p.record(t)
				if _, err := doPut(ctx, c, name, rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
			}
		}
	}()
	for _, name := range names {
		res, err := compact.Offline(ctx, filepath.Join(root, name), compact.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkTiers(t, dsOpen(t, filepath.Join(root, name)), res.SnapshotID, name != "HOT")
	}
	srv := startServer(t, Config{Root: root, Options: Options{ColdCacheBytes: 1 << 20}})
	c := dial(t, srv)
	for _, name := range names[1:] {
		sameAsHot(t, ctx, c, name)
	}
}

// TestTieredColdFileDamaged: damage in a served snapshot's cold.vortex
// (which is read, not mapped) found by a query is an error marked corrupt
// naming the file: the dataset is failing, falls back to its previous
// vintage, the other datasets answer; restored, a reload serves it again.
// A new snapshot whose cold file fails its checksum is never served.
func TestTieredColdFileDamaged(t *testing.T) {
	dir := t.TempDir()
	lake := filepath.Join(dir, "lake")
	testsnap.TieredLake(t, lake)
	root := filepath.Join(dir, "root")
	pol, _ := coldfile.PolicyOf("2023-01-01", 0, "")
	tiered := func(o *sortwrite.Options) { o.Tiers = pol }
	testsnap.Build(t, lake, filepath.Join(root, "A"), tiered)
	testsnap.Build(t, lake, filepath.Join(root, "A"), tiered) // vintage 2, served
	testsnap.Build(t, lake, filepath.Join(root, "HOT"), nil)
	srv := startServer(t, Config{Root: root}) // no cache: every query decodes; no poller
	c := dial(t, srv)
	ctx := context.Background()
	full := func(ds string) []byte { return ticket(map[string]any{"dataset": ds, "prefix": ""}) }
	if _, err := get(ctx, c, full("A")); err != nil {
		t.Fatal(err)
	}
	coldPath := func(id uint64) string {
		m, err := dsOpen(t, filepath.Join(root, "A")).Load(id)
		if err != nil {
			t.Fatal(err)
		}
		cf, _ := m.FileByRole(manifest.RoleCold)
		return filepath.Join(root, "A", filepath.FromSlash(cf.Path))
	}
	path := coldPath(2)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage(t, path, orig)
	_, err = get(ctx, c, full("A"))
	if err == nil || !strings.Contains(err.Error(), coldfile.FileName) {
		t.Fatalf("query over the damaged cold file: %v, want an error naming %s", err, coldfile.FileName)
	}
	if code := status.Code(err); code != codes.DataLoss && code != codes.Internal {
		t.Errorf("code %v, want DataLoss or Internal", code)
	}
	if !waitFor(10e9, func() bool { return datasetStatus(t, c, "A").FallbackID == 1 }) {
		t.Fatalf("A did not fall back: %+v", datasetStatus(t, c, "A"))
	}
	st := datasetStatus(t, c, "A")
	if !st.Failing || st.DamagedID != 2 || !strings.Contains(st.FailingReason, coldfile.FileName) {
		t.Errorf("status of A: %+v", st)
	}
	sameAsHotOne(t, ctx, c, "A") // vintage 1 answers
	if _, err := get(ctx, c, full("HOT")); err != nil {
		t.Fatalf("the other dataset: %v", err)
	}
	// restored: a reload re-verifies vintage 2 and serves it
	if err := os.WriteFile(path, orig, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := doAction(ctx, c, "reload", "A"); err != nil {
		t.Fatalf("reload after the restore: %v", err)
	}
	if st := datasetStatus(t, c, "A"); st.Failing || st.SnapshotID != 2 {
		t.Fatalf("after the restore: %+v", st)
	}
	sameAsHotOne(t, ctx, c, "A")

	// vintage 3 published with a damaged cold file: the reload refuses it
	testsnap.Build(t, lake, filepath.Join(root, "A"), tiered)
	p3 := coldPath(3)
	b3, err := os.ReadFile(p3)
	if err != nil {
		t.Fatal(err)
	}
	damage(t, p3, b3)
	err = doAction(ctx, c, "reload", "A")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), coldfile.FileName) {
		t.Errorf("reload of a snapshot with a damaged cold file: %v", err)
	}
	if st := datasetStatus(t, c, "A"); st.SnapshotID != 2 || st.ReloadFailures == 0 {
		t.Errorf("after the refused reload: %+v", st)
	}
	sameAsHotOne(t, ctx, c, "A")
}

// damage rewrites the file at path (the same size) with its middle half's
// bytes flipped.
func damage(t *testing.T, path string, orig []byte) {
	t.Helper()
	bad := append([]byte(nil), orig...)
	for i := len(bad) / 8; i < len(bad)*5/8; i++ {
		bad[i] ^= 0xa5
	}
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sameAsHotOne compares dataset ds's full history with HOT's.
func sameAsHotOne(t *testing.T, ctx context.Context, c flight.Client, ds string) {
	t.Helper()
	want, err := get(ctx, c, ticket(map[string]any{"dataset": "HOT", "prefix": ""}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(ctx, c, ticket(map[string]any{"dataset": ds, "prefix": ""}))
	if err != nil {
		t.Fatalf("%s: %v", ds, err)
	}
	if answerText(want) != answerText(got) {
		t.Errorf("%s: %d rows differ from HOT's %d", ds, len(got.ids), len(want.ids))
	}
}
