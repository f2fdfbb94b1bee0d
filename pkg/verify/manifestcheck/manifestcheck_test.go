package manifestcheck

import (
	"bytes"
	"testing"

	"github.com/energyscope/servingsnap/pkg/manifest"
)

func TestProblems(t *testing.T) {
	good, err := manifest.Marshal(sampleManifest())
	if err != nil {
		t.Fatal(err)
	}
	if ps := Problems(good, sampleManifest()); len(ps) != 0 {
		t.Fatalf("a manifest as sortwrite writes it breaks rules: %v", ps)
	}
	// A compaction's manifest: kind compaction, no input files.
	comp := sampleManifest()
	comp.Lineage = manifest.Lineage{Kind: "compaction", Source: "snapshot 1 + wal through 4294967312", Inputs: []manifest.Input{}}
	comp.WALPosition = 1<<32 | 16
	if b, err := manifest.Marshal(comp); err != nil {
		t.Fatal(err)
	} else if ps := Problems(b, comp); len(ps) != 0 {
		t.Fatalf("a manifest as a compaction writes it breaks rules: %v", ps)
	}
	// A tiered snapshot's manifest: version 3, a cold file, a policy.
	for _, tm := range []*manifest.Manifest{sampleTiered(false), sampleTiered(true)} {
		if b, err := manifest.Marshal(tm); err != nil {
			t.Fatal(err)
		} else if ps := Problems(b, tm); len(ps) != 0 {
			t.Fatalf("a tiered manifest as sortwrite writes it (format %q) breaks rules: %v", tm.Build.DataFormat, ps)
		}
	}
	cases := []struct {
		name string
		edit func(m *manifest.Manifest)
		raw  func(b []byte) []byte
		loc  string
	}{
		{"tier policy in a version-2 manifest", func(m *manifest.Manifest) { m.Build.HotRows = 3 }, nil, "format_version"},
		{"hot_rows negative", func(m *manifest.Manifest) { *m = *sampleTiered(false); m.Build.HotRows = -2 }, nil, "build.hot_rows"},
		{"hot_since not a date", func(m *manifest.Manifest) { *m = *sampleTiered(false); m.Build.HotSince = "2022" }, nil, "build.hot_since"},
		{"unknown data format", func(m *manifest.Manifest) { *m = *sampleTiered(false); m.Build.DataFormat = "parquet" }, nil, "build.format"},
		{"version 3 without a policy", func(m *manifest.Manifest) { *m = *sampleTiered(false); m.Build.HotSince = "" }, nil, "format_version"},
		{"all cold with a hot window", func(m *manifest.Manifest) { *m = *sampleTiered(true); m.Build.HotRows = 2 }, nil, "build"},
		{"all cold with hot rows", func(m *manifest.Manifest) {
			*m = *sampleTiered(true)
			m.Files[0].Rows, m.Files[0].Batches, m.Files[2].Rows = 1, 1, 9
		}, nil, "files"},
		{"cold file tier", func(m *manifest.Manifest) { *m = *sampleTiered(false); m.Files[2].Tier = "hot" }, nil, "files[2].tier"},
		{"cold file without chunks", func(m *manifest.Manifest) { *m = *sampleTiered(false); m.Files[2].Batches = 0 }, nil, "files[2].batches"},
		{"key in other case", nil, func(b []byte) []byte { return bytes.Replace(b, []byte(`"tool"`), []byte(`"Tool"`), 1) }, "tool"},
		{"key missing", nil, func(b []byte) []byte { return bytes.Replace(b, []byte(`"tier": "hot",`), nil, 1) }, "files[0].tier"},
		{"null", nil, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"attributes": [
      "units"
    ]`), []byte(`"attributes": null`), 1)
		}, "schema.attributes"},
		{"file outside the snapshot", func(m *manifest.Manifest) { m.Files[0].Path = "snapshots/000002/data.arrow" }, nil, "files[0].path"},
		{"index tier", func(m *manifest.Manifest) { m.Files[1].Tier = "hot" }, nil, "files[1].tier"},
		{"index batches", func(m *manifest.Manifest) { m.Files[1].Batches = 2 }, nil, "files[1].batches"},
		{"on_duplicate", func(m *manifest.Manifest) { m.Build.OnDuplicate = "first" }, nil, "build.on_duplicate"},
		{"batch_rows", func(m *manifest.Manifest) { m.Build.BatchRows = 0 }, nil, "build.batch_rows"},
		{"columns", func(m *manifest.Manifest) { m.Build.ValueColumn = "period" }, nil, "build"},
		{"duplicates with error", func(m *manifest.Manifest) { m.Build.OnDuplicate = "error" }, nil, "stats.duplicates_dropped"},
		{"period format", func(m *manifest.Manifest) { m.Stats.FirstPeriod = "2019-02-30" }, nil, "stats.first_period"},
		{"period order", func(m *manifest.Manifest) { m.Stats.FirstPeriod = "2025-01-01" }, nil, "stats"},
		{"tool", func(m *manifest.Manifest) { m.Tool = "other 1.0" }, nil, "tool"},
		{"created not UTC", func(m *manifest.Manifest) { m.Created = "2024-05-01T10:11:12+02:00" }, nil, "created"},
		{"lineage kind", func(m *manifest.Manifest) { m.Lineage.Kind = "hudi" }, nil, "lineage.kind"},
		{"lake lineage without its snapshot", func(m *manifest.Manifest) { m.Lineage.Kind = "delta" }, nil, "lineage"},
		{"lake snapshot timestamp", func(m *manifest.Manifest) {
			v := int64(3)
			m.Lineage.Kind, m.Lineage.LakeSnapshotID, m.Lineage.Location, m.Lineage.TableVersion = "delta", "3", "/t", &v
			m.Lineage.SnapshotTimestamp = "yesterday"
		}, nil, "lineage.snapshot_timestamp"},
		{"compaction with inputs", func(m *manifest.Manifest) { m.Lineage.Kind = "compaction" }, nil, "lineage.inputs"},
		{"input checksum", func(m *manifest.Manifest) { m.Lineage.Inputs[0].Checksum = "md5:x" }, nil, "lineage.inputs[0].checksum"},
		{"input path", func(m *manifest.Manifest) { m.Lineage.Inputs[0].Path = "../x.parquet" }, nil, "lineage.inputs[0].path"},
		{"input rows", func(m *manifest.Manifest) { m.Lineage.Inputs[0].Rows = 12 }, nil, "lineage.inputs"},
		{"input not parquet", func(m *manifest.Manifest) { m.Lineage.Inputs[0].Path = "year=2019/part-0.parquez" }, nil, "lineage.inputs[0].path"},
		{"input hidden", func(m *manifest.Manifest) { m.Lineage.Inputs[0].Path = "_tmp/part-0.parquet" }, nil, "lineage.inputs[0].path"},
		{"inputs out of order", func(m *manifest.Manifest) {
			m.Lineage.Inputs = append(m.Lineage.Inputs, manifest.Input{Path: "year=999/part-0.parquet", Checksum: m.Lineage.Inputs[0].Checksum})
		}, nil, "lineage.inputs[1].path"},
		{"attribute twice", func(m *manifest.Manifest) { m.Schema.Attributes = []string{"units", "units"} }, nil, "schema.attributes[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := sampleManifest()
			if tc.edit != nil {
				tc.edit(m)
			}
			b, err := manifest.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if tc.raw != nil {
				// A raw edit after writing no longer parses at all: the
				// manifest's own checksum catches it before any rule.
				if _, err := manifest.Parse(tc.raw(b)); err == nil {
					t.Fatal("a manifest edited after it was written parsed")
				}
				return
			}
			pm, err := manifest.Parse(b)
			if err != nil {
				t.Fatalf("the edited manifest should still parse: %v", err)
			}
			ps := Problems(b, pm)
			for _, p := range ps {
				if p.Location == tc.loc {
					return
				}
			}
			t.Fatalf("no problem at %s: %v", tc.loc, ps)
		})
	}
}

func TestParseDate(t *testing.T) {
	for _, s := range []string{"2019-01-01", "0001-01-01", "9999-12-31", "2024-02-29", "12000-06-01", "-0044-03-15"} {
		if _, ok := parseDate(s); !ok {
			t.Errorf("parseDate(%q) refused", s)
		}
	}
	for _, s := range []string{"", "2019", "2019-1-01", "2019-01-1", "2023-02-29", "2019-13-01", "02019-01-01", "2019-01-01T00", "２019-01-01", "+2019-01-01", "2019/01/01"} {
		if _, ok := parseDate(s); ok {
			t.Errorf("parseDate(%q) accepted", s)
		}
	}
	a, _ := parseDate("1970-01-02")
	if a != 1 {
		t.Errorf("1970-01-02 is day %d, want 1", a)
	}
}

// sampleTiered is sampleManifest as a tiered build writes it: version 3,
// 7 of its 10 rows in a cold file, hot since 2022-01-01 (or, allCold,
// every row cold).
func sampleTiered(allCold bool) *manifest.Manifest {
	m := sampleManifest()
	m.FormatVersion = manifest.VersionTiered
	cold := manifest.File{Path: "snapshots/000003/cold.vortex", Role: manifest.RoleCold, Tier: manifest.TierCold, Format: manifest.FormatVortex, Size: 300, Rows: 7, Batches: 1, Checksum: "xxh64:00112233445566ff"}
	m.Files[0].Rows = 3
	m.Build.HotSince = "2022-01-01"
	if allCold {
		m.Files[0].Rows, m.Files[0].Batches, cold.Rows = 0, 0, 10
		m.Build.HotSince, m.Build.DataFormat = "", "vortex"
	}
	m.Files = append(m.Files, cold)
	return m
}
