package parquetfile_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/parquetfile"
)

// sample writes a Parquet file of two float columns in two row groups,
// large enough that its pages dwarf its footer, at dir/s.parquet.
func sample(t *testing.T, dir string) string {
	t.Helper()
	a, b := make([]any, 50000), make([]any, 50000)
	for i := range a {
		a[i], b[i] = math.Sin(float64(i)), math.Cos(float64(i))
	}
	testlake.WriteParquet(t, dir, "s.parquet", 25000, testlake.Col{Name: "a", Vals: a}, testlake.Col{Name: "b", Vals: b})
	return filepath.Join(dir, "s.parquet")
}

func TestCheckChunks(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  int    // page bytes cut out after the leading magic (testlake.CutPages)
		want string // "" for no error
	}{
		{"whole file", 0, ""},
		{"pages cut out", 64 << 10, "row group 1 column 1 (b): chunk at offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := sample(t, t.TempDir())
			if tc.cut > 0 {
				testlake.CutPages(t, path, tc.cut)
			}
			pf, err := file.OpenParquetFile(path, false)
			if err != nil {
				t.Fatalf("footer: %v", err)
			}
			defer pf.Close()
			err = parquetfile.CheckChunks(pf)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckChunks = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckChunks = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
