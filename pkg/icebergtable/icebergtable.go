// Package icebergtable keeps a dataset's vintages as one Iceberg table, so
// that engines which read Iceberg (DuckDB, Spark, Trino, pyiceberg,
// polars) see the same vintages a server answers from, and a rollback.
//
// Each vintage with a portable copy (portable.parquet, FORMAT.md §8) is one
// Iceberg snapshot whose only data file is that copy, referenced where it
// lies (never rewritten); its summary carries the vintage's id, parent and
// lake lineage; the tag vintage-NNNNNN names it; the branch main names
// CURRENT's. The table is by default a file-only Hadoop-catalog table
// inside the dataset directory (DATASET/iceberg), so a dataset stays one
// folder; a REST catalog can hold it instead (Config).
//
// CURRENT is the truth and the table follows it: Sync compares the two
// and commits what differs (new vintages, tags, main, vintages gc
// removed), so it repairs a crash between a flip of CURRENT and the
// Iceberg commit that should follow it, and running it twice changes
// nothing. Snapshots are removed from the metadata only: the files are
// the dataset's, deleted by its gc, and the table says gc.enabled=false so
// that no engine's snapshot expiry deletes them either.
//
// This is the only package of the publishing side that imports
// iceberg-go; the read side (snapshot, query, serve) never links it.
package icebergtable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/lake/iceberg"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// Names inside the dataset directory (docs/FORMAT.md §10).
const (
	// ConfigFile records where the dataset's table is; its presence says
	// the dataset has one, so every later flip (build, publish, rollback,
	// gc) keeps the table in step.
	ConfigFile = "ICEBERG.json"
	// TableDir is the Hadoop table's directory: metadata/ below it holds
	// vN.metadata.json, version-hint.text, the manifest lists and manifests.
	TableDir = "iceberg"
	// TagPrefix + NNNNNN names a vintage's snapshot.
	TagPrefix = "vintage-"
	// MainBranch names CURRENT's snapshot.
	MainBranch = "main"
)

// Snapshot summary properties: which vintage an Iceberg snapshot is.
const (
	PropSnapshotID     = "servingsnap.snapshot-id"
	PropParentID       = "servingsnap.parent-id"
	PropDataset        = "servingsnap.dataset"
	PropCreated        = "servingsnap.created"
	PropLakeKind       = "servingsnap.lake.kind"
	PropLakeLocation   = "servingsnap.lake.location"
	PropLakeSnapshotID = "servingsnap.lake.snapshot-id"
)

// Config says where a dataset's table is: the Hadoop table in TableDir
// (CatalogURI empty), or Table in the REST catalog at CatalogURI.
// Credentials are never stored: Token and Credential come from the
// command line or the environment each time.
type Config struct {
	Catalog    string `json:"catalog"` // "hadoop" or "rest"
	CatalogURI string `json:"uri,omitempty"`
	Table      string `json:"table,omitempty"` // namespace.name in the REST catalog
	Warehouse  string `json:"warehouse,omitempty"`
	Token      string `json:"-"`
	Credential string `json:"-"`
}

// Catalog kinds of Config.
const (
	CatalogHadoop = "hadoop"
	CatalogREST   = "rest"
)

// LoadConfig reads the dataset's ConfigFile; ok is false when there is
// none (the dataset has no table).
func LoadConfig(d *dataset.Dir) (cfg Config, ok bool, err error) {
	b, err := os.ReadFile(d.Path(ConfigFile))
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, false, nil
	}
	if err != nil {
		return Config{}, false, err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return Config{}, false, fmt.Errorf("%s: %w", d.Path(ConfigFile), err)
	}
	if cfg.Catalog != CatalogHadoop && cfg.Catalog != CatalogREST {
		return Config{}, false, fmt.Errorf("%s: catalog %q, want %q or %q", d.Path(ConfigFile), cfg.Catalog, CatalogHadoop, CatalogREST)
	}
	return cfg, true, nil
}

// saveConfigLocked writes ConfigFile (atomically). Requires the dataset's
// write lock.
func saveConfigLocked(d *dataset.Dir, cfg Config) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return fileutil.WriteFileAtomic(d.Path(ConfigFile), append(b, '\n'), 0o644)
}

// Result says what a Sync committed; field names are stable (docs/CLI.md).
type Result struct {
	Dataset string `json:"dataset"`
	// Table is the table's metadata file after the sync.
	Table string `json:"table"`
	// Added are the vintages committed as new Iceberg snapshots, Tagged
	// those whose tag was set, Removed those whose snapshot and tag were
	// removed (the vintage is gone).
	Added   []uint64 `json:"added"`
	Tagged  []uint64 `json:"tagged"`
	Removed []uint64 `json:"removed"`
	// Main is the vintage main names after the sync; 0 when CURRENT has
	// no portable copy (main is then left where it was: MainNote says so).
	Main     uint64 `json:"main"`
	MainNote string `json:"main_note,omitempty"`
	// NoPortable are the vintages without a portable copy: they have no
	// Iceberg snapshot (build them with --portable).
	NoPortable []uint64 `json:"no_portable"`
	// Changed is false when the table already agreed with the dataset.
	Changed bool `json:"changed"`
}

// SyncLocked makes the table agree with the dataset's vintages and CURRENT,
// creating it (and ConfigFile) with cfg on first use; with a zero cfg it
// uses the dataset's ConfigFile, and a dataset without one gets the Hadoop
// table. Requires the dataset's write lock (a *dataset.Writer the caller
// holds), so no flip happens meanwhile.
func SyncLocked(ctx context.Context, d *dataset.Dir, cfg Config) (*Result, error) {
	saved, have, err := LoadConfig(d)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Catalog == "" && have:
		saved.Token, saved.Credential = cfg.Token, cfg.Credential
		cfg = saved
	case cfg.Catalog == "":
		cfg.Catalog = CatalogHadoop
	}
	if have && (saved.Catalog != cfg.Catalog || saved.CatalogURI != cfg.CatalogURI || saved.Table != cfg.Table) {
		return nil, fmt.Errorf("dataset %s already publishes to %s; remove %s to publish elsewhere", d.Name, describe(saved), d.Path(ConfigFile))
	}
	vs, err := vintagesOf(d)
	if err != nil {
		return nil, err
	}
	cur, err := d.CurrentID()
	if err != nil {
		return nil, err
	}
	s, err := openSyncer(ctx, d, cfg, vs)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if !have {
		if err := saveConfigLocked(d, cfg); err != nil {
			return nil, err
		}
	}
	res := &Result{Dataset: d.Name, Added: []uint64{}, Tagged: []uint64{}, Removed: []uint64{}, NoPortable: []uint64{}}
	for _, v := range vs {
		if v.portable == "" {
			res.NoPortable = append(res.NoPortable, v.id)
			continue
		}
		if _, ok := s.byVintage[v.id]; ok {
			continue
		}
		if err := s.commitVintage(ctx, v); err != nil {
			return nil, fmt.Errorf("iceberg table of %s: vintage %d: %w", d.Name, v.id, err)
		}
		res.Added = append(res.Added, v.id)
	}
	if err := s.commitRefs(ctx, vs, cur, res); err != nil {
		return nil, fmt.Errorf("iceberg table of %s: %w", d.Name, err)
	}
	res.Changed = len(res.Added)+len(res.Tagged)+len(res.Removed) > 0 || s.movedMain
	res.Table = s.tbl.MetadataLocation()
	return res, nil
}

func describe(c Config) string {
	if c.Catalog == CatalogREST {
		return fmt.Sprintf("the REST catalog %s (table %s)", c.CatalogURI, c.Table)
	}
	return "its Hadoop table " + TableDir
}

// vintage is what Sync needs of one manifest present.
type vintage struct {
	id       uint64
	m        *manifest.Manifest
	portable string // the portable copy's absolute path; "" if none
}

// vintagesOf lists the dataset's vintages, oldest first. A manifest that
// does not load is an error: Sync would otherwise drop its snapshot.
func vintagesOf(d *dataset.Dir) ([]vintage, error) {
	list, err := d.Vintages()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(d.Dir)
	if err != nil {
		return nil, err
	}
	var out []vintage
	for _, v := range list {
		if v.Error != "" {
			return nil, fmt.Errorf("vintage %d: %s", v.ID, v.Error)
		}
		x := vintage{id: v.ID, m: v.Manifest}
		if f, ok := v.Manifest.FileByRole(manifest.RolePortable); ok {
			x.portable = filepath.Join(abs, filepath.FromSlash(f.Path))
		}
		out = append(out, x)
	}
	return out, nil
}

// syncer is one Sync's view of the table.
type syncer struct {
	d         *dataset.Dir
	cat       catalog.Catalog
	ident     table.Identifier
	tbl       *table.Table
	byVintage map[uint64]int64 // vintage -> Iceberg snapshot id
	movedMain bool
}

func (s *syncer) close() {
	if c, ok := s.cat.(interface{ Close() error }); ok {
		c.Close()
	}
}

// openSyncer opens the table, or creates it with the schema of the first
// vintage that has a portable copy.
func openSyncer(ctx context.Context, d *dataset.Dir, cfg Config, vs []vintage) (*syncer, error) {
	s := &syncer{d: d, byVintage: map[uint64]int64{}}
	var err error
	switch cfg.Catalog {
	case CatalogREST:
		if s.cat, err = iceberg.RESTCatalog(ctx, iceberg.Options{CatalogURI: cfg.CatalogURI, Warehouse: cfg.Warehouse, Token: cfg.Token, Credential: cfg.Credential}); err != nil {
			return nil, err
		}
		if s.ident, err = iceberg.Identifier(cfg.Table); err != nil {
			return nil, err
		}
	default:
		// The warehouse is the dataset's parent, the namespace the dataset
		// directory itself, the table TableDir: the table lands in
		// DATASET/iceberg and nothing is written outside the dataset.
		abs, err := filepath.Abs(d.Dir)
		if err != nil {
			return nil, err
		}
		if s.cat, err = hadoop.NewCatalog("servingsnap", filepath.Dir(abs), iceberggo.Properties{}); err != nil {
			return nil, err
		}
		s.ident = table.Identifier{filepath.Base(abs), TableDir}
	}
	exists, err := s.cat.CheckTableExists(ctx, s.ident)
	if err != nil {
		return nil, fmt.Errorf("iceberg table %v: %w", s.ident, err)
	}
	if exists {
		if s.tbl, err = s.cat.LoadTable(ctx, s.ident); err != nil {
			return nil, fmt.Errorf("iceberg table %v: %w", s.ident, err)
		}
	} else if err := s.create(ctx, vs); err != nil {
		return nil, err
	}
	for snap := range snapshots(s.tbl) {
		if v, ok := vintageOf(snap); ok {
			s.byVintage[v] = snap.SnapshotID
		}
	}
	return s, nil
}

func snapshots(tbl *table.Table) func(func(table.Snapshot) bool) {
	return func(yield func(table.Snapshot) bool) {
		for _, snap := range tbl.Metadata().Snapshots() {
			if !yield(snap) {
				return
			}
		}
	}
}

// vintageOf reads the vintage id an Iceberg snapshot's summary carries.
func vintageOf(snap table.Snapshot) (uint64, bool) {
	if snap.Summary == nil {
		return 0, false
	}
	id, err := strconv.ParseUint(snap.Summary.Properties[PropSnapshotID], 10, 64)
	return id, err == nil && id > 0
}

// create makes the table: the schema of the first vintage with a portable
// copy, sorted by (series_id, period), unpartitioned, format version 2,
// gc.enabled=false.
func (s *syncer) create(ctx context.Context, vs []vintage) error {
	var first *vintage
	for i := range vs {
		if vs[i].portable != "" {
			first = &vs[i]
			break
		}
	}
	if first == nil {
		return fmt.Errorf("dataset %s has no vintage with a portable copy to start its Iceberg table from (build with --portable)", s.d.Name)
	}
	sc, err := portableSchema(first.portable)
	if err != nil {
		return err
	}
	isc, err := table.ArrowSchemaToIcebergWithFreshIDs(sc, false)
	if err != nil {
		return fmt.Errorf("schema of %s: %w", first.portable, err)
	}
	if _, hadoopCat := s.cat.(*hadoop.Catalog); hadoopCat {
		if err := s.cat.CreateNamespace(ctx, s.ident[:len(s.ident)-1], nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return fmt.Errorf("iceberg namespace %v: %w", s.ident[:len(s.ident)-1], err)
		}
	}
	props := iceberggo.Properties{
		"format-version": "2",
		// The data files are the dataset's: its gc deletes them, never an
		// engine's snapshot expiry.
		"gc.enabled":                      "false",
		table.DefaultNameMappingKey:       nameMappingJSON(nil, isc),
		"servingsnap.dataset":             s.d.Name,
		"write.parquet.compression-codec": "zstd",
	}
	tbl, err := s.cat.CreateTable(ctx, s.ident, isc, catalog.WithProperties(props))
	if err != nil {
		return fmt.Errorf("create iceberg table %v: %w", s.ident, err)
	}
	// The sort order refers to the created schema's field ids.
	order, err := sortOrder(tbl.Schema())
	if err != nil {
		return err
	}
	tx := tbl.NewTransaction()
	if err := tx.ReplaceSortOrder(order); err != nil {
		return fmt.Errorf("iceberg sort order: %w", err)
	}
	if s.tbl, err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("iceberg sort order: %w", err)
	}
	return nil
}

// sortOrder is (series_id, period) ascending: how every portable copy is
// sorted (FORMAT.md §8).
func sortOrder(sc *iceberggo.Schema) (table.SortOrder, error) {
	var fields []table.SortField
	for _, name := range []string{"series_id", "period"} {
		f, ok := sc.FindFieldByName(name)
		if !ok {
			return table.SortOrder{}, fmt.Errorf("the table has no column %q to sort by", name)
		}
		fields = append(fields, table.SortField{SourceIDs: []int{f.ID}, Transform: iceberggo.IdentityTransform{}, Direction: table.SortASC, NullOrder: table.NullsFirst})
	}
	return table.NewSortOrder(1, fields)
}

// portableSchema is the Arrow schema a portable copy's footer stores.
func portableSchema(path string) (*arrow.Schema, error) {
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer pf.Close()
	sc, err := pqarrow.FromParquet(pf.MetaData().Schema, nil, pf.MetaData().KeyValueMetadata())
	if err != nil {
		return nil, fmt.Errorf("%s: schema: %w", path, err)
	}
	// The answer's metadata (snapshot id, dataset) is per vintage, not the
	// table's.
	return arrow.NewSchema(sc.Fields(), nil), nil
}

// commitVintage commits v as one snapshot on main: its portable copy
// replaces every data file main had, with the table's schema evolved to
// the copy's first.
func (s *syncer) commitVintage(ctx context.Context, v vintage) error {
	sc, err := portableSchema(v.portable)
	if err != nil {
		return err
	}
	tx := s.tbl.NewTransaction()
	if err := evolveSchema(tx, s.tbl, sc); err != nil {
		return err
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return err
	}
	fs, err := staged.FS(ctx)
	if err != nil {
		return err
	}
	spec := staged.Spec()
	df, err := table.FileToDataFile(ctx, fs, "file://"+v.portable, staged.Schema(), spec, staged.SortOrder().OrderID(), staged.Properties())
	if err != nil {
		return fmt.Errorf("%s: %w", v.portable, err)
	}
	old, err := mainFiles(ctx, s.tbl)
	if err != nil {
		return err
	}
	props := summaryOf(s.d, v)
	if len(old) == 0 {
		err = tx.AddDataFiles(ctx, []iceberggo.DataFile{df}, props)
	} else {
		err = tx.ReplaceDataFilesWithDataFiles(ctx, old, []iceberggo.DataFile{df}, props)
	}
	if err != nil {
		return err
	}
	tbl, err := tx.Commit(ctx)
	if err != nil {
		return err
	}
	s.tbl = tbl
	s.byVintage[v.id] = tbl.CurrentSnapshot().SnapshotID
	s.movedMain = true
	return nil
}

// mainFiles are the data files of main's snapshot (none before the first).
func mainFiles(ctx context.Context, tbl *table.Table) ([]iceberggo.DataFile, error) {
	head := tbl.CurrentSnapshot()
	if head == nil {
		return nil, nil
	}
	tasks, err := tbl.Scan(table.WithSnapshotID(head.SnapshotID)).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan main: %w", err)
	}
	var out []iceberggo.DataFile
	seen := map[string]bool{}
	for _, t := range tasks {
		if !seen[t.File.FilePath()] {
			seen[t.File.FilePath()] = true
			out = append(out, t.File)
		}
	}
	return out, nil
}

// summaryOf is the snapshot summary of vintage v: who it is and where its
// rows came from.
func summaryOf(d *dataset.Dir, v vintage) iceberggo.Properties {
	m := v.m
	p := iceberggo.Properties{
		PropSnapshotID: strconv.FormatUint(v.id, 10),
		PropParentID:   strconv.FormatUint(m.ParentID, 10),
		PropDataset:    d.Name,
		PropCreated:    m.Created,
		PropLakeKind:   m.Lineage.Kind,
	}
	if loc := m.Lineage.Location; loc != "" {
		p[PropLakeLocation] = loc
	} else if m.Lineage.Source != "" {
		p[PropLakeLocation] = m.Lineage.Source
	}
	if m.Lineage.LakeSnapshotID != "" {
		p[PropLakeSnapshotID] = m.Lineage.LakeSnapshotID
	}
	return p
}

// evolveSchema stages the changes that make the table's schema the
// portable copy's: new columns are added, columns the copy lacks are
// dropped, a column whose type changed is dropped and added again. The
// name mapping (how readers match the copies' columns, which carry no
// field ids, to the table's) is extended with the new ids.
func evolveSchema(tx *table.Transaction, tbl *table.Table, sc *arrow.Schema) error {
	cur := tbl.Schema()
	want, err := table.ArrowSchemaToIcebergWithFreshIDs(sc, false)
	if err != nil {
		return err
	}
	var drop, add []iceberggo.NestedField
	for _, f := range cur.Fields() {
		w, ok := want.FindFieldByName(f.Name)
		if !ok || !w.Type.Equals(f.Type) {
			drop = append(drop, f)
		}
	}
	for _, w := range want.Fields() {
		f, ok := cur.FindFieldByName(w.Name)
		if !ok || !w.Type.Equals(f.Type) {
			add = append(add, w)
		}
	}
	if len(drop) == 0 && len(add) == 0 {
		return nil
	}
	if len(drop) > 0 {
		u := tx.UpdateSchema(true, true)
		for _, f := range drop {
			u.DeleteColumn([]string{f.Name})
		}
		if err := u.Commit(); err != nil {
			return fmt.Errorf("evolve the schema: %w", err)
		}
	}
	if len(add) > 0 {
		u := tx.UpdateSchema(true, true)
		for _, f := range add {
			u.AddColumn([]string{f.Name}, f.Type, "", false, nil)
		}
		if err := u.Commit(); err != nil {
			return fmt.Errorf("evolve the schema: %w", err)
		}
	}
	// Keep the copy's column order (series_id, period first).
	staged, err := tx.StagedTable()
	if err != nil {
		return err
	}
	var old iceberggo.NameMapping
	if m := tbl.Metadata().NameMapping(); m != nil {
		old = m
	}
	return tx.SetProperties(iceberggo.Properties{table.DefaultNameMappingKey: nameMappingJSON(old, staged.Schema())})
}

// nameMappingJSON is old's entries extended with sc's fields: a name maps
// to the newest field id that had it, and the names of dropped columns
// keep theirs, so the copies of older vintages still read under their own
// schema.
func nameMappingJSON(old iceberggo.NameMapping, sc *iceberggo.Schema) string {
	byName := map[string]int{}
	for _, f := range old {
		if f.FieldID != nil {
			for _, n := range f.Names {
				byName[n] = *f.FieldID
			}
		}
	}
	for _, f := range sc.Fields() {
		byName[f.Name] = f.ID
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return byName[names[i]] < byName[names[j]] })
	m := make(iceberggo.NameMapping, 0, len(names))
	for _, n := range names {
		id := byName[n]
		m = append(m, iceberggo.MappedField{FieldID: &id, Names: []string{n}})
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// commitRefs sets every vintage's tag, points main at CURRENT's snapshot
// and removes the snapshots and tags of vintages that are gone, in one
// metadata commit guarded by main's snapshot as read (so a writer that
// moved main meanwhile makes it fail rather than be undone).
func (s *syncer) commitRefs(ctx context.Context, vs []vintage, cur uint64, res *Result) error {
	meta := s.tbl.Metadata()
	refs := map[string]table.SnapshotRef{}
	for name, ref := range meta.Refs() {
		refs[name] = ref
	}
	present := map[uint64]bool{}
	var updates []table.Update
	for _, v := range vs {
		sid, ok := s.byVintage[v.id]
		if !ok {
			continue
		}
		present[v.id] = true
		name := TagName(v.id)
		if ref, ok := refs[name]; ok && ref.SnapshotID == sid && ref.SnapshotRefType == table.TagRef {
			continue
		}
		updates = append(updates, table.NewSetSnapshotRefUpdate(name, sid, table.TagRef, 0, 0, 0))
		res.Tagged = append(res.Tagged, v.id)
	}
	var expected *int64
	if ref, ok := refs[MainBranch]; ok {
		id := ref.SnapshotID
		expected = &id
	}
	if sid, ok := s.byVintage[cur]; ok && present[cur] {
		res.Main = cur
		if expected == nil || *expected != sid {
			updates = append(updates, table.NewSetSnapshotRefUpdate(MainBranch, sid, table.BranchRef, 0, 0, 0))
			s.movedMain = true
		}
	} else {
		res.MainNote = fmt.Sprintf("CURRENT (vintage %d) has no portable copy: main is left where it was", cur)
		if expected != nil {
			for v, sid := range s.byVintage {
				if sid == *expected {
					res.MainNote = fmt.Sprintf("CURRENT (vintage %d) has no portable copy: main still names vintage %d", cur, v)
				}
			}
		}
	}
	// Vintages gone from the dataset: their tags and snapshots go too
	// (metadata only: the files are already gone with the vintage). Main's
	// snapshot is never removed, even if its vintage is (it moves first).
	mainTarget := int64(-1)
	if sid, ok := s.byVintage[res.Main]; ok && res.Main != 0 {
		mainTarget = sid
	} else if expected != nil {
		mainTarget = *expected
	}
	var gone []int64
	var goneVintages []uint64
	for v, sid := range s.byVintage {
		if present[v] || sid == mainTarget {
			continue
		}
		gone = append(gone, sid)
		goneVintages = append(goneVintages, v)
	}
	for name, ref := range refs {
		v, ok := vintageOfTag(name)
		if !ok || ref.SnapshotRefType != table.TagRef {
			continue
		}
		if !present[v] || s.byVintage[v] != ref.SnapshotID {
			updates = append(updates, table.NewRemoveSnapshotRefUpdate(name))
			if !slices.Contains(goneVintages, v) && !present[v] {
				goneVintages = append(goneVintages, v)
			}
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		// postCommit false: remove the snapshots from the metadata only;
		// iceberg-go would otherwise delete the files no snapshot left
		// references.
		updates = append(updates, table.NewRemoveSnapshotsUpdate(gone, false))
	}
	slices.Sort(goneVintages)
	res.Removed = append(res.Removed, goneVintages...)
	if len(updates) == 0 {
		return nil
	}
	reqs := []table.Requirement{table.AssertRefSnapshotID(MainBranch, expected)}
	if _, _, err := s.cat.CommitTable(ctx, s.ident, reqs, updates); err != nil {
		return fmt.Errorf("commit refs: %w", err)
	}
	tbl, err := s.cat.LoadTable(ctx, s.ident)
	if err != nil {
		return err
	}
	s.tbl = tbl
	return nil
}

// TagName is vintage id's tag: vintage-NNNNNN.
func TagName(id uint64) string { return TagPrefix + dataset.FormatID(id) }

func vintageOfTag(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, TagPrefix)
	if !ok {
		return 0, false
	}
	id, err := dataset.ParseID(s)
	return id, err == nil
}
