// Package objstore reads files of a lake wherever it lives: a local
// directory or an S3 (or S3-compatible) bucket prefix. The builder, the
// Delta log reader and the Parquet lister see one small interface, so a
// table on object storage is read by the same code as one on disk.
//
// S3 goes through the file IO of github.com/apache/iceberg-go (gocloud's
// s3blob over aws-sdk-go-v2), the same client the Iceberg reader uses, so
// the binary carries one S3 SDK, configured once (see S3Config.Props).
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Entry is one file found by a listing.
type Entry struct {
	Name    string // slash-separated, relative to the store's root
	Size    int64
	ModTime time.Time
}

// File is an open file: random access for Parquet footers and row groups.
type File interface {
	io.ReaderAt
	io.ReadSeeker
	io.Closer
}

// Store reads the files below one root. Names are slash-separated and
// relative to the root, or absolute locations the store can reach
// (a local path or file: URI; an s3:// URI in the same bucket).
type Store interface {
	// Location is how name appears in messages and lineage: a local path
	// or an s3:// URI.
	Location(name string) string
	// ReadFile returns a whole (small) file.
	ReadFile(ctx context.Context, name string) ([]byte, error)
	// ReadDir lists the files directly in dir (no subdirectories), by
	// name. A missing directory is fs.ErrNotExist.
	ReadDir(ctx context.Context, dir string) ([]Entry, error)
	// Walk lists every file below dir, recursively, by name; skip, when
	// not nil, prunes a directory (given relative to the root).
	Walk(ctx context.Context, dir string, skip func(dir string) bool) ([]Entry, error)
	// Open opens a file for random access and returns its size.
	Open(ctx context.Context, name string) (File, int64, error)
}

// S3Config configures access to S3 and S3-compatible stores. Credentials
// come from the standard AWS chain (environment, shared config and
// credentials files, web identity, container and instance roles).
type S3Config struct {
	Endpoint string // e.g. http://127.0.0.1:9000; path-style addressing is used when set
	Region   string // default: from the AWS chain (AWS_REGION, config file)
}

// Props are the iceberg-go file IO properties for this configuration, for
// readers (the Iceberg one) that open the store through iceberg-go.
func (c S3Config) Props() map[string]string {
	p := map[string]string{}
	if c.Endpoint != "" {
		p["s3.endpoint"] = c.Endpoint
	}
	if c.Region != "" {
		p["s3.region"] = c.Region
	}
	return p
}

// IsRemote reports whether loc names object storage rather than a local path.
func IsRemote(loc string) bool {
	return strings.HasPrefix(loc, "s3://") || strings.HasPrefix(loc, "s3a://")
}

// Open returns the store rooted at loc: a local directory, or
// s3://bucket/prefix.
func Open(ctx context.Context, loc string, s3 S3Config) (Store, error) {
	if IsRemote(loc) {
		return openS3(ctx, loc, s3)
	}
	if strings.Contains(loc, "://") && !strings.HasPrefix(loc, "file://") {
		return nil, fmt.Errorf("input %s: unsupported scheme (want a local path or s3://bucket/prefix)", loc)
	}
	dir := strings.TrimPrefix(loc, "file://")
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", loc, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return Local{Root: abs}, nil
}

// Local is a store over a local directory.
type Local struct{ Root string }

func (l Local) path(name string) string {
	if p, ok := strings.CutPrefix(name, "file://"); ok {
		return filepath.FromSlash(p)
	}
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return filepath.FromSlash(name)
	}
	return filepath.Join(l.Root, filepath.FromSlash(name))
}

func (l Local) Location(name string) string { return l.path(name) }

func (l Local) ReadFile(_ context.Context, name string) ([]byte, error) {
	return os.ReadFile(l.path(name))
}

func (l Local) ReadDir(_ context.Context, dir string) ([]Entry, error) {
	des, err := os.ReadDir(l.path(dir))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, d := range des {
		if d.IsDir() {
			continue
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			return nil, err
		}
		out = append(out, Entry{Name: path.Join(dir, d.Name()), Size: info.Size(), ModTime: info.ModTime()})
	}
	return out, nil
}

func (l Local) Walk(_ context.Context, dir string, skip func(string) bool) ([]Entry, error) {
	root := l.path(dir)
	var out []Entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(l.Root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if p == root && !d.IsDir() {
			// A file, or a link to one, where a directory was asked for.
			return &fs.PathError{Op: "walk", Path: root, Err: syscall.ENOTDIR}
		}
		if d.IsDir() {
			if p != root && skip != nil && skip(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			// Follow a symlinked file, as os.Open would.
			if info, err = os.Stat(p); err != nil || info.IsDir() {
				return nil
			}
		}
		out = append(out, Entry{Name: rel, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (l Local) Open(_ context.Context, name string) (File, int64, error) {
	f, err := os.Open(l.path(name))
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if st.IsDir() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is a directory", l.path(name))
	}
	return f, st.Size(), nil
}
