package query_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/arrowfile"
	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// TestDamagedAttributeIsAnError: an index attribute column with one bad
// string offset (the case that used to panic inside an arrow-go goroutine
// during a query with attributes) opens, since attribute columns are
// checked on first use, and then every request that reaches the column is
// a corruption error naming the index file and the column, while requests
// that do not need it keep working.
func TestDamagedAttributeIsAnError(t *testing.T) {
	_, ds := testsnap.Sample(t, t.TempDir(), "SYN", 120, 5, func(o *sortwrite.Options) { o.BatchRows = 1000 })
	xf := breakOffset(t, ds, "category", 40)

	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatalf("open: %v (attribute columns are checked on first use)", err)
	}
	defer s.Close()
	r, err := query.FromSnapshot("SYN", s)
	if err != nil {
		t.Fatal(err)
	}
	isDamage := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		if !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("%s: %v is not ErrCorrupt", what, err)
		}
		if f, _ := corrupt.File(err); f != xf {
			t.Errorf("%s: corrupt.File = %q, want %q", what, f, xf)
		}
		if !strings.Contains(err.Error(), `"category"`) {
			t.Errorf("%s: %v does not name the column", what, err)
		}
	}
	stream := func(req query.Request) error {
		p, err := query.NewPlan(r, &req, query.Limits{})
		if err != nil {
			return err
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		_, err = p.Stream(context.Background(), mem, 1<<20, func(arrow.RecordBatch) error { return nil })
		return err
	}
	all := query.Selector{Kind: query.ByPrefix}
	isDamage("attributes", stream(query.Request{Select: all, Range: query.AllPeriods, Attributes: true}))
	isDamage("category column", stream(query.Request{Select: all, Range: query.AllPeriods, Columns: []string{"value", "category"}}))
	isDamage("by category", stream(query.Request{Select: query.Selector{Kind: query.ByCategory, Category: "Petroleum"}, Range: query.AllPeriods}))
	if err := stream(query.Request{Select: all, Range: query.AllPeriods, Columns: []string{"value", "units"}}); err != nil {
		t.Errorf("a request without the damaged column: %v", err)
	}
	if err := stream(query.Request{Select: all, Range: query.AllPeriods}); err != nil {
		t.Errorf("a request without attributes: %v", err)
	}
}

// breakOffset makes offset row of the named utf8 attribute column of the
// dataset's index smaller than the one before (or, a code column, its code
// at row one past its values), in the file, and returns
// the index's path as the manifest names it.
func breakOffset(t *testing.T, ds, column string, row int) string {
	t.Helper()
	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xf, _ := s.Manifest.FileByRole(manifest.RoleIndex)
	s.Close()
	path := filepath.Join(ds, xf.Path)
	m, err := arrowfile.Map(path)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := m.Batch(0)
	if err != nil {
		t.Fatal(err)
	}
	idx := rec.Schema().FieldIndices(column)
	if len(idx) != 1 {
		t.Fatalf("no column %q", column)
	}
	var b []byte
	width := int64(4)
	switch col := rec.Column(idx[0]).(type) {
	case *array.String:
		b = binary.LittleEndian.AppendUint32(nil, uint32(col.ValueOffset(row-1)-1))
	case *array.Int8: // a code column (index version 4): a code past its values
		b, width = []byte{127}, 1
	default:
		t.Fatalf("column %q is %s", column, col.DataType())
	}
	vals := rec.Column(idx[0]).Data().Buffers()[1].Bytes()
	pos := int64(uintptr(unsafe.Pointer(&vals[0]))-uintptr(unsafe.Pointer(&m.Data[0]))) + width*int64(row)
	rec.Release()
	m.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
	return xf.Path
}

// TestDamagedSeriesIDIsAnError: the same for the series_id column, which
// is checked on first use too: a lookup bounds-checks its probes (no
// panic), and the first answer, which carries the ids, is a corruption
// error naming the file and the column.
func TestDamagedSeriesIDIsAnError(t *testing.T) {
	_, ds := testsnap.Sample(t, t.TempDir(), "SYN", 120, 5, func(o *sortwrite.Options) { o.BatchRows = 1000 })
	xf := breakOffset(t, ds, "series_id", 40)
	s, err := snapshot.Open(ds, snapshot.Options{})
	if err != nil {
		t.Fatalf("open: %v (series_id is checked on first use)", err)
	}
	defer s.Close()
	r, err := query.FromSnapshot("SYN", s)
	if err != nil {
		t.Fatal(err)
	}
	req := query.Request{Select: query.Selector{Kind: query.ByPrefix}, Range: query.AllPeriods}
	p, err := query.NewPlan(r, &req, query.Limits{})
	if err == nil {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		_, err = p.Stream(context.Background(), mem, 1<<20, func(arrow.RecordBatch) error { return nil })
	}
	if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), `"series_id"`) {
		t.Fatalf("stream = %v, want ErrCorrupt naming series_id", err)
	}
	if f, _ := corrupt.File(err); f != xf {
		t.Errorf("corrupt.File = %q, want %q", f, xf)
	}
	if _, err := snapshot.Open(ds, snapshot.Options{VerifyData: true}); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Errorf("open with VerifyData = %v, want ErrCorrupt at open", err)
	}
}
