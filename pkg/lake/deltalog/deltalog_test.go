package deltalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/pkg/lake/objstore"
)

var fixture = filepath.Join("..", "..", "..", "testdata", "delta", "spark_dv")

// encodeZ85 is the inverse of DecodeZ85 (test only): inline DVs for tests.
func encodeZ85(b []byte) string {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	var out []byte
	for i := 0; i < len(b); i += 4 {
		v := binary.BigEndian.Uint32(b[i:])
		var g [5]byte
		for j := 4; j >= 0; j-- {
			g[j] = z85Alphabet[v%85]
			v /= 85
		}
		out = append(out, g[:]...)
	}
	return string(out)
}

// An inline DV: the portable bitmap of the fixture's first on-disk DV
// (Spark wrote it), Z85-encoded into the descriptor.
func TestInlineDV(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixture, "deletion_vector_c985f89b-0144-4bd9-8068-f0b7a796288a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	size := binary.BigEndian.Uint32(b[1:])
	data := b[5 : 5+size]
	dv := &DeletionVector{StorageType: "i", PathOrInlineDv: encodeZ85(data), SizeInBytes: int32(size)}
	onDisk := &DeletionVector{StorageType: "p", PathOrInlineDv: filepath.Join(fixture, "deletion_vector_c985f89b-0144-4bd9-8068-f0b7a796288a.bin"), SizeInBytes: int32(size)}
	st := objstore.Local{Root: fixture}
	want, err := (&DeletionVector{StorageType: "p", PathOrInlineDv: onDisk.PathOrInlineDv, SizeInBytes: int32(size), Cardinality: -1}).loadRaw(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	dv.Cardinality, onDisk.Cardinality = int64(len(want)), int64(len(want))
	got, err := dv.Load(context.Background(), st, 1000)
	if err != nil || !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("inline %v (%v), on disk %v", got, err, want)
	}
	if _, err := dv.Load(context.Background(), st, int64(got[len(got)-1])); err == nil {
		t.Fatal("a row past the file's end was accepted")
	}
	dv.Cardinality--
	if _, err := dv.Load(context.Background(), st, 1000); err == nil {
		t.Fatal("a wrong cardinality was accepted")
	}
}

// PROTOCOL.md's inline example ("JSON Example 3") decodes, as standard
// Z85, to a native-format header written big-endian, which Delta's own
// readers (little-endian throughout) refuse too: the error says why.
func TestInlineDVProtocolExampleRefused(t *testing.T) {
	dv := &DeletionVector{StorageType: "i", PathOrInlineDv: "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", SizeInBytes: 40, Cardinality: 6}
	if _, err := dv.Load(context.Background(), nil, 100); err == nil || !strings.Contains(err.Error(), "magic number") {
		t.Fatalf("err %v", err)
	}
}

// The relative-path example of PROTOCOL.md ("JSON Example 1").
func TestDVPathProtocolExample(t *testing.T) {
	dv := &DeletionVector{StorageType: "u", PathOrInlineDv: "ab^-aqEH.-t@S}K{vb[*k^"}
	p, err := dv.Path()
	if err != nil {
		t.Fatal(err)
	}
	if want := "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"; p != want {
		t.Fatalf("path %q, want %q", p, want)
	}
}

func TestOpenSparkFixture(t *testing.T) {
	st := objstore.Local{Root: fixture}
	s, err := Open(context.Background(), st, Options{Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 8 || s.Mapping != MappingName || !strings.Contains(s.Checkpoint, "00000000000000000006.checkpoint.") || len(s.Files) != 4 {
		t.Fatalf("version %d mapping %s checkpoint %q files %d", s.Version, s.Mapping, s.Checkpoint, len(s.Files))
	}
	dvs := 0
	for _, f := range s.Files {
		if f.DeletionVector != nil {
			dvs++
		}
	}
	if dvs != 3 {
		t.Fatalf("%d files with deletion vectors, want 3", dvs)
	}
	if c, _ := s.Column("comment"); c.Physical == "comment" || c.Physical == "" {
		t.Fatalf("renamed column keeps its physical name: %+v", c)
	}
	if _, err := Open(context.Background(), st, Options{Version: 9}); err == nil || !strings.Contains(err.Error(), "latest version") {
		t.Fatalf("version 9: %v", err)
	}
}

// copyLog copies the fixture's log, so a test can damage it.
func copyFixture(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	filepath.Walk(fixture, func(p string, info os.FileInfo, err error) error {
		rel, _ := filepath.Rel(fixture, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, _ := os.ReadFile(p)
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	return dst
}

func TestOpenErrorsNameTheDamage(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		damage func(dir string)
		opt    Options
		want   string
	}{
		{"corrupt commit line", func(d string) {
			p := filepath.Join(d, LogDir, "00000000000000000007.json")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, []byte("{\"add\": {\"path\": 12\n")...), 0o644)
		}, Options{Version: -1}, "00000000000000000007.json: line"},
		{"missing commit", func(d string) {
			os.Remove(filepath.Join(d, LogDir, "00000000000000000007.json"))
		}, Options{Version: -1}, "00000000000000000007.json is missing"},
		{"unknown reader feature", func(d string) {
			os.WriteFile(filepath.Join(d, LogDir, "00000000000000000009.json"),
				[]byte(`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["columnMapping","catalogManaged","zorder9"]}}`+"\n"), 0o644)
		}, Options{Version: -1}, "reader features catalogManaged, zorder9 are not implemented"},
		{"reader version", func(d string) {
			os.WriteFile(filepath.Join(d, LogDir, "00000000000000000009.json"), []byte(`{"protocol":{"minReaderVersion":4,"minWriterVersion":7}}`+"\n"), 0o644)
		}, Options{Version: -1}, "minReaderVersion 4"},
		{"corrupt sidecar", func(d string) {
			ents, _ := os.ReadDir(filepath.Join(d, LogDir, "_sidecars"))
			for _, e := range ents {
				os.WriteFile(filepath.Join(d, LogDir, "_sidecars", e.Name()), []byte("PAR1 not really"), 0o644)
			}
		}, Options{Version: -1}, "_sidecars/"},
		{"not a table", func(d string) { os.RemoveAll(filepath.Join(d, LogDir)) }, Options{Version: -1}, "not a Delta table"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := copyFixture(t)
			c.damage(d)
			_, err := Open(ctx, objstore.Local{Root: d}, c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one containing %q", err, c.want)
			}
			if c.name == "unknown reader feature" && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("not ErrUnsupported: %v", err)
			}
		})
	}
}

func TestDVFileChecksum(t *testing.T) {
	d := copyFixture(t)
	st := objstore.Local{Root: d}
	s, err := Open(context.Background(), st, Options{Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	var dv *DeletionVector
	for _, f := range s.Files {
		if f.DeletionVector != nil {
			dv = f.DeletionVector
		}
	}
	if _, err := dv.Load(context.Background(), st, 1000); err != nil {
		t.Fatal(err)
	}
	p, _ := dv.Path()
	b, _ := os.ReadFile(filepath.Join(d, p))
	off := 1
	if dv.Offset != nil {
		off = int(*dv.Offset)
	}
	b[off+4+2] ^= 0xff
	os.WriteFile(filepath.Join(d, p), b, 0o644)
	if _, err := dv.Load(context.Background(), st, 1000); err == nil || !strings.Contains(err.Error(), "CRC-32") {
		t.Fatalf("damaged vector: %v", err)
	}
}

func FuzzParseActions(f *testing.F) {
	ents, _ := filepath.Glob(filepath.Join(fixture, LogDir, "*.json"))
	for _, e := range ents {
		b, _ := os.ReadFile(e)
		f.Add(b)
	}
	f.Add([]byte(`{"add":{"path":"a%20b.parquet","partitionValues":{"p":null},"size":1,"modificationTime":1,"dataChange":true,"deletionVector":{"storageType":"u","pathOrInlineDv":"ab^-aqEH.-t@S}K{vb[*k^","offset":1,"sizeInBytes":40,"cardinality":6}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		acts, err := ParseActions(b)
		if err != nil {
			return
		}
		r := &replay{files: map[string]Add{}}
		r.apply(acts, false)
		for _, a := range acts {
			if a.Add != nil && a.Add.DeletionVector != nil && a.Add.DeletionVector.StorageType != "i" {
				if _, err := a.Add.DeletionVector.Path(); err != nil {
					continue
				}
			}
		}
	})
}

func FuzzParseParquetActions(f *testing.F) {
	ents, _ := filepath.Glob(filepath.Join(fixture, LogDir, "_sidecars", "*.parquet"))
	for _, e := range ents {
		b, _ := os.ReadFile(e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseParquetActions(b) // errors are fine; panics and hangs are not
	})
}

// memStore serves one DV file from memory.
type memStore struct{ b []byte }

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func (m memStore) Location(n string) string                         { return n }
func (m memStore) ReadFile(context.Context, string) ([]byte, error) { return m.b, nil }
func (m memStore) ReadDir(context.Context, string) ([]objstore.Entry, error) {
	return nil, os.ErrNotExist
}
func (m memStore) Walk(context.Context, string, func(string) bool) ([]objstore.Entry, error) {
	return nil, os.ErrNotExist
}
func (m memStore) Open(context.Context, string) (objstore.File, int64, error) {
	return memFile{bytes.NewReader(m.b)}, int64(len(m.b)), nil
}

// FuzzDVFile feeds DV file bytes (version byte, size, bitmap, CRC) to Load.
func FuzzDVFile(f *testing.F) {
	inline, _ := DecodeZ85("wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")
	data := inline[:40]
	file := []byte{1}
	file = binary.BigEndian.AppendUint32(file, uint32(len(data)))
	file = append(file, data...)
	file = binary.BigEndian.AppendUint32(file, crc32.ChecksumIEEE(data))
	f.Add(file, int32(1), int32(40), int64(6))
	f.Fuzz(func(t *testing.T, b []byte, off, size int32, card int64) {
		o := off
		dv := &DeletionVector{StorageType: "p", PathOrInlineDv: "/dv.bin", Offset: &o, SizeInBytes: size, Cardinality: card}
		if dv.validate() != nil {
			return
		}
		rows, err := dv.Load(context.Background(), memStore{b}, 1<<20)
		if err == nil && int64(len(rows)) != card {
			t.Fatalf("%d rows, cardinality %d", len(rows), card)
		}
	})
}
