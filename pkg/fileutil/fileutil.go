// Package fileutil holds the few file-system primitives that publishing an
// immutable snapshot depends on: durable writes (fsync of file and directory),
// atomic replace by rename, exclusive locks, and whole-file checksums.
//
// They live apart from the manifest and snapshot code because every writer
// (build, rollback, gc, compaction) needs the same crash-safety rules, and
// getting them right once is easier than getting them right five times.
package fileutil

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// ChecksumPrefix names the checksum algorithm in every checksum string we
// write ("xxh64:" + 16 lowercase hex digits). xxHash64 runs near memory
// bandwidth, so verifying a multi-GB data file costs far less than reading
// it from disk; it detects corruption, it is not meant to resist tampering.
const ChecksumPrefix = "xxh64:"

// NewHash returns the hash whose Sum is rendered by FormatChecksum.
func NewHash() hash.Hash64 { return xxhash.New() }

// FormatChecksum renders a finished hash as "xxh64:<hex>".
func FormatChecksum(h hash.Hash64) string {
	var b [8]byte
	v := h.Sum64()
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return ChecksumPrefix + hex.EncodeToString(b[:])
}

// ValidChecksum reports whether s has the form FormatChecksum produces.
func ValidChecksum(s string) bool {
	h, ok := strings.CutPrefix(s, ChecksumPrefix)
	if !ok || len(h) != 16 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ChecksumFile hashes a whole file and returns its checksum and size.
func ChecksumFile(path string) (sum string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := NewHash()
	size, err = io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", path, err)
	}
	return FormatChecksum(h), size, nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed in
// it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// SyncFile fsyncs a file by path.
func SyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// WriteFileAtomic replaces path with data so that a reader (or a crash) sees
// either the old content or the new, never a mix: write a temporary file in
// the same directory, fsync it, rename it over path, fsync the directory.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", tmp, err), os.Remove(tmp))
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("rename %s: %w", tmp, err), os.Remove(tmp))
	}
	return SyncDir(dir)
}

// SyncTree fsyncs every regular file below dir and then every directory,
// deepest first, so that a later rename of dir publishes durable content.
func SyncTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		if d.Type().IsRegular() {
			return SyncFile(p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := SyncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
