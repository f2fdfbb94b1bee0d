package convert

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/servingsnap/internal/testlake"
)

// TestRoundTrips converts a Parquet file through every format pair and
// checks the rows survive unchanged.
func TestRoundTrips(t *testing.T) {
	dir := t.TempDir()
	testlake.WriteParquet(t, dir, "in.parquet", 2,
		testlake.Col{Name: "series_id", Vals: testlake.Strs("A", "B", "Ü€", "")},
		testlake.Col{Name: "period", Vals: []any{arrow.Date32(-1), arrow.Date32(0), arrow.Date32(18262), arrow.Date32(20000)}},
		testlake.Col{Name: "value", Vals: []any{1.5, nil, math.Copysign(0, -1), 1e300}},
	)
	in := filepath.Join(dir, "in.parquet")
	want := readAll(t, in)
	paths := []string{in}
	for _, ext := range []string{".arrow", ".vortex", ".parquet", ".vortex", ".arrow"} {
		out := filepath.Join(dir, "step"+itoa(len(paths))+ext)
		st, err := Convert(context.Background(), paths[len(paths)-1], out, false)
		if err != nil {
			t.Fatalf("%s -> %s: %v", paths[len(paths)-1], out, err)
		}
		if st.Rows != 4 {
			t.Fatalf("%s: %d rows", out, st.Rows)
		}
		paths = append(paths, out)
	}
	got := readAll(t, paths[len(paths)-1])
	if got != want {
		t.Fatalf("after %v:\n got %s\nwant %s", paths, got, want)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	testlake.WriteParquet(t, dir, "in.parquet", 0, testlake.Col{Name: "x", Vals: testlake.Floats(1)})
	in := filepath.Join(dir, "in.parquet")
	os.WriteFile(filepath.Join(dir, "exists.arrow"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.vortex"), []byte("not vortex at all"), 0o644)
	cases := []struct {
		in, out, want string
		format        bool // an ErrFormat (a usage error)
	}{
		{in, filepath.Join(dir, "out.tsv"), `unknown extension ".tsv"`, true},
		{filepath.Join(dir, "in.csv"), filepath.Join(dir, "out.parquet"), "CSV is an output format only", true},
		{in, filepath.Join(dir, "exists.arrow"), "exists", false},
		{filepath.Join(dir, "missing.parquet"), filepath.Join(dir, "o.arrow"), "missing.parquet", false},
		{filepath.Join(dir, "bad.vortex"), filepath.Join(dir, "o2.arrow"), "", false},
	}
	for _, tc := range cases {
		_, err := Convert(context.Background(), tc.in, tc.out, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Convert(%s, %s) = %v, want an error containing %q", tc.in, tc.out, err, tc.want)
		}
		if errors.Is(err, ErrFormat) != tc.format {
			t.Errorf("Convert(%s, %s) = %v: errors.Is(ErrFormat) = %v, want %v", tc.in, tc.out, err, !tc.format, tc.format)
		}
		if _, serr := os.Stat(filepath.Join(dir, "."+filepath.Base(tc.out)+".tmp")); serr == nil {
			t.Errorf("temporary file left behind for %s", tc.out)
		}
	}
}

// readAll renders a file's rows as text, through this package's sources.
func readAll(t *testing.T, path string) string {
	t.Helper()
	f, _ := FormatOf(path)
	src, err := openSource(context.Background(), path, f)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var sb strings.Builder
	for {
		rec, err := src.Next()
		if err != nil {
			break
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			for c := 0; c < int(rec.NumCols()); c++ {
				sb.WriteString(rec.ColumnName(c) + "=" + valueString(rec.Column(c), r) + " ")
			}
			sb.WriteString("\n")
		}
		rec.Release()
	}
	return sb.String()
}

func valueString(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	if d, ok := a.(*array.Dictionary); ok {
		return valueString(d.Dictionary(), d.GetValueIndex(i))
	}
	return a.ValueStr(i)
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestDamagedInputs flips bytes of valid files of every format: a convert
// either succeeds or fails with an error naming the input, never panics,
// and never leaves a temporary file behind.
func TestDamagedInputs(t *testing.T) {
	dir := t.TempDir()
	testlake.WriteParquet(t, dir, "in.parquet", 2,
		testlake.Col{Name: "s", Vals: testlake.Strs("A", "B", "C")},
		testlake.Col{Name: "v", Vals: testlake.Floats(1, 2, 3)})
	in := filepath.Join(dir, "in.parquet")
	for _, ext := range []string{".arrow", ".vortex"} {
		if _, err := Convert(context.Background(), in, filepath.Join(dir, "in"+ext), false); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"in.parquet", "in.arrow", "in.vortex"} {
		good, _ := os.ReadFile(filepath.Join(dir, name))
		for i := 0; i < len(good); i += max(1, len(good)/200) {
			bad := append([]byte(nil), good...)
			bad[i] ^= 0xff
			src := filepath.Join(dir, "bad"+filepath.Ext(name))
			os.WriteFile(src, bad, 0o644)
			out := filepath.Join(dir, "out.arrow")
			_, err := Convert(context.Background(), src, out, true)
			if err != nil && !strings.Contains(err.Error(), "bad"+filepath.Ext(name)) {
				t.Errorf("%s byte %d: error %q does not name the input", name, i, err)
			}
			if _, serr := os.Stat(filepath.Join(dir, ".out.arrow.tmp")); serr == nil {
				t.Fatalf("%s byte %d: temporary output left behind", name, i)
			}
		}
	}
}
