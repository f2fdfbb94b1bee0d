package source

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/pkg/lake/deltalog"
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
)

type deltaTable struct {
	snap  *deltalog.Snapshot
	st    objstore.Store
	parts map[string]bool // partition columns
}

func openDelta(ctx context.Context, opt Options, st objstore.Store) (*Table, error) {
	if opt.SnapshotID != 0 || opt.Ref != "" {
		return nil, usagef("%s is a Delta table: select a version with --table-version or --as-of (--snapshot-id and --ref are Iceberg's)", opt.Input)
	}
	v := int64(-1)
	if opt.TableVersion != nil {
		if *opt.TableVersion < 0 {
			return nil, usagef("table version %d is negative", *opt.TableVersion)
		}
		v = *opt.TableVersion
	}
	snap, err := deltalog.Open(ctx, st, deltalog.Options{Version: v, AsOf: opt.AsOf})
	if err != nil {
		return nil, err
	}
	d := &deltaTable{snap: snap, st: st, parts: map[string]bool{}}
	for _, p := range snap.MetaData.PartitionColumns {
		d.parts[p] = true
	}
	t := &Table{
		Kind: KindDelta, Source: opt.Input, Location: st.Location(""),
		SnapshotID: strconv.FormatInt(snap.Version, 10), Version: snap.Version, Timestamp: snap.Timestamp,
		Store: st, delta: d,
	}
	for i, f := range snap.Files {
		t.Files = append(t.Files, &File{Rel: relTo(st.Location(""), f.Name), Name: f.Name, Size: f.Size, deltaFile: i})
	}
	return t, nil
}

// fieldID is the Parquet field id pqarrow puts in a field's metadata.
func fieldID(f arrow.Field) (int, bool) {
	v, ok := f.Metadata.GetValue("PARQUET:field_id")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

func (d *deltaTable) project(f *File, fields []arrow.Field) (*Projection, error) {
	p := &Projection{}
	byName := map[string]int{}
	byID := map[int]int{}
	for i, fl := range fields {
		byName[fl.Name] = i
		if id, ok := fieldID(fl); ok {
			byID[id] = i
		}
	}
	if d.snap.Mapping == deltalog.MappingID && len(byID) == 0 && len(fields) > 0 {
		return nil, fmt.Errorf("%s: the table maps columns by field id, but the file has none", f.Rel)
	}
	for _, c := range d.snap.Columns {
		if c.Arrow.ID() == arrow.NULL {
			continue // void: never in data files, all null
		}
		if d.parts[c.Name] {
			p.Fields = append(p.Fields, arrow.Field{Name: c.Name, Type: c.Arrow, Nullable: true})
			p.Leaf = append(p.Leaf, -1)
			continue
		}
		var x int
		var ok bool
		switch d.snap.Mapping {
		case deltalog.MappingID:
			x, ok = byID[c.FieldID]
		default:
			x, ok = byName[c.Physical]
		}
		if !ok {
			continue // not in this file: null here
		}
		p.Fields = append(p.Fields, arrow.Field{Name: c.Name, Type: fields[x].Type, Nullable: true})
		p.Leaf = append(p.Leaf, x)
	}
	return p, nil
}

func (d *deltaTable) constant(f *File, field arrow.Field, n int, mem memory.Allocator) (arrow.Array, error) {
	c, ok := d.snap.Column(field.Name)
	if !ok {
		return nil, fmt.Errorf("%s: no column %q in the table schema", f.Rel, field.Name)
	}
	add := d.snap.Files[f.deltaFile]
	// Partition values are keyed by the physical name under column mapping.
	v, ok := add.PartitionValues[c.Physical]
	if !ok {
		v = add.PartitionValues[c.Name]
	}
	a, err := deltalog.PartitionArray(c, v, n, mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Rel, err)
	}
	return a, nil
}

func (d *deltaTable) deleted(ctx context.Context, f *File, rows int64) ([]uint64, error) {
	dv := d.snap.Files[f.deltaFile].DeletionVector
	if dv == nil {
		return nil, nil
	}
	del, err := dv.Load(ctx, d.st, rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Rel, err)
	}
	return del, nil
}
