// Package parquetdir lists the Parquet files of a lake directory in publication
// order. The builder reads inputs in this order and the verifier replays
// it: the order decides which of two duplicate rows is "later" for
// --on-duplicate=last, so both must agree exactly, hence one package.
package parquetdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// NotExist is the error for an input that is not there: "input X does not
// exist", matching fs.ErrNotExist (an operand that does not exist, not bad
// data; docs/CLI.md, exit status 2).
func NotExist(input string) error { return notExistError(input) }

type notExistError string

func (e notExistError) Error() string      { return "input " + string(e) + " does not exist" }
func (notExistError) Is(target error) bool { return target == fs.ErrNotExist }

// File is one Parquet file of a lake.
type File struct {
	Rel  string // path relative to the lake directory, slash-separated
	Abs  string // path to open
	Size int64
}

// List returns the Parquet files below dir, sorted with NaturalLess.
// Hidden files and folders ("." and "_" prefixes: _SUCCESS, .crc,
// _delta_log) are skipped; a symlinked dir is followed. A .parquet name
// that is not a regular file (a named pipe, socket or device) is an
// error: opening one would block or never end.
func List(dir string) ([]File, error) {
	dir, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, NotExist(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("input %s is not a directory", dir)
	}
	var out []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && Hidden(name) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !IsParquet(name) {
			return nil
		}
		if err := CheckRegular(p); err != nil {
			return err
		}
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, File{Rel: filepath.ToSlash(rel), Abs: p, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list inputs: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("input %s holds no .parquet files", dir)
	}
	sort.Slice(out, func(i, j int) bool { return NaturalLess(out[i].Rel, out[j].Rel) })
	return out, nil
}

// TableKind reports whether a local directory is a lake table rather
// than a folder of Parquet files: "delta" when it holds _delta_log/,
// "iceberg" when it holds metadata/ with a version-hint.text or a
// *.metadata.json, "" otherwise. (pkg/lake/source does the same over any
// store; this one is for tools that only read local folders.)
func TableKind(dir string) string {
	if st, err := os.Stat(filepath.Join(dir, "_delta_log")); err == nil && st.IsDir() {
		return "delta"
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "metadata"))
	for _, e := range ents {
		if n := e.Name(); n == "version-hint.text" || strings.HasSuffix(n, ".metadata.json") || strings.HasSuffix(n, ".metadata.json.gz") {
			return "iceberg"
		}
	}
	return ""
}

// Hidden reports whether a file or folder name is skipped by List: names
// starting with "." or "_" (_SUCCESS, .crc files, _delta_log).
func Hidden(name string) bool { return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") }

// IsParquet reports whether a file name is read as Parquet (".parquet", any case).
func IsParquet(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".parquet") }

// NaturalLess compares paths bytewise, except that runs of ASCII digits
// compare as numbers: year=999 before year=1000, part-2 before part-10.
func NaturalLess(a, b string) bool {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			na, nb := digitRun(a), digitRun(b)
			ta, tb := strings.TrimLeft(a[:na], "0"), strings.TrimLeft(b[:nb], "0")
			if len(ta) != len(tb) {
				return len(ta) < len(tb)
			}
			if ta != tb {
				return ta < tb
			}
			if na != nb {
				return na < nb
			}
			a, b = a[na:], b[nb:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}
