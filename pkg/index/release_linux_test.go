package index

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestWriterReleasesBuffers: whichever way a writer ends, its column
// files are closed and nothing but the index (after a successful Close)
// is left in the directory.
func TestWriterReleasesBuffers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		end       func(w *Writer) error
		wantIndex bool
	}{
		{"close", func(w *Writer) error { _, _, err := w.Close(); return err }, true},
		{"abort", func(w *Writer) error { w.Abort(); return nil }, false},
		{"abort then close", func(w *Writer) error {
			w.Abort()
			if _, _, err := w.Close(); err == nil || !strings.Contains(err.Error(), "closed") {
				return err
			}
			return nil
		}, false},
		{"close after a failed add", func(w *Writer) error {
			bad := Series{ID: "0", Location: tiled([]int64{1}, 10)[0], Attrs: make([]Cell, 4)} // not after the last id
			if err := w.Add(&bad); err == nil {
				t.Fatal("an id out of order was added")
			}
			if _, _, err := w.Close(); err == nil {
				t.Fatal("Close after a failed Add succeeded")
			}
			return nil
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := openFiles(t)
			w, vals, attrs := benchWriter(t, 1000)
			dir := filepath.Dir(w.path)
			s := Series{Attrs: make([]Cell, len(attrs))}
			for i := range 1000 {
				fillSeries(&s, i, vals, attrs)
				if err := w.Add(&s); err != nil {
					t.Fatal(err)
				}
			}
			if got := openFiles(t); got <= before {
				t.Fatalf("%d open files while adding, want more than the %d before: the columns are not in files", got, before)
			}
			if err := tc.end(w); err != nil {
				t.Fatal(err)
			}
			if got := openFiles(t); got != before {
				t.Errorf("%d open files after the end, want %d", got, before)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			want := []string(nil)
			if tc.wantIndex {
				want = []string{"index.arrow"}
			}
			if strings.Join(names, ",") != strings.Join(want, ",") {
				t.Errorf("directory holds %q, want %q", names, want)
			}
		})
	}
}

// TestWriterSpillFails: a column that cannot grow in its file (here: the
// directory is gone) fails the Add that needed the room, with the cause.
func TestWriterSpillFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "staged")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(filepath.Join(dir, "index.arrow"), arrow.PrimitiveTypes.Float64, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	s := Series{ID: "A", Location: tiled([]int64{3}, 10)[0]}
	if err := w.Add(&s); err == nil || !strings.Contains(err.Error(), "spill buffer in "+dir) {
		t.Fatalf("Add = %v, want an error naming the spill directory", err)
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestWriterMappedSameBytes: an index written from mapped column buffers
// is byte for byte the one written from Go slices (every golden index of
// the other packages is small enough to stay on the heap).
func TestWriterMappedSameBytes(t *testing.T) {
	defer func(v int) { spillHeapMax = v }(spillHeapMax)
	var files [][]byte
	for _, heapMax := range []int{1 << 30, 0} {
		spillHeapMax = heapMax
		w, vals, attrs := benchWriter(t, 5000)
		s := Series{Attrs: make([]Cell, len(attrs))}
		for i := range 5000 {
			fillSeries(&s, i, vals, attrs)
			if i%7 == 3 {
				s.HasLatest, s.LatestValue = false, Cell{}
				s.Attrs[1] = Cell{}
			}
			if err := w.Add(&s); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(w.path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if string(files[0]) != string(files[1]) {
		t.Fatalf("the index from mapped buffers (%d bytes) differs from the one from the heap (%d bytes)", len(files[1]), len(files[0]))
	}
}
