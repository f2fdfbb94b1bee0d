package manifestcheck

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// sampleManifest is a valid manifest as sortwrite writes one.
func sampleManifest() *manifest.Manifest {
	return &manifest.Manifest{
		Format: manifest.Format, FormatVersion: manifest.Version,
		SnapshotID: 3, ParentID: 2, Dataset: "PET", Created: "2024-05-01T10:11:12.123456789Z", Tool: "servingsnap v0.1.0",
		Schema: manifest.Schema{
			Data: []manifest.Column{{Name: "series_code", Type: "uint32"}, {Name: "period", Type: "date32"}, {Name: "value", Type: "float64", Nullable: true}},
			Index: []manifest.Column{{Name: "series_id", Type: "utf8"}, {Name: "row_offset", Type: "int64"},
				{Name: "units", Type: "dictionary<values=utf8, indices=int8, ordered=false>", Nullable: true}},
			Attributes: []string{"units"},
		},
		Files: []manifest.File{
			{Path: "snapshots/000003/data.arrow", Role: "data", Tier: "hot", Format: "arrow-ipc-file", Size: 1000, Rows: 10, Batches: 1, Checksum: "xxh64:0123456789abcdef"},
			{Path: "snapshots/000003/index.arrow", Role: "index", Format: "arrow-ipc-file", Size: 500, Rows: 2, Batches: 1, Checksum: "xxh64:fedcba9876543210"},
		},
		Stats:   manifest.Stats{Rows: 10, Series: 2, FirstPeriod: "2019-01-01", LastPeriod: "2024-12-01", DuplicatesDropped: 1},
		Build:   manifest.Build{SeriesColumn: "series_id", PeriodColumn: "period", ValueColumn: "value", OnDuplicate: "last", BatchRows: 1 << 20},
		Lineage: manifest.Lineage{Kind: "parquet", Source: "/lake", Inputs: []manifest.Input{{Path: "year=2019/part-0.parquet", Size: 123, Rows: 11, Checksum: "xxh64:00000000000000ff"}}},
	}
}

// FuzzParseManifest: manifest.Parse and dataset.ParseCurrent never panic;
// what Parse accepts, Marshal renders and Parse reads back unchanged; what
// ParseCurrent accepts is exactly the canonical pointer; the verifier's own
// manifest rules never panic on what Parse accepts.
func FuzzParseManifest(f *testing.F) {
	good, err := manifest.Marshal(sampleManifest())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	m := sampleManifest()
	m.Schema.Attributes, m.Lineage.Inputs, m.Stats = []string{}, nil, manifest.Stats{Rows: 10, Series: 2, FirstPeriod: "2019-01-01", LastPeriod: "2019-01-01"}
	b, _ := manifest.Marshal(m)
	f.Add(b)
	f.Add(bytes.ReplaceAll(good, []byte(`"format_version": 1`), []byte(`"format_version": 2`)))
	f.Add(bytes.ReplaceAll(good, []byte(`"tool"`), []byte(`"TOOL"`)))
	f.Add([]byte("manifests/000001.json\n"))
	f.Add([]byte("manifests/1000000.json\n"))
	f.Add([]byte(`{"format":"servingsnap.manifest","format_version":1}`))
	f.Add([]byte("{}"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, err := dataset.ParseCurrent(b); err == nil {
			if want := dataset.ManifestPath(id) + "\n"; string(b) != want {
				t.Fatalf("ParseCurrent(%q) = %d, whose pointer is %q", b, id, want)
			}
		} else if !errors.Is(err, manifest.ErrCorrupt) {
			t.Fatalf("ParseCurrent error is not ErrCorrupt: %v", err)
		}

		m, err := manifest.Parse(b)
		if err != nil {
			if !errors.Is(err, manifest.ErrCorrupt) {
				t.Fatalf("Parse error is not ErrCorrupt: %v", err)
			}
			return
		}
		Problems(b, m)
		out, err := manifest.Marshal(m)
		if err != nil {
			t.Fatalf("Parse accepts a manifest Marshal refuses: %v", err)
		}
		m2, err := manifest.Parse(out)
		if err != nil {
			t.Fatalf("Marshal output does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("Marshal→Parse changed the manifest:\n%+v\n%+v", m, m2)
		}
		out2, err := manifest.Marshal(m2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("Marshal is not stable: %v", err)
		}
		if ps := Problems(out, m2); len(ps) > len(Problems(b, m)) {
			// Marshal writes every field, so re-marshalling can only
			// remove missing-field problems, never add any.
			t.Fatalf("Marshal output breaks more rules than its input: %v", ps)
		}
	})
}
