package snapwrite

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/period"
)

// Snapshot is what a writer knows of the snapshot it wrote, all but its
// files: Manifest turns it into the manifest.
type Snapshot struct {
	ID, ParentID uint64
	Dataset      string
	Created      time.Time
	Tool         string // "servingsnap VERSION"
	// Data and Index are the schemas the data and index files were
	// written with; Attributes the index's attribute columns.
	Data, Index *arrow.Schema
	Attributes  []string
	// Stats are the counts; their periods are set from First and Last
	// when Stats.Series > 0.
	Stats       manifest.Stats
	First, Last int32
	// Tiers is the policy the Sink wrote under: a tiered snapshot has a
	// manifest of the tiered format version. Build is recorded as given
	// (a build sets its tier fields from Tiers.Fields; a compaction
	// carries its parent's on).
	Tiers       coldfile.Policy
	Build       manifest.Build
	Shard       *manifest.Shard
	Lineage     manifest.Lineage
	WALPosition uint64
}

// Manifest assembles the manifest of s, with no files (see PlaceFiles).
func (s Snapshot) Manifest() *manifest.Manifest {
	m := &manifest.Manifest{
		Format:        manifest.Format,
		FormatVersion: manifest.Version, // tiered or not: a tiered one lists its cold file
		SnapshotID:    s.ID,
		ParentID:      s.ParentID,
		Dataset:       s.Dataset,
		Created:       s.Created.UTC().Format(time.RFC3339Nano),
		Tool:          s.Tool,
		Schema: manifest.Schema{
			Data:       ColumnsOf(s.Data),
			Index:      ColumnsOf(s.Index),
			Attributes: s.Attributes,
		},
		Stats:       s.Stats,
		Build:       s.Build,
		Shard:       s.Shard,
		Lineage:     s.Lineage,
		WALPosition: s.WALPosition,
	}
	if s.Stats.Series > 0 {
		m.Stats.FirstPeriod, m.Stats.LastPeriod = period.Format(s.First), period.Format(s.Last)
	}
	return m
}

// PlaceFiles appends files, named relative to the staged snapshot (as the
// Sink and the index writer name them), to m's files, named by their place
// in the published snapshot m.SnapshotID.
func PlaceFiles(m *manifest.Manifest, files []manifest.File) {
	rel := dataset.SnapshotPath(m.SnapshotID)
	for _, f := range files {
		f.Path = rel + "/" + f.Path
		m.Files = append(m.Files, f)
	}
}

// ColumnsOf describes the fields of sc as a manifest records them: name,
// Arrow type and nullability, in order.
func ColumnsOf(sc *arrow.Schema) []manifest.Column {
	var cs []manifest.Column
	for _, f := range sc.Fields() {
		cs = append(cs, manifest.Column{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable})
	}
	return cs
}
