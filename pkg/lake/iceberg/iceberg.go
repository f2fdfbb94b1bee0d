// Package iceberg reads one snapshot of an Apache Iceberg table through
// github.com/apache/iceberg-go: the table from a metadata file or a REST
// catalog, the snapshot by id, time or ref, its data files, and each
// file's rows as Arrow record batches with position deletes, equality
// deletes and deletion vectors applied and columns resolved by field id
// (so a renamed column keeps its data), all as iceberg-go implements them.
//
// It is the only package that imports iceberg-go's table and catalog code,
// and only the REST catalog of those, so the binary links no other
// catalog's client.
package iceberg

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Options say which table and snapshot to read.
type Options struct {
	// MetadataLocation is the metadata file to read (a local path or an
	// s3:// URI); or, with CatalogURI, empty.
	MetadataLocation string
	CatalogURI       string
	Table            string // namespace.name in the catalog
	Warehouse        string
	Token            string
	Credential       string
	// IOProps configure iceberg-go's file IO (s3.endpoint, s3.region, ...).
	IOProps map[string]string

	// At most one: a snapshot id, a time (the snapshot current then), or a
	// branch or tag. None: the current snapshot.
	SnapshotID int64
	AsOf       time.Time
	Ref        string
}

// Table is one snapshot of the table.
type Table struct {
	Location         string // the table's location
	MetadataLocation string
	SnapshotID       int64
	SequenceNumber   int64
	Timestamp        time.Time
	Ref              string
	Files            []DataFile // ordered by data sequence number, then path

	tbl   *table.Table
	scan  *table.Scan
	tasks [][]table.FileScanTask // per file
}

// DataFile is one data file of the snapshot.
type DataFile struct {
	Path    string // as the manifest names it (usually an absolute URI)
	Size    int64
	Records int64 // rows in the file, before deletes
	Deletes int   // delete files and deletion vectors that apply to it

	specID    int32
	partition map[int]any // partition field id → value
}

// Bucket says which bucket of column data file i holds, when the file's
// partition spec has a bucket(B, column) field: the bucket and B. A
// reader of one shard of bucket(N, column), N dividing B, needs only the
// files whose bucket mod N is its shard.
func (t *Table) Bucket(i int, column string) (bucket, buckets int, ok bool) {
	f := t.Files[i]
	field, found := t.tbl.Schema().FindFieldByName(column)
	if !found {
		return 0, 0, false
	}
	spec := t.tbl.Metadata().PartitionSpecByID(int(f.specID))
	if spec == nil {
		return 0, 0, false
	}
	for _, pf := range spec.Fields() {
		bt, isBucket := pf.Transform.(iceberggo.BucketTransform)
		if !isBucket || len(pf.SourceIDs) != 1 || pf.SourceIDs[0] != field.ID {
			continue
		}
		var b int64
		switch v := f.partition[pf.FieldID].(type) {
		case int32:
			b = int64(v)
		case int64:
			b = v
		case int:
			b = int64(v)
		default:
			return 0, 0, false
		}
		if b < 0 || b >= int64(bt.NumBuckets) {
			return 0, 0, false
		}
		return int(b), bt.NumBuckets, true
	}
	return 0, 0, false
}

// Open loads the table and plans the scan of the selected snapshot.
func Open(ctx context.Context, opt Options) (*Table, error) {
	props := iceberggo.Properties{}
	for k, v := range opt.IOProps {
		props[k] = v
	}
	var tbl *table.Table
	var err error
	if opt.CatalogURI != "" {
		tbl, err = loadFromCatalog(ctx, opt, props)
	} else {
		loc := opt.MetadataLocation
		tbl, err = table.NewFromLocation(ctx, []string{"table"}, loc, icebergio.LoadFSFunc(props, loc), nil)
		if err != nil {
			err = fmt.Errorf("iceberg metadata %s: %w", loc, err)
		}
	}
	if err != nil {
		return nil, err
	}
	t := &Table{Location: tbl.Location(), MetadataLocation: tbl.MetadataLocation(), Ref: opt.Ref}
	snap, err := selectSnapshot(tbl, opt)
	if err != nil {
		return nil, err
	}
	t.SnapshotID, t.SequenceNumber = snap.SnapshotID, snap.SequenceNumber
	t.Timestamp = time.UnixMilli(snap.TimestampMs).UTC()
	scan := tbl.Scan(table.WithSnapshotID(snap.SnapshotID))
	if opt.Ref != "" {
		// A branch is read with the table's current schema, a tag with its
		// snapshot's (iceberg-go's rule, as in the Iceberg spec).
		if scan, err = tbl.Scan().UseRef(opt.Ref); err != nil {
			return nil, fmt.Errorf("iceberg table %s: %w", t.Location, err)
		}
	}
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg table %s snapshot %d: plan: %w", t.Location, snap.SnapshotID, err)
	}
	byFile := map[string]int{}
	seqs := map[string]int64{}
	for _, task := range tasks {
		p := task.File.FilePath()
		i, ok := byFile[p]
		if !ok {
			i = len(t.Files)
			byFile[p] = i
			t.Files = append(t.Files, DataFile{Path: p, Size: task.File.FileSizeBytes(), Records: task.File.Count(),
				specID: task.File.SpecID(), partition: task.File.Partition()})
			t.tasks = append(t.tasks, nil)
			if task.DataSequenceNumber != nil {
				seqs[p] = *task.DataSequenceNumber
			}
		}
		t.tasks[i] = append(t.tasks[i], task)
		t.Files[i].Deletes = max(t.Files[i].Deletes, len(task.DeleteFiles)+len(task.EqualityDeleteFiles)+len(task.DeletionVectorFiles))
	}
	order := make([]int, len(t.Files))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		fa, fb := t.Files[order[a]], t.Files[order[b]]
		if seqs[fa.Path] != seqs[fb.Path] {
			return seqs[fa.Path] < seqs[fb.Path]
		}
		return fa.Path < fb.Path
	})
	files := make([]DataFile, len(order))
	ts := make([][]table.FileScanTask, len(order))
	for i, o := range order {
		files[i], ts[i] = t.Files[o], t.tasks[o]
	}
	t.Files, t.tasks, t.scan, t.tbl = files, ts, scan, tbl
	return t, nil
}

func loadFromCatalog(ctx context.Context, opt Options, props iceberggo.Properties) (*table.Table, error) {
	opt.IOProps = props
	cat, err := RESTCatalog(ctx, opt)
	if err != nil {
		return nil, err
	}
	ident, err := Identifier(opt.Table)
	if err != nil {
		return nil, err
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, fmt.Errorf("iceberg REST catalog %s: table %s: %w", opt.CatalogURI, opt.Table, err)
	}
	return tbl, nil
}

// RESTCatalog connects to the REST catalog at opt.CatalogURI with opt's
// warehouse, token or OAuth2 credential and file IO properties (the
// builder reads tables through it; pkg/icebergtable publishes to it).
func RESTCatalog(ctx context.Context, opt Options) (*rest.Catalog, error) {
	var ropts []rest.Option
	if opt.Token != "" {
		ropts = append(ropts, rest.WithOAuthToken(opt.Token))
	}
	if opt.Credential != "" {
		ropts = append(ropts, rest.WithCredential(opt.Credential))
	}
	if opt.Warehouse != "" {
		ropts = append(ropts, rest.WithWarehouseLocation(opt.Warehouse))
	}
	if len(opt.IOProps) > 0 {
		ropts = append(ropts, rest.WithAdditionalProps(opt.IOProps))
	}
	cat, err := rest.NewCatalog(ctx, "rest", opt.CatalogURI, ropts...)
	if err != nil {
		return nil, fmt.Errorf("iceberg REST catalog %s: %w", opt.CatalogURI, err)
	}
	return cat, nil
}

// Identifier parses a catalog table name, namespace.name (the namespace
// may have several levels).
func Identifier(name string) (table.Identifier, error) {
	ns, n, ok := cutLast(name, ".")
	if !ok || ns == "" || n == "" {
		return nil, fmt.Errorf("iceberg table %q: want namespace.name", name)
	}
	return catalog.ToIdentifier(append(strings.Split(ns, "."), n)...), nil
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+len(sep):], true
}

func selectSnapshot(tbl *table.Table, opt Options) (*table.Snapshot, error) {
	loc := tbl.Location()
	ids := func() string {
		var out []string
		for _, s := range tbl.Metadata().Snapshots() {
			out = append(out, strconv.FormatInt(s.SnapshotID, 10))
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, ", ")
	}
	switch {
	case opt.SnapshotID != 0:
		if s := tbl.SnapshotByID(opt.SnapshotID); s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("iceberg table %s has no snapshot %d (its snapshots: %s)", loc, opt.SnapshotID, ids())
	case !opt.AsOf.IsZero():
		if s := tbl.SnapshotAsOf(opt.AsOf.UnixMilli(), true); s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("iceberg table %s has no snapshot at or before %s", loc, opt.AsOf.UTC().Format(time.RFC3339))
	case opt.Ref != "":
		if s := tbl.SnapshotByName(opt.Ref); s != nil {
			return s, nil
		}
		var refs []string
		for name := range tbl.Metadata().Refs() {
			refs = append(refs, name)
		}
		sort.Strings(refs)
		return nil, fmt.Errorf("iceberg table %s has no branch or tag %q (its refs: %s)", loc, opt.Ref, strings.Join(refs, ", "))
	}
	if s := tbl.CurrentSnapshot(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("iceberg table %s has no current snapshot (no data was ever committed)", loc)
}

// Read returns the rows of file i as record batches in the scan's schema,
// deletes applied. The caller releases them.
func (t *Table) Read(ctx context.Context, i int) ([]arrow.RecordBatch, error) {
	_, it, err := t.scan.ReadTasks(ctx, t.tasks[i])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Files[i].Path, err)
	}
	return collect(it, t.Files[i].Path)
}

func collect(it iter.Seq2[arrow.RecordBatch, error], path string) ([]arrow.RecordBatch, error) {
	var out []arrow.RecordBatch
	var err error
	for rec, e := range it {
		if e != nil {
			err = e
			break
		}
		out = append(out, rec)
	}
	if err != nil {
		for _, r := range out {
			r.Release()
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// Close releases the scan.
func (t *Table) Close() error {
	if t.scan == nil {
		return nil
	}
	err := t.scan.Close()
	if errors.Is(err, table.ErrInvalidOperation) {
		return nil
	}
	return err
}
