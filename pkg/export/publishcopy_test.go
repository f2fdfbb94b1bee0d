package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// memStore is a target store in memory; a Put whose reader fails leaves
// nothing, as objstore's stores leave no partial object.
type memStore map[string][]byte

func (s memStore) Put(_ context.Context, name string, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s[name] = b
	return nil
}

// TestPublishCopy: the copy is the snapshot's portable.parquet byte for
// byte under DATASET/NNNNNN/, and the sidecar names it; a copy whose bytes
// differ from the manifest's record is refused and leaves the sidecar
// unwritten; a snapshot without a portable copy says how to make one.
func TestPublishCopy(t *testing.T) {
	root := t.TempDir()
	withPortable := func(o *sortwrite.Options) {
		o.Extra = append(o.Extra, export.PortableStep(export.PortableOptions{RowGroupRows: 4000}))
	}
	_, dsDir := testsnap.Sample(t, root, "P", 30, 5, withPortable)
	ds, err := dataset.Open(dsDir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ds.CurrentID()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ds.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	pf, _ := m.FileByRole(manifest.RolePortable)
	orig, err := os.ReadFile(ds.Path(pf.Path))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -3600))

	st := memStore{}
	side, err := export.PublishCopy(context.Background(), ds, id, st, at)
	if err != nil {
		t.Fatal(err)
	}
	obj := "P/" + dataset.FormatID(id) + "/portable.parquet"
	if !bytes.Equal(st[obj], orig) {
		t.Errorf("%s holds %d bytes, not the snapshot's %d", obj, len(st[obj]), len(orig))
	}
	want := export.CopySidecar{Format: export.CopySidecarFormat, Dataset: "P", SnapshotID: id, Created: m.Created,
		Path: dataset.FormatID(id) + "/portable.parquet", Size: pf.Size, Rows: pf.Rows, RowGroups: pf.Batches,
		Checksum: pf.Checksum, Published: "2026-01-02T04:04:05Z"}
	if side != want {
		t.Errorf("sidecar %+v\nwant    %+v", side, want)
	}
	var written export.CopySidecar
	if err := json.Unmarshal(st["P/portable.json"], &written); err != nil || written != want {
		t.Errorf("portable.json = %s (%v), want %+v", st["P/portable.json"], err, want)
	}

	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		errHas string
	}{
		{"a flipped byte", func(b []byte) []byte { c := bytes.Clone(b); c[len(c)/2] ^= 0xff; return c }, "damaged, not published"},
		{"cut short", func(b []byte) []byte { return b[:len(b)-10] }, "the manifest says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(ds.Path(pf.Path), tc.damage(orig), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(ds.Path(pf.Path), orig, 0o644)
			st := memStore{}
			_, err := export.PublishCopy(context.Background(), ds, id, st, at)
			if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "portable.parquet") {
				t.Errorf("PublishCopy = %v, want an error naming the file and %q", err, tc.errHas)
			}
			if len(st) != 0 {
				t.Errorf("a refused copy wrote %d objects", len(st))
			}
		})
	}

	_, plainDir := testsnap.Sample(t, filepath.Join(root, "plain"), "Q", 5, 1, nil)
	plain, err := dataset.Open(plainDir)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := plain.CurrentID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := export.PublishCopy(context.Background(), plain, pid, memStore{}, at); err == nil || !strings.Contains(err.Error(), "build it with snapbuild build --portable") {
		t.Errorf("PublishCopy of a snapshot without a copy = %v", err)
	}
}
