// Package source resolves what `snapbuild build --input` names into one
// table snapshot to build from: a folder of Parquet files, a Delta table
// or an Iceberg table, on local disk or S3. It says which files make up
// the table at the chosen version (and how to read each: column mapping,
// partition values, deleted rows), and the lineage the manifest records.
//
// Detection: a directory holding _delta_log/ is a Delta table, one holding
// metadata/ with Iceberg metadata is an Iceberg table, a *.metadata.json
// file is an Iceberg table at that metadata, anything else a Parquet
// folder. RawFiles reads a table directory's Parquet files as a plain
// folder instead.
package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/lake/objstore"
	"github.com/energyscope/servingsnap/pkg/lake/parquetdir"
)

// Table kinds, as recorded in the manifest's lineage.kind.
const (
	KindParquet = "parquet"
	KindDelta   = "delta"
	KindIceberg = "iceberg"
)

// Options say what to read.
type Options struct {
	Input    string // directory, *.metadata.json, or s3://bucket/prefix
	RawFiles bool   // read a table directory's Parquet files as a plain folder

	// Version selection. Delta: TableVersion or AsOf. Iceberg: SnapshotID,
	// AsOf or Ref. Zero values select the latest.
	TableVersion *int64 // nil: latest
	AsOf         time.Time
	SnapshotID   int64
	Ref          string

	Catalog CatalogOptions
	S3      objstore.S3Config
}

// CatalogOptions name an Iceberg table in a REST catalog.
type CatalogOptions struct {
	URI        string // REST catalog endpoint; empty: no catalog
	Table      string // namespace.name
	Warehouse  string
	Token      string // bearer token
	Credential string // client_id:client_secret for the OAuth2 client-credentials flow
	Props      map[string]string
}

// ErrUsage marks options that do not fit the input (a Delta flag for an
// Iceberg table, two version selectors, ...).
var ErrUsage = errors.New("usage")

func usagef(format string, a ...any) error {
	return usageError(fmt.Sprintf(format, a...))
}

// usageError is an ErrUsage with its own message.
type usageError string

func (e usageError) Error() string      { return string(e) }
func (usageError) Is(target error) bool { return target == ErrUsage }

// Table is one snapshot of the input, ready to read.
type Table struct {
	Kind     string
	Source   string // the input as given
	Location string // the table root, or for Iceberg its metadata file
	// SnapshotID is the lake's own name for the snapshot read: the Delta
	// version or the Iceberg snapshot id, in decimal; "" for a Parquet folder.
	SnapshotID string
	Version    int64     // Delta version, Iceberg sequence number; -1 for a folder
	Timestamp  time.Time // when the snapshot was committed; zero for a folder
	Ref        string    // the Iceberg branch or tag read, if any
	// MetadataLocation is the Iceberg metadata file read.
	MetadataLocation string
	Files            []*File // in the order that decides "later" for duplicates
	Store            objstore.Store

	delta   *deltaTable
	iceberg *icebergTable
}

// File is one data file of the table.
type File struct {
	Rel  string // as recorded in lineage: relative to the table root when inside it
	Name string // to open in Table.Store
	Size int64

	deltaFile int // index into the Delta snapshot's files
	iceTask   int // index into the Iceberg file tasks
}

// Open resolves the input. Every local data file of the result is a
// regular file (see lake.CheckRegular).
func Open(ctx context.Context, opt Options) (*Table, error) {
	t, err := open(ctx, opt)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(t); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func open(ctx context.Context, opt Options) (*Table, error) {
	if opt.Catalog.URI != "" {
		if opt.Input != "" {
			return nil, usagef("--input and --catalog-uri exclude each other (the catalog names the table with --table)")
		}
		return openIceberg(ctx, opt)
	}
	if opt.Catalog.Table != "" {
		return nil, usagef("--table needs --catalog-uri")
	}
	if opt.Input == "" {
		return nil, usagef("an input is required")
	}
	if strings.HasSuffix(opt.Input, ".metadata.json") || strings.HasSuffix(opt.Input, ".metadata.json.gz") {
		return openIceberg(ctx, opt)
	}
	st, err := objstore.Open(ctx, opt.Input, opt.S3)
	if err != nil {
		return nil, err
	}
	kind := KindParquet
	if !opt.RawFiles {
		if kind, err = detect(ctx, st); err != nil {
			return nil, err
		}
	}
	switch kind {
	case KindDelta:
		return openDelta(ctx, opt, st)
	case KindIceberg:
		return openIceberg(ctx, opt)
	}
	if opt.TableVersion != nil || !opt.AsOf.IsZero() || opt.SnapshotID != 0 || opt.Ref != "" {
		return nil, usagef("%s is a folder of Parquet files, not a Delta or Iceberg table: it has no versions to select", opt.Input)
	}
	return openParquet(ctx, opt, st)
}

// detect tells a Delta table, an Iceberg table and a Parquet folder apart.
func detect(ctx context.Context, st objstore.Store) (string, error) {
	if ents, err := st.ReadDir(ctx, "_delta_log"); err == nil && len(ents) > 0 {
		return KindDelta, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
		return "", fmt.Errorf("input %s: %w", st.Location(""), err)
	}
	if ents, err := st.ReadDir(ctx, "metadata"); err == nil {
		for _, e := range ents {
			b := path.Base(e.Name)
			if b == "version-hint.text" || strings.HasSuffix(b, ".metadata.json") || strings.HasSuffix(b, ".metadata.json.gz") {
				return KindIceberg, nil
			}
		}
	}
	return KindParquet, nil
}

func isNotDir(err error) bool { return strings.Contains(err.Error(), "not a directory") }

// openParquet lists a folder's Parquet files in natural path order.
func openParquet(ctx context.Context, opt Options, st objstore.Store) (*Table, error) {
	ents, err := st.Walk(ctx, "", func(dir string) bool { return parquetdir.Hidden(path.Base(dir)) })
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
			return nil, parquetdir.NotExist(st.Location(""))
		}
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			return nil, fmt.Errorf("input %s is not a directory", st.Location(""))
		}
		return nil, fmt.Errorf("list inputs: %w", err)
	}
	t := &Table{Kind: KindParquet, Source: opt.Input, Location: st.Location(""), Version: -1, Store: st}
	for _, e := range ents {
		if parquetdir.Hidden(path.Base(e.Name)) || !parquetdir.IsParquet(e.Name) {
			continue
		}
		t.Files = append(t.Files, &File{Rel: e.Name, Name: e.Name, Size: e.Size})
	}
	if len(t.Files) == 0 {
		return nil, fmt.Errorf("input %s holds no .parquet files", st.Location(""))
	}
	sort.Slice(t.Files, func(i, j int) bool { return parquetdir.NaturalLess(t.Files[i].Rel, t.Files[j].Rel) })
	return t, nil
}

// Projection says how to read one data file into the table's columns.
type Projection struct {
	// Fields are the table columns this file provides, under their table
	// (logical) names, in table order.
	Fields []arrow.Field
	// Leaf[i] is the file's top-level column holding Fields[i], or -1 for a
	// column whose value comes from the log (a Delta partition value).
	Leaf []int
}

// Project maps a data file's Arrow schema (as pqarrow reads its footer)
// to the table's columns. A Parquet folder reads every column by name.
func (t *Table) Project(f *File, fileFields []arrow.Field) (*Projection, error) {
	if t.delta != nil {
		return t.delta.project(f, fileFields)
	}
	p := &Projection{Fields: fileFields}
	for i := range fileFields {
		p.Leaf = append(p.Leaf, i)
	}
	return p, nil
}

// Constant returns n rows of a column the log gives for the whole file
// (Projection.Leaf[i] == -1).
func (t *Table) Constant(f *File, field arrow.Field, n int, mem memory.Allocator) (arrow.Array, error) {
	if t.delta == nil {
		return nil, fmt.Errorf("%s: column %q has no file column", f.Rel, field.Name)
	}
	return t.delta.constant(f, field, n, mem)
}

// Deleted returns the file's deleted row positions, ascending (a Delta
// deletion vector); rows is its row count from the footer.
func (t *Table) Deleted(ctx context.Context, f *File, rows int64) ([]uint64, error) {
	if t.delta == nil {
		return nil, nil
	}
	return t.delta.deleted(ctx, f, rows)
}

// ReadsRecords reports whether the table's rows come as Arrow record
// batches (Iceberg: iceberg-go reads the files and applies deletes)
// rather than from Parquet files the builder reads itself.
func (t *Table) ReadsRecords() bool { return t.iceberg != nil }

// Records reads one file's rows as Arrow record batches, in the table's
// schema, with deletes applied. The caller releases them.
func (t *Table) Records(ctx context.Context, f *File) ([]arrow.RecordBatch, error) {
	if t.iceberg == nil {
		return nil, fmt.Errorf("%s: not a record source", f.Rel)
	}
	return t.iceberg.records(ctx, f)
}

// Close releases what the table holds open.
func (t *Table) Close() error {
	if t.iceberg != nil {
		return t.iceberg.close()
	}
	return nil
}

// relTo returns name relative to root when it lies inside, else name.
func relTo(root, name string) string {
	if r, ok := strings.CutPrefix(name, strings.TrimSuffix(root, "/")+"/"); ok {
		return r
	}
	return name
}
