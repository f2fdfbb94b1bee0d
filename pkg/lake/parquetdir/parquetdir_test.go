package parquetdir

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
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

// TestListRefusesNonRegular: a .parquet name that is a named pipe is an
// error naming it, not a hang (opening a FIFO blocks until a writer comes).
func TestListRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.parquet"), []byte("x"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "b.parquet"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := List(dir)
	if err == nil || !strings.Contains(err.Error(), "b.parquet: not a regular file (a named pipe)") {
		t.Fatalf("List = %v", err)
	}
	if err := CheckRegular(filepath.Join(dir, "a.parquet")); err != nil {
		t.Fatal(err)
	}
	if err := CheckRegular("/dev/null"); err == nil || !strings.Contains(err.Error(), "a character device") {
		t.Fatalf("CheckRegular(/dev/null) = %v", err)
	}
}
