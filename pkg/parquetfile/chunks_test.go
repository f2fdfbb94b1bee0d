package parquetfile_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/energyscope/servingsnap/internal/testlake"
	"github.com/energyscope/servingsnap/pkg/parquetfile"
)

// sample writes a Parquet file of two float columns in two row groups,
// large enough that its pages dwarf its footer, and returns its bytes.
func sample(t *testing.T) []byte {
	t.Helper()
	a, b := make([]any, 50000), make([]any, 50000)
	for i := range a {
		a[i], b[i] = math.Sin(float64(i)), math.Cos(float64(i))
	}
	dir := t.TempDir()
	testlake.WriteParquet(t, dir, "s.parquet", 25000, testlake.Col{Name: "a", Vals: a}, testlake.Col{Name: "b", Vals: b})
	data, err := os.ReadFile(filepath.Join(dir, "s.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCheckChunks(t *testing.T) {
	good := sample(t)
	// Dropping page bytes after the leading magic keeps the footer readable
	// while the last chunks' absolute ranges now run past the file's end.
	const cut = 64 << 10
	short := append(append([]byte{}, good[:4]...), good[4+cut:]...)
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" for no error
	}{
		{"whole file", good, ""},
		{"pages cut out", short, "row group 1 column 1 (b): chunk at offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.parquet")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
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
