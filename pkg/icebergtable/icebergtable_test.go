package icebergtable_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/servingsnap/internal/testiceberg"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/icebergtable"
	"github.com/energyscope/servingsnap/pkg/lake/iceberg"
	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

func portable(o *sortwrite.Options) {
	o.Extra = append(o.Extra, export.PortableStep(export.PortableOptions{}))
}

func sync(t *testing.T, d *dataset.Dir) *icebergtable.Result {
	t.Helper()
	w, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res, err := icebergtable.SyncLocked(context.Background(), d, icebergtable.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// loaded is the table as a reader of the Hadoop catalog sees it.
func loaded(t *testing.T, d *dataset.Dir) *table.Table {
	t.Helper()
	abs, _ := filepath.Abs(d.Dir)
	cat, err := hadoop.NewCatalog("t", filepath.Dir(abs), iceberggo.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(context.Background(), table.Identifier{filepath.Base(abs), icebergtable.TableDir})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// state is what the table says: the vintage of each tag, main's vintage,
// and the vintages that have snapshots.
func state(t *testing.T, tbl *table.Table) (tags map[string]uint64, main uint64, snaps []uint64) {
	t.Helper()
	byID := map[int64]uint64{}
	for _, s := range tbl.Metadata().Snapshots() {
		v, err := strconv.ParseUint(s.Summary.Properties[icebergtable.PropSnapshotID], 10, 64)
		if err != nil {
			t.Fatalf("snapshot %d: summary %v", s.SnapshotID, s.Summary.Properties)
		}
		byID[s.SnapshotID] = v
		snaps = append(snaps, v)
	}
	tags = map[string]uint64{}
	for name, ref := range tbl.Metadata().Refs() {
		if name == icebergtable.MainBranch {
			main = byID[ref.SnapshotID]
			continue
		}
		tags[name] = byID[ref.SnapshotID]
	}
	slices.Sort(snaps)
	return tags, main, snaps
}

// rowsOf counts the rows a scan of ref plans, and the files it reads.
func rowsOf(t *testing.T, tbl *table.Table, ref string) (rows int64, files []string) {
	t.Helper()
	scan, err := tbl.Scan().UseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := scan.PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		rows += task.File.Count()
		files = append(files, task.File.FilePath())
	}
	return rows, files
}

// TestSyncLifecycle: builds, a flip the table missed (a crash between the
// flip and the Iceberg commit), rollback, roll-forward and gc, each
// followed by a sync, leave the table naming exactly the vintages present:
// one snapshot and tag per vintage with a portable copy, main on CURRENT,
// each tag reading its vintage's own file and rows; a second sync changes
// nothing; gc's removals delete no file the dataset still has.
func TestSyncLifecycle(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 30, FromYear: 2020, ToYear: 2024, Seed: 1, RowGroupRows: 4096}); err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(root, "P")
	d, _ := dataset.Open(ds)
	testsnap.Build(t, lake, ds, portable)
	res := sync(t, d)
	if !slices.Equal(res.Added, []uint64{1}) || !slices.Equal(res.Tagged, []uint64{1}) || res.Main != 1 || !res.Changed {
		t.Fatalf("first sync: %+v", res)
	}
	if again := sync(t, d); again.Changed || len(again.Added)+len(again.Tagged)+len(again.Removed) > 0 {
		t.Fatalf("second sync changed the table: %+v", again)
	}
	// Vintage 2 is built, and then 3 without a portable copy; the table
	// learns of them only now (as after a crash before the Iceberg commit).
	testsnap.Build(t, lake, ds, portable)
	testsnap.Build(t, lake, ds, nil)
	res = sync(t, d)
	if !slices.Equal(res.Added, []uint64{2}) || !slices.Equal(res.NoPortable, []uint64{3}) || res.Main != 0 || res.MainNote == "" {
		t.Fatalf("sync after two builds: %+v", res)
	}
	tags, main, snaps := state(t, loaded(t, d))
	if tags[icebergtable.TagName(1)] != 1 || tags[icebergtable.TagName(2)] != 2 || len(tags) != 2 || main != 2 || !slices.Equal(snaps, []uint64{1, 2}) {
		t.Fatalf("tags %v main %d snapshots %v", tags, main, snaps)
	}
	w, err := d.LockForWrite()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Rollback(1, dataset.Change{Tool: "test", Reason: "back"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if res = sync(t, d); res.Main != 1 {
		t.Fatalf("after rollback: %+v", res)
	}
	tbl := loaded(t, d)
	for _, v := range []uint64{1, 2} {
		m, err := d.Load(v)
		if err != nil {
			t.Fatal(err)
		}
		rows, files := rowsOf(t, tbl, icebergtable.TagName(v))
		want := "file://" + filepath.Join(mustAbs(t, ds), dataset.SnapshotPath(v), export.PortableFile)
		if rows != m.Stats.Rows || !slices.Equal(files, []string{want}) {
			t.Errorf("tag of vintage %d: %d rows in %v, want %d rows in %s", v, rows, files, m.Stats.Rows, want)
		}
	}
	if rows, _ := rowsOf(t, tbl, icebergtable.MainBranch); rows != mustLoad(t, d, 1).Stats.Rows {
		t.Errorf("main reads %d rows after the rollback to 1", rows)
	}
	// Roll forward to 2, then gc everything but CURRENT.
	w, _ = d.LockForWrite()
	if _, err := w.Rollback(2, dataset.Change{Tool: "test", Reason: "forward"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.GC(0, false); err != nil {
		t.Fatal(err)
	}
	w.Close()
	res = sync(t, d)
	if !slices.Equal(res.Removed, []uint64{1}) || res.Main != 2 {
		t.Fatalf("after gc: %+v", res)
	}
	tags, main, snaps = state(t, loaded(t, d))
	if len(tags) != 1 || tags[icebergtable.TagName(2)] != 2 || main != 2 || !slices.Equal(snaps, []uint64{2}) {
		t.Fatalf("after gc: tags %v main %d snapshots %v", tags, main, snaps)
	}
	if _, err := os.Stat(filepath.Join(ds, dataset.SnapshotPath(2), export.PortableFile)); err != nil {
		t.Errorf("vintage 2's copy: %v", err)
	}
	if again := sync(t, d); again.Changed {
		t.Fatalf("sync after gc's sync changed the table: %+v", again)
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustLoad(t *testing.T, d *dataset.Dir, id uint64) *manifest.Manifest {
	m, err := d.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSyncREST: the same table kept in a REST catalog (the test catalog of
// internal/testiceberg, which applies commits with iceberg-go's filesystem
// catalog): created by the first sync, followed through a second vintage
// and a rollback, read back through the catalog; a different catalog
// afterwards is refused, and the token is not stored.
func TestSyncREST(t *testing.T) {
	root := t.TempDir()
	lake := filepath.Join(root, "lake")
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{Out: lake, Series: 20, FromYear: 2022, ToYear: 2024, Seed: 2, RowGroupRows: 4096}); err != nil {
		t.Fatal(err)
	}
	wh := filepath.Join(root, "warehouse")
	rc := &testiceberg.RESTCatalog{Warehouse: wh, Token: "tok"}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	ds := filepath.Join(root, "R")
	d, _ := dataset.Open(ds)
	cfg := icebergtable.Config{Catalog: icebergtable.CatalogREST, CatalogURI: srv.URL, Table: "serving.pet", Token: "tok"}
	syncWith := func(c icebergtable.Config) (*icebergtable.Result, error) {
		w, err := d.LockForWrite()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		return icebergtable.SyncLocked(context.Background(), d, c)
	}
	testsnap.Build(t, lake, ds, portable)
	if res, err := syncWith(cfg); err != nil || res.Main != 1 {
		t.Fatalf("first sync: %v %+v", err, res)
	}
	testsnap.Build(t, lake, ds, portable)
	w, _ := d.LockForWrite()
	if _, err := w.Rollback(1, dataset.Change{Tool: "test"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// Later syncs find the catalog in ICEBERG.json; only the token is given.
	if res, err := syncWith(icebergtable.Config{Token: "tok"}); err != nil || res.Main != 1 || len(res.Added) != 1 {
		t.Fatalf("second sync: %v %+v", err, res)
	}
	b, _ := os.ReadFile(filepath.Join(ds, icebergtable.ConfigFile))
	if strings.Contains(string(b), "tok") || !strings.Contains(string(b), srv.URL) {
		t.Errorf("ICEBERG.json: %s", b)
	}
	cat, err := iceberg.RESTCatalog(context.Background(), iceberg.Options{CatalogURI: srv.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(context.Background(), table.Identifier{"serving", "pet"})
	if err != nil {
		t.Fatal(err)
	}
	tags, main, snaps := state(t, tbl)
	if len(tags) != 2 || main != 1 || !slices.Equal(snaps, []uint64{1, 2}) {
		t.Fatalf("REST table: tags %v main %d snapshots %v", tags, main, snaps)
	}
	if rows, _ := rowsOf(t, tbl, icebergtable.TagName(2)); rows != mustLoad(t, d, 2).Stats.Rows {
		t.Errorf("tag 2 reads %d rows", rows)
	}
	reqs := strings.Join(rc.Requests(), "\n")
	if !strings.Contains(reqs, "POST /v1/namespaces/serving/tables\n") || !strings.Contains(reqs, "POST /v1/namespaces/serving/tables/pet") {
		t.Errorf("the table was not created and committed through the catalog:\n%s", reqs)
	}
	if _, err := os.Stat(filepath.Join(ds, icebergtable.TableDir)); err == nil {
		t.Errorf("a REST table left a Hadoop table in the dataset")
	}
	if _, err := syncWith(icebergtable.Config{Catalog: icebergtable.CatalogHadoop}); err == nil || !strings.Contains(err.Error(), "already publishes") {
		t.Errorf("a sync to another catalog: %v", err)
	}
}
