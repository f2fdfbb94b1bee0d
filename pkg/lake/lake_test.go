package lake

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestNaturalLess(t *testing.T) {
	ordered := []string{"a.parquet", "year=999/a.parquet", "year=0999/a.parquet", "year=1000/a.parquet", "year=2019/part-2.parquet", "year=2019/part-10.parquet"}
	for i := range ordered {
		for j := range ordered {
			if got := NaturalLess(ordered[i], ordered[j]); got != (i < j) {
				t.Errorf("NaturalLess(%q, %q) = %v", ordered[i], ordered[j], got)
			}
		}
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"year=10/b.parquet", "year=9/a.PARQUET", "_delta_log/x.parquet", ".hidden/y.parquet", "year=9/_SUCCESS", "year=9/notes.txt", "year=9/.a.parquet.crc"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte("x"), 0o644)
	}
	files, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Rel)
	}
	if want := []string{"year=9/a.PARQUET", "year=10/b.parquet"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if _, err := List(t.TempDir()); err == nil {
		t.Fatal("an empty lake listed fine")
	}
}
