package verify

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// fixture is a pristine dataset built once per test binary, and a donor
// dataset whose CURRENT names a second, different snapshot (id 2).
type fixture struct {
	root   string
	ds     string // pristine dataset directory: never modified
	lake   string
	m      *manifest.Manifest
	data   string // manifest-relative paths
	index  string
	port   string // the portable copy (the fixture is built with --portable)
	man    string
	donor  string // donor dataset directory
	donorM *manifest.Manifest
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixRoot string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixRoot != "" {
		os.RemoveAll(fixRoot)
	}
	os.Exit(code)
}

// getFixture builds the fixture on first use.
func getFixture(t testing.TB) *fixture {
	t.Helper()
	fixOnce.Do(func() {
		root, err := os.MkdirTemp("", "verify-fixture-")
		if err != nil {
			t.Fatal(err)
		}
		fixRoot = root
		f := &fixture{root: root}
		small := func(o *sortwrite.Options) { o.BatchRows = 5000 }
		withPortable := func(o *sortwrite.Options) {
			small(o)
			o.Extra = append(o.Extra, export.PortableStep(export.PortableOptions{RowGroupRows: 4000}))
		}
		f.lake, f.ds = testsnap.Sample(t, filepath.Join(root, "a"), "SYN", 200, 3, withPortable)
		f.m = loadManifest(t, f.ds, 0)
		d, _ := f.m.FileByRole(manifest.RoleData)
		x, _ := f.m.FileByRole(manifest.RoleIndex)
		p, _ := f.m.FileByRole(manifest.RolePortable)
		f.data, f.index, f.port, f.man = d.Path, x.Path, p.Path, dataset.ManifestPath(f.m.SnapshotID)

		// The donor: another lake, built twice so its CURRENT is 2.
		lake2, ds2 := testsnap.Sample(t, filepath.Join(root, "b"), "SYN", 120, 11, small)
		testsnap.Build(t, lake2, ds2, small)
		f.donor = ds2
		f.donorM = loadManifest(t, ds2, 0)
		if f.donorM.SnapshotID != 2 {
			t.Fatalf("donor CURRENT is %d, want 2", f.donorM.SnapshotID)
		}
		fix = f
	})
	if fix == nil {
		t.Fatal("fixture failed to build")
	}
	return fix
}

// loadManifest parses manifest id (0: CURRENT's) without Load's identity checks.
func loadManifest(t testing.TB, ds string, id uint64) *manifest.Manifest {
	t.Helper()
	d, err := dataset.Open(ds)
	if err != nil {
		t.Fatal(err)
	}
	if id == 0 {
		if id, err = d.CurrentID(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(d.Path(dataset.ManifestPath(id)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// copyTree copies the regular files below src into dst (created fresh).
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			if d.Name() == dataset.TmpDir {
				return filepath.SkipDir
			}
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// freshCopy copies the pristine dataset into a new directory named like
// it (the dataset name must match the manifest's).
func (f *fixture) freshCopy(t testing.TB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(f.ds))
	copyTree(t, f.ds, dst)
	return dst
}

// readArrow reads every record batch of an Arrow IPC file into memory.
func readArrow(t testing.TB, path string) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return r.Schema(), recs
}

// writeArrow replaces the file at path and records its new size, rows,
// batches and checksum in the dataset's manifest, so that the fast checks
// see a consistent snapshot.
func writeArrow(t testing.TB, ds, rel string, schema *arrow.Schema, recs []arrow.RecordBatch) {
	t.Helper()
	d, _ := dataset.Open(ds)
	p := d.Path(rel)
	os.Remove(p)
	w, err := arrowfile.Create(p, schema, arrowfile.AllowDictionaries)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	editManifest(t, ds, func(m *manifest.Manifest) {
		for i := range m.Files {
			if m.Files[i].Path == rel {
				f := &m.Files[i]
				f.Size, f.Rows, f.Batches, f.Checksum = info.Size, info.Rows, info.Batches, info.Checksum
			}
		}
	})
}

// editManifest rewrites CURRENT's manifest after edit (Marshal validates).
func editManifest(t testing.TB, ds string, edit func(m *manifest.Manifest)) {
	t.Helper()
	m := loadManifest(t, ds, 0)
	edit(m)
	b, err := manifest.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := dataset.Open(ds)
	if err := os.WriteFile(d.Path(dataset.ManifestPath(m.SnapshotID)), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// withColumn returns rec with column i replaced.
func withColumn(rec arrow.RecordBatch, i int, col arrow.Array) arrow.RecordBatch {
	cols := append([]arrow.Array(nil), rec.Columns()...)
	cols[i] = col
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

// concatRows concatenates record batches (or slices of them) into one.
func concatRows(t testing.TB, schema *arrow.Schema, parts ...arrow.RecordBatch) arrow.RecordBatch {
	t.Helper()
	var cols []arrow.Array
	var n int64
	for _, p := range parts {
		n += p.NumRows()
	}
	for c := 0; c < schema.NumFields(); c++ {
		var arrs []arrow.Array
		for _, p := range parts {
			arrs = append(arrs, p.Column(c))
		}
		a, err := array.Concatenate(arrs, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, a)
	}
	return array.NewRecordBatch(schema, cols, n)
}

func uint32s(v []uint32) arrow.Array {
	b := array.NewUint32Builder(memory.DefaultAllocator)
	b.AppendValues(v, nil)
	return b.NewArray()
}

func int64s(v []int64) arrow.Array {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.AppendValues(v, nil)
	return b.NewArray()
}

func dates(v []arrow.Date32, valid []bool) arrow.Array {
	b := array.NewDate32Builder(memory.DefaultAllocator)
	b.AppendValues(v, valid)
	return b.NewArray()
}

func float64s(a arrow.Array, edit func(v []float64, valid []bool)) arrow.Array {
	f := a.(*array.Float64)
	v := append([]float64(nil), f.Float64Values()...)
	valid := make([]bool, f.Len())
	for i := range valid {
		valid[i] = f.IsValid(i)
	}
	edit(v, valid)
	b := array.NewFloat64Builder(memory.DefaultAllocator)
	b.AppendValues(v, valid)
	return b.NewArray()
}

func validity(a arrow.Array) []bool {
	v := make([]bool, a.Len())
	for i := range v {
		v[i] = a.IsValid(i)
	}
	return v
}

// findings summarises a report for failure messages.
func findings(r *Report) string {
	var b bytes.Buffer
	for _, f := range r.Findings {
		b.WriteString("\n  ")
		b.WriteString(f.String())
	}
	return b.String()
}
