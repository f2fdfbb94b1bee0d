package vortexio

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// readIPCFile reads an Arrow IPC file as one batch per column (concatenated).
func readIPCFile(t testing.TB, path string) (*arrow.Schema, []arrow.Array) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := ipc.NewFileReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sc := r.Schema()
	parts := make([][]arrow.Array, sc.NumFields())
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		for c := range parts {
			parts[c] = append(parts[c], rec.Column(c))
		}
	}
	cols := make([]arrow.Array, sc.NumFields())
	for c := range cols {
		if len(parts[c]) == 0 {
			b := array.NewBuilder(memory.DefaultAllocator, sc.Field(c).Type)
			cols[c] = b.NewArray()
			continue
		}
		cols[c], err = array.Concatenate(parts[c], memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
	}
	return sc, cols
}

// sameArray compares values and validity; floats compare bitwise except that
// any NaN equals any NaN (so -0.0 differs from 0.0).
func sameArray(t testing.TB, name string, want, got arrow.Array) bool {
	t.Helper()
	if want.Len() != got.Len() {
		t.Errorf("%s: %d rows, want %d", name, got.Len(), want.Len())
		return false
	}
	if want.DataType().ID() == arrow.NULL {
		if got.NullN() != got.Len() {
			t.Errorf("%s: want all null", name)
			return false
		}
		return true
	}
	for i := 0; i < want.Len(); i++ {
		if want.IsNull(i) != got.IsNull(i) {
			t.Errorf("%s: row %d null=%v, want %v", name, i, got.IsNull(i), want.IsNull(i))
			return false
		}
	}
	switch w := want.(type) {
	case *array.Float64:
		g, ok := got.(*array.Float64)
		if !ok {
			t.Errorf("%s: got %s, want float64", name, got.DataType())
			return false
		}
		for i := 0; i < w.Len(); i++ {
			a, b := w.Value(i), g.Value(i)
			if w.IsValid(i) && math.Float64bits(a) != math.Float64bits(b) && !(math.IsNaN(a) && math.IsNaN(b)) {
				t.Errorf("%s: row %d = %v, want %v", name, i, b, a)
				return false
			}
		}
		return true
	case *array.Float32:
		g, ok := got.(*array.Float32)
		if !ok {
			t.Errorf("%s: got %s, want float32", name, got.DataType())
			return false
		}
		for i := 0; i < w.Len(); i++ {
			a, b := w.Value(i), g.Value(i)
			if w.IsValid(i) && math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
				t.Errorf("%s: row %d = %v, want %v", name, i, b, a)
				return false
			}
		}
		return true
	case *array.Struct:
		g, ok := got.(*array.Struct)
		if !ok {
			t.Errorf("%s: got %s, want struct", name, got.DataType())
			return false
		}
		for k := 0; k < w.NumField(); k++ {
			// Child values under a null parent are unspecified: mask them.
			if !sameMasked(t, name+"."+w.DataType().(*arrow.StructType).Field(k).Name, w, w.Field(k), g.Field(k)) {
				return false
			}
		}
		return true
	}
	if !arrow.TypeEqual(want.DataType(), got.DataType()) {
		t.Errorf("%s: type %s, want %s", name, got.DataType(), want.DataType())
		return false
	}
	if !array.Equal(want, got) {
		for i := 0; i < want.Len(); i++ {
			if want.IsValid(i) && want.ValueStr(i) != got.ValueStr(i) {
				t.Errorf("%s: row %d = %q, want %q", name, i, trunc(got.ValueStr(i)), trunc(want.ValueStr(i)))
				return false
			}
		}
		t.Errorf("%s: arrays differ", name)
		return false
	}
	return true
}

func sameMasked(t testing.TB, name string, parent, want, got arrow.Array) bool {
	for i := 0; i < parent.Len(); i++ {
		if parent.IsNull(i) {
			continue
		}
		if want.IsNull(i) != got.IsNull(i) || (want.IsValid(i) && want.ValueStr(i) != got.ValueStr(i)) {
			t.Errorf("%s: row %d = %q, want %q", name, i, got.ValueStr(i), want.ValueStr(i))
			return false
		}
	}
	return true
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func fixtureNames(t testing.TB) []string {
	ms, err := filepath.Glob("testdata/*.vortex")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, strings.TrimSuffix(filepath.Base(m), ".vortex"))
	}
	return out
}

func sliceArr(a arrow.Array, i, j int64) arrow.Array { return array.NewSlice(a, i, j) }
