package manifestcheck

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// reseal recomputes a mutated manifest's self-checksum the way Marshal
// does (xxHash64 of the bytes with the checksum's value blanked), so that
// the mutant reaches the parser's field rules instead of failing the
// checksum comparison first. It finds the value independently of
// manifest.Parse (the last `"checksum": "` key, as Marshal writes it last
// among the top-level fields) and returns nil when there is none to reseal.
func reseal(b []byte) []byte {
	key := []byte(`"checksum": "`)
	i := bytes.LastIndex(b, key)
	if i < 0 {
		return nil
	}
	v := i + len(key)
	end := bytes.IndexByte(b[v:], '"')
	if end < 0 {
		return nil
	}
	blank := append(bytes.Clone(b[:v]), b[v+end:]...)
	h := fileutil.NewHash()
	h.Write(blank)
	sum := fileutil.FormatChecksum(h)
	out := append(bytes.Clone(b[:v]), sum...)
	return append(out, b[v+end:]...)
}

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
// manifest rules never panic on what Parse accepts. Every input is tried
// twice: as it is (the checksum must refuse a changed manifest) and
// resealed (its checksum recomputed), so mutants reach the field rules and
// the accepting path; a resealed manifest that Parse refuses must be
// refused for a reason other than its checksum.
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
	for _, tm := range []*manifest.Manifest{sampleTiered(false), sampleTiered(true)} {
		b, _ := manifest.Marshal(tm)
		f.Add(b)
	}
	f.Add(bytes.ReplaceAll(good, []byte(`"format_version": 1`), []byte(`"format_version": 2`)))
	f.Add(bytes.ReplaceAll(good, []byte(`"tool"`), []byte(`"TOOL"`)))
	f.Add([]byte("manifests/000001.json\n"))
	f.Add([]byte("manifests/1000000.json\n"))
	f.Add([]byte(`{"format":"servingsnap.manifest","format_version":1}`))
	f.Add([]byte("{}"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkManifestBytes(t, b, false)
		if r := reseal(b); r != nil && !bytes.Equal(r, b) {
			checkManifestBytes(t, r, true)
		}
	})
}

// checkManifestBytes runs the fuzz properties on one input; resealed says
// its checksum was recomputed, so a checksum mismatch would be a bug.
func checkManifestBytes(t *testing.T, b []byte, resealed bool) {
	{
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
			if resealed && bytes.Contains([]byte(err.Error()), []byte("does not match its checksum")) {
				t.Fatalf("a resealed manifest fails its checksum: %v", err)
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
	}
}

// TestResealReachesParser: without resealing, an edited manifest fails its
// checksum; resealed, it parses with the edit, so the fuzz target's
// mutants do reach the field rules.
func TestResealReachesParser(t *testing.T) {
	good, err := manifest.Marshal(sampleManifest())
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(good, []byte("servingsnap v0.1.0"), []byte("servingsnap v0.2.0"), 1)
	if _, err := manifest.Parse(edited); err == nil {
		t.Fatal("an edited manifest passes its checksum")
	}
	m, err := manifest.Parse(reseal(edited))
	if err != nil {
		t.Fatalf("resealed manifest refused: %v", err)
	}
	if m.Tool != "servingsnap v0.2.0" {
		t.Fatalf("tool %q after reseal", m.Tool)
	}
	bad := bytes.Replace(good, []byte(`"rows": 10,`), []byte(`"rows": -10,`), 1)
	if _, err := manifest.Parse(reseal(bad)); err == nil || bytes.Contains([]byte(err.Error()), []byte("checksum")) {
		t.Fatalf("resealed manifest with negative rows: %v, want a field-rule error", err)
	}
}
