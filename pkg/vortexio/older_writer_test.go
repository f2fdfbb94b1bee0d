package vortexio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// olderWriters are earlier releases of the reference implementation whose
// fixtures are kept (testdata/vortex-data-VERSION/NAME.vortex, the same
// tables as testdata/NAME.arrow): files that release wrote stay readable
// after the reference moves on.
var olderWriters = []string{"0.90"}

// TestReadOlderWriterFixtures reads every fixture an older reference
// release wrote and checks it against the source table.
func TestReadOlderWriterFixtures(t *testing.T) {
	for _, v := range olderWriters {
		dir := filepath.Join("testdata", "vortex-data-"+v)
		ms, err := filepath.Glob(filepath.Join(dir, "*.vortex"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) < len(fixtureNames(t)) {
			t.Fatalf("%s: %d fixtures, want one per table (%d)", dir, len(ms), len(fixtureNames(t)))
		}
		for _, m := range ms {
			name := strings.TrimSuffix(filepath.Base(m), ".vortex")
			t.Run(v+"/"+name, func(t *testing.T) {
				if _, err := os.Stat(filepath.Join("testdata", name+".arrow")); err != nil {
					t.Fatalf("no source table for %s: %v", m, err)
				}
				f, err := OpenFile(m)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				sc, want := readIPCFile(t, filepath.Join("testdata", name+".arrow"))
				if f.NumRows() != int64(wantLen(want)) {
					t.Fatalf("rows %d, want %d", f.NumRows(), wantLen(want))
				}
				for i := range want {
					col := sc.Field(i).Name
					rec, err := f.ReadRange([]string{col}, 0, f.NumRows())
					if err != nil {
						t.Fatalf("column %s: %v", col, err)
					}
					sameArray(t, col, want[i], rec.Column(0))
					rec.Release()
				}
			})
		}
	}
}
