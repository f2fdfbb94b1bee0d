package snapshot

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/fileutil"
	"github.com/energyscope/servingsnap/pkg/index"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// fileOffset is where b lies in the mapping data: b must alias it (a
// buffer of a mapped batch).
func fileOffset(t *testing.T, data, b []byte) int64 {
	t.Helper()
	base, p := uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(data)) {
		t.Fatalf("buffer at %#x (%d bytes) is not inside the mapping [%#x, +%d)", p, len(b), base, len(data))
	}
	return int64(p - base)
}

// TestIndexIsMapped: a version-4 index is read where it lies. Every buffer
// of every index column, fixed and attribute, aliases the file's mapping:
// opening copies none of it onto the heap (which is what made RssAnon grow
// with the number of series before version 2).
func TestIndexIsMapped(t *testing.T) {
	s, err := Open(sample(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Manifest.FormatVersion != manifest.Version || s.Index().Version() != index.Version {
		t.Fatalf("format %d index %s, want the current versions", s.Manifest.FormatVersion, s.Index().Version())
	}
	rec := s.Index().Record()
	if _, attrs := s.Index().Attributes(); len(attrs) < 3 {
		t.Fatalf("%d attribute columns; the sample should have several", len(attrs))
	}
	checked := 0
	for i, c := range rec.Columns() {
		for _, b := range c.Data().Buffers() {
			if b == nil || b.Len() == 0 {
				continue
			}
			fileOffset(t, s.index.Data, b.Bytes()) // fails unless inside the mapping
			checked++
		}
		if c.DataType().ID() == arrow.DICTIONARY {
			t.Errorf("column %d is %s", i, c.DataType())
		}
	}
	if int64(checked) < rec.NumCols() {
		t.Fatalf("only %d buffers checked", checked)
	}
	// A code column is handed out as a dictionary over the mapped codes.
	coded := 0
	for i, f := range s.Index().AttributeFields() {
		if f.Type.ID() != arrow.DICTIONARY {
			continue
		}
		a, err := s.Index().Attribute(i)
		if err != nil {
			t.Fatal(err)
		}
		fileOffset(t, s.index.Data, a.(*array.Dictionary).Indices().Data().Buffers()[1].Bytes())
		coded++
	}
	if coded < 2 {
		t.Fatalf("%d code columns; the sample's units, category and frequency should be", coded)
	}
}

// TestOpenRefusesBadIndexColumns: what arrow-go would trust in the index
// (the offsets of every utf8 column) is checked before anything uses it.
// Each mutant rewrites one offset in place, optionally with every checksum
// recomputed so that only the structural check can catch it, and must be
// refused as corruption naming the index file and the column; none may
// panic. Each string column is checked at open with VerifyData, else on
// its first use (Index.IDs, Index.Attribute), which is when a query would
// hand it to arrow-go.
func TestOpenRefusesBadIndexColumns(t *testing.T) {
	type mutant struct {
		name   string
		column string
		row    int                             // which offset
		value  func(offs []int32, n int) int32 // its new value
		want   string                          // in the message
	}
	cases := []mutant{
		{"id offset decreases", index.ColSeriesID, 7, func(o []int32, _ int) int32 { return o[6] - 1 }, "must not decrease"},
		{"id offset jumps past the next", index.ColSeriesID, 50, func(o []int32, _ int) int32 { return o[52] + 1 }, "must not decrease"},
		{"id offset huge", index.ColSeriesID, 3, func([]int32, int) int32 { return math.MaxInt32 }, "must not decrease"},
		{"id first offset negative", index.ColSeriesID, 0, func([]int32, int) int32 { return -4 }, "negative"},
		{"attribute offset decreases", "name", 11, func(o []int32, _ int) int32 { return o[10] - 3 }, "must not decrease"},
		{"attribute offset huge", "name", 120, func([]int32, int) int32 { return 1 << 30 }, "must not decrease"},
		{"attribute first offset negative", "name", 0, func([]int32, int) int32 { return math.MinInt32 }, "negative"},
		// units, category and frequency are code columns (index version 4):
		// value is the new code.
		{"attribute code past its values", "units", 11, func([]int32, int) int32 { return 120 }, "outside"},
		{"attribute code negative", "category", 90, func([]int32, int) int32 { return -1 }, "outside"},
		{"attribute last code past its values", "frequency", 199, func([]int32, int) int32 { return 100 }, "outside"},
	}
	for _, tc := range cases {
		for _, resum := range []bool{false, true} {
			name := tc.name
			if resum {
				name += ", checksums recomputed"
			}
			t.Run(name, func(t *testing.T) {
				ds := sample(t)
				xf := mutateIndexOffset(t, ds, tc.column, tc.row, tc.value, resum)
				s, err := Open(ds, Options{VerifyData: resum})
				if err == nil && !resum {
					// Opened: the column is checked on its first use.
					x := s.Index()
					pos := slices.IndexFunc(x.AttributeFields(), func(f arrow.Field) bool { return f.Name == tc.column })
					if tc.column == index.ColSeriesID {
						x.Lookup("PET.NOPE") // bounds-checked probes: no panic, no pass
						_, err = x.IDs()
					} else {
						_, err = x.Attribute(pos)
					}
					for i := range x.AttributeFields() {
						if _, aerr := x.Attribute(i); (aerr != nil) != (i == pos) {
							t.Errorf("attribute %d: %v", i, aerr)
						}
					}
					if cerr := x.Check(); cerr == nil {
						t.Error("Check passes a damaged index")
					}
					s.Close()
				} else if err == nil {
					s.Close()
					t.Fatal("opened an index with a bad offset")
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("%v is not ErrCorrupt", err)
				}
				if got, ok := corrupt.File(err); !ok || got != xf {
					t.Errorf("corrupt.File = %q, want %q", got, xf)
				}
				for _, w := range []string{xf, `"` + tc.column + `"`, tc.want} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%v does not say %q", err, w)
					}
				}
			})
		}
	}
}

// mutateIndexOffset sets offset row of the named utf8 index column of the
// dataset's current snapshot, in the file, and when resum is set rewrites
// the manifest with the index's new checksum (the manifest's own checksum
// recomputed too). It returns the index file's manifest path.
func mutateIndexOffset(t *testing.T, ds, column string, row int, value func([]int32, int) int32, resum bool) string {
	t.Helper()
	s, err := Open(ds, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Manifest
	xf, _ := m.FileByRole(manifest.RoleIndex)
	rec := s.Index().Record()
	col := -1
	for i, f := range rec.Schema().Fields() {
		if f.Name == column {
			col = i
		}
	}
	if col < 0 {
		s.Close()
		t.Fatalf("no index column %q in %v", column, rec.Schema())
	}
	var pos int64
	var b []byte
	switch c := rec.Column(col).(type) {
	case *array.String:
		pos = fileOffset(t, s.index.Data, c.Data().Buffers()[1].Bytes()) + 4*int64(row)
		b = binary.LittleEndian.AppendUint32(nil, uint32(value(c.ValueOffsets(), c.Len())))
	case *array.Int8: // a code column
		pos = fileOffset(t, s.index.Data, c.Data().Buffers()[1].Bytes()) + int64(row)
		b = []byte{byte(value(nil, c.Len()))}
	default:
		s.Close()
		t.Fatalf("column %q is %s", column, rec.Column(col).DataType())
	}
	s.Close()

	path := filepath.Join(ds, xf.Path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !resum {
		return xf.Path
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := fileutil.NewHash()
	h.Write(raw)
	for i := range m.Files {
		if m.Files[i].Role == manifest.RoleIndex {
			m.Files[i].Checksum = fileutil.FormatChecksum(h)
		}
	}
	mb, err := manifest.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ds, dataset.ManifestPath(m.SnapshotID)), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	return xf.Path
}
