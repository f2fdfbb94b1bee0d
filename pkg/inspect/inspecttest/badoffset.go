package inspecttest

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// BreakIndexOffset gives CURRENT's index sidecar in the dataset at ds one
// bad string offset (the middle offset of series_id points far past the
// value buffer) and reseals the file's checksum in the manifest, so only a
// structural check can tell: a fault that once made snapverify and
// snapinspect panic.
func BreakIndexOffset(t testing.TB, ds string) {
	t.Helper()
	d, err := dataset.Open(ds)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Current()
	if err != nil {
		t.Fatal(err)
	}
	xf, _ := m.FileByRole(manifest.RoleIndex)
	p := d.Path(xf.Path)
	file, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	x, err := arrowfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := x.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	ids := rec.Column(index.ColumnSeriesID).Data()
	offs := bytes.Clone(ids.Buffers()[1].Bytes()[ids.Offset()*4 : (ids.Offset()+ids.Len()+1)*4])
	rec.Release()
	x.Close()
	at := bytes.Index(file, offs)
	if at < 0 || ids.Len() < 2 {
		t.Fatal("series_id offsets not found in the index file")
	}
	binary.LittleEndian.PutUint32(file[at+4*(ids.Len()/2):], 1<<30)
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, file, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, _, err := fileutil.ChecksumFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Files {
		if m.Files[i].Path == xf.Path {
			m.Files[i].Checksum = sum
		}
	}
	b, err := manifest.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	mp := d.Path(dataset.ManifestPath(m.SnapshotID))
	os.Chmod(mp, 0o644)
	if err := os.WriteFile(mp, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
