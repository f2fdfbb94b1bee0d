package sortwrite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/servingsnap/internal/testlake"
)

// FuzzBuildInput mutates a valid Parquet file and builds it: malformed
// input must end in an error naming the file (its name appears in the
// message), never a panic or a hang, and nothing may be published on
// error.
func FuzzBuildInput(f *testing.F) {
	dir := f.TempDir()
	testlake.WriteParquet(f, dir, "seed.parquet", 3,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "B", "A", "C", "B")},
		testlake.Col{Name: "period", Vals: testlake.Strs("2020", "2020-02", "2021", "2020-W03", "2020Q3")},
		testlake.Col{Name: "value", Vals: []any{1.0, nil, 3.0, 4.0, 5.0}},
		testlake.Col{Name: "units", Vals: testlake.Strs("x", "y", "x", "z", "y")},
	)
	seed, err := os.ReadFile(filepath.Join(dir, "seed.parquet"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(append(bytes.Clone(seed[:4]), seed[len(seed)-8:]...))
	// Seeds that fail, so the seed run in CI checks the error names the file.
	f.Add([]byte("not parquet at all"))
	f.Add([]byte{})
	flipped := bytes.Clone(seed)
	flipped[len(flipped)-12] ^= 0xff // inside the footer's metadata
	f.Add(flipped)
	body := bytes.Clone(seed)
	for i := 4; i < len(body)/2; i++ {
		body[i] = 0 // pages zeroed, footer intact
	}
	f.Add(body)
	f.Fuzz(func(t *testing.T, b []byte) {
		in, out := t.TempDir(), filepath.Join(t.TempDir(), "DS")
		if err := os.WriteFile(filepath.Join(in, "x.parquet"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := Build(context.Background(), Options{Input: in, Out: out, Parallel: 1, MemoryLimit: 64 << 20})
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("build of a %d-byte input did not finish in 5 s", len(b))
		}
		if err != nil {
			if _, serr := os.Stat(filepath.Join(out, "CURRENT")); serr == nil {
				t.Fatalf("failed build (%v) published CURRENT", err)
			}
			if !strings.Contains(err.Error(), "x.parquet") {
				t.Fatalf("build error does not name the input file x.parquet: %v", err)
			}
		}
	})
}
