package snapwrite

import (
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

func TestColumnsOf(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_code", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "region", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
	}, nil)
	want := []manifest.Column{
		{Name: "series_code", Type: "uint32"},
		{Name: "value", Type: "float64", Nullable: true},
		{Name: "region", Type: "dictionary<values=utf8, indices=int32, ordered=false>", Nullable: true},
	}
	if got := ColumnsOf(sc); !slices.Equal(got, want) {
		t.Errorf("ColumnsOf = %+v\nwant %+v", got, want)
	}
	if got := ColumnsOf(arrow.NewSchema(nil, nil)); len(got) != 0 {
		t.Errorf("ColumnsOf(no fields) = %+v", got)
	}
}

// TestManifest: the assembled manifest carries what the writer knew, in
// format version 4 (tiered or not), with periods only when it has
// series, and its files named by their place in the published snapshot.
func TestManifest(t *testing.T) {
	data := datafile.Schema(arrow.PrimitiveTypes.Float64, nil)
	index := arrow.NewSchema([]arrow.Field{{Name: "series_id", Type: arrow.BinaryTypes.String}}, nil)
	created := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		name        string
		tiers       coldfile.Policy
		series      int64
		version     int
		first, last string
	}{
		{"untiered", coldfile.Policy{}, 2, manifest.Version, "1970-04-11", "1970-04-21"},
		{"tiered", coldfile.Policy{HotRows: 3}, 2, manifest.Version, "1970-04-11", "1970-04-21"},
		{"empty", coldfile.Policy{}, 0, manifest.Version, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{
				ID: 7, ParentID: 6, Dataset: "eia", Created: created, Tool: "servingsnap test",
				Data: data, Index: index, Attributes: []string{"region"},
				Stats: manifest.Stats{Rows: 10, Series: tc.series}, First: 100, Last: 110,
				Tiers: tc.tiers, Build: manifest.Build{BatchRows: 64},
				Shard:   &manifest.Shard{Index: 1, Count: 4, Hash: "xxhash64"},
				Lineage: manifest.Lineage{Kind: "build"}, WALPosition: 42,
			}
			m := s.Manifest()
			if m.Format != manifest.Format || m.FormatVersion != tc.version {
				t.Errorf("format %s %d, want %s %d", m.Format, m.FormatVersion, manifest.Format, tc.version)
			}
			if m.SnapshotID != 7 || m.ParentID != 6 || m.Dataset != "eia" || m.Tool != "servingsnap test" || m.WALPosition != 42 {
				t.Errorf("identity %+v", m)
			}
			if m.Created != "2026-03-04T04:06:07.000000008Z" {
				t.Errorf("created %s, want UTC with nanoseconds", m.Created)
			}
			if !slices.Equal(m.Schema.Data, ColumnsOf(data)) || !slices.Equal(m.Schema.Index, ColumnsOf(index)) || !slices.Equal(m.Schema.Attributes, []string{"region"}) {
				t.Errorf("schema %+v", m.Schema)
			}
			if m.Stats.FirstPeriod != tc.first || m.Stats.LastPeriod != tc.last || m.Stats.Rows != 10 {
				t.Errorf("stats %+v, want periods %q..%q", m.Stats, tc.first, tc.last)
			}
			if m.Build.BatchRows != 64 || m.Shard == nil || m.Shard.Count != 4 || m.Lineage.Kind != "build" {
				t.Errorf("build %+v shard %+v lineage %+v", m.Build, m.Shard, m.Lineage)
			}
			if len(m.Files) != 0 {
				t.Errorf("files before PlaceFiles: %+v", m.Files)
			}
			PlaceFiles(m, []manifest.File{{Path: "data.arrow", Role: manifest.RoleData}, {Path: "index.arrow", Role: manifest.RoleIndex}})
			var paths []string
			for _, f := range m.Files {
				paths = append(paths, f.Path)
			}
			if want := []string{"snapshots/000007/data.arrow", "snapshots/000007/index.arrow"}; !slices.Equal(paths, want) {
				t.Errorf("placed files %v, want %v", paths, want)
			}
		})
	}
}
