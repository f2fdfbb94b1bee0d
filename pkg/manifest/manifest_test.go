package manifest

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

func valid() *Manifest {
	sum := "xxh64:0123456789abcdef"
	return &Manifest{
		Format: Format, FormatVersion: Version, SnapshotID: 2, ParentID: 1,
		Dataset: "PET", Created: "2026-01-02T03:04:05.123456789Z", Tool: "test",
		Files: []File{
			{Path: "snapshots/000002/data.arrow", Role: RoleData, Tier: TierHot, Format: FormatArrowIPCFile, Size: 100, Rows: 10, Batches: 1, Checksum: sum},
			{Path: "snapshots/000002/index.arrow", Role: RoleIndex, Tier: TierHot, Format: FormatArrowIPCFile, Size: 50, Rows: 2, Batches: 1, Checksum: sum},
		},
		Stats: Stats{Rows: 10, Series: 2},
	}
}

// TestMarshalParse: what Marshal writes Parse accepts; damage to the bytes
// or a broken rule is ErrCorrupt (the one corrupt.ErrCorrupt).
func TestMarshalParse(t *testing.T) {
	b, err := Marshal(valid())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(b)
	if err != nil || m.SnapshotID != 2 || len(m.Files) != 2 {
		t.Fatalf("Parse(Marshal(m)) = %+v, %v", m, err)
	}
	for name, bad := range map[string][]byte{
		"edited after writing": bytes.Replace(b, []byte(`"tool": "test"`), []byte(`"tool": "tset"`), 1),
		"not JSON":             []byte("{"),
		"future version":       bytes.Replace(b, []byte(`"format_version": 5`), []byte(`"format_version": 6`), 1),
		"version 0":            bytes.Replace(b, []byte(`"format_version": 5`), []byte(`"format_version": 0`), 1),
	} {
		if _, err := Parse(bad); !errors.Is(err, ErrCorrupt) || !corrupt.Is(err) {
			t.Errorf("%s: Parse = %v, want ErrCorrupt", name, err)
		}
	}
	m = valid()
	m.Files[0].Path = "../escape"
	if _, err := Marshal(m); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Marshal of an invalid manifest = %v, want ErrCorrupt", err)
	}
}

// A manifest written before the lake-table lineage fields (the v1 fixture)
// still parses, and reads as a Parquet-folder lineage with none of them;
// a manifest with them round-trips and a Parquet one omits them.
func TestV1FixtureReadsWithoutLakeLineage(t *testing.T) {
	b, err := os.ReadFile("../../testdata/v1/FIXTURE/manifests/000001.json")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"table_version"`)) {
		t.Fatal("the fixture is not from before the lake fields")
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	l := m.Lineage
	if l.Kind != KindParquet || l.Location != "" || l.TableVersion != nil || l.SnapshotTimestamp != "" || l.Ref != "" || l.MetadataLocation != "" {
		t.Fatalf("lineage %+v", l)
	}
	out, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("table_version")) || bytes.Contains(out, []byte(`"location"`)) {
		t.Fatalf("a parquet lineage gained lake fields:\n%s", out)
	}
	v := int64(0)
	m.Lineage.Kind, m.Lineage.Location, m.Lineage.TableVersion, m.Lineage.LakeSnapshotID = KindDelta, "s3://b/t", &v, "0"
	m.Lineage.SnapshotTimestamp = "2024-06-01T00:00:00Z"
	out, err = Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Lineage.TableVersion == nil || *m2.Lineage.TableVersion != 0 || m2.Lineage.Location != "s3://b/t" {
		t.Fatalf("round trip: %+v", m2.Lineage)
	}
}

// TestPortableRole: a manifest may list one portable copy, in Parquet,
// holding the snapshot's rows; a second one, another format or another
// row count is refused.
func TestPortableRole(t *testing.T) {
	sum := "xxh64:0123456789abcdef"
	portable := File{Path: "snapshots/000002/portable.parquet", Role: RolePortable, Format: FormatParquet, Size: 70, Rows: 10, Batches: 1, Checksum: sum}
	for _, tc := range []struct {
		name string
		edit func(m *Manifest)
		ok   bool
	}{
		{"none", func(m *Manifest) {}, true},
		{"one", func(m *Manifest) { m.Files = append(m.Files, portable) }, true},
		{"two", func(m *Manifest) {
			p2 := portable
			p2.Path = "snapshots/000002/portable2.parquet"
			m.Files = append(m.Files, portable, p2)
		}, false},
		{"arrow format", func(m *Manifest) {
			p := portable
			p.Format = FormatArrowIPCFile
			m.Files = append(m.Files, p)
		}, false},
		{"parquet data file", func(m *Manifest) { m.Files[0].Format = FormatParquet }, false},
		{"rows differ", func(m *Manifest) {
			p := portable
			p.Rows = 9
			m.Files = append(m.Files, p)
		}, false},
	} {
		m := valid()
		tc.edit(m)
		b, err := Marshal(m)
		if tc.ok {
			if err != nil {
				t.Errorf("%s: Marshal = %v", tc.name, err)
				continue
			}
			if got, err := Parse(b); err != nil {
				t.Errorf("%s: Parse = %v", tc.name, err)
			} else if _, has := got.FileByRole(RolePortable); has != (len(got.Files) == 3) {
				t.Errorf("%s: FileByRole(portable) = %v", tc.name, has)
			}
			continue
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Marshal = %v, want ErrCorrupt", tc.name, err)
		}
	}
}

// TestColdFilesByVersion: a version-3 manifest lists exactly one cold
// file, a version-4 one at most one (and is tiered exactly then),
// versions 1 and 2 none; Tiered says which.
func TestColdFilesByVersion(t *testing.T) {
	cold := File{Path: "snapshots/000002/cold.vortex", Role: RoleCold, Tier: TierCold, Format: FormatVortex, Size: 70, Rows: 4, Batches: 1, Checksum: "xxh64:0123456789abcdef"}
	for _, tc := range []struct {
		version, colds int
		ok, tiered     bool
	}{
		{Version, 0, true, false},
		{Version, 1, true, true},
		{Version, 2, false, true},
		{VersionTiered, 1, true, true},
		{VersionTiered, 0, false, true},
		{VersionV2, 0, true, false},
		{VersionV2, 1, false, false},
		{1, 1, false, false},
	} {
		m := valid()
		m.FormatVersion = tc.version
		for k := range tc.colds {
			c := cold
			c.Path = []string{"snapshots/000002/cold.vortex", "snapshots/000002/cold2.vortex"}[k]
			m.Files = append(m.Files, c)
			m.Files[0].Rows -= c.Rows // rows still add up
		}
		if err := m.Validate(); (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "cold files") {
			t.Errorf("version %d with %d cold files: Validate = %v, want ok %v (else an error about the cold files)", tc.version, tc.colds, err, tc.ok)
		}
		if m.Tiered() != tc.tiered {
			t.Errorf("version %d with %d cold files: Tiered = %v, want %v", tc.version, tc.colds, m.Tiered(), tc.tiered)
		}
	}
}
