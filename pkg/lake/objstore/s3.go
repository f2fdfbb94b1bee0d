package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers s3:// and s3a:// with iceberg-go's IO
)

// S3 is a store over s3://bucket/prefix, read through iceberg-go's IO.
type S3 struct {
	Bucket, Prefix string // Prefix has no leading or trailing slash
	scheme         string
	io             icebergio.IO
}

func openS3(ctx context.Context, loc string, cfg S3Config) (*S3, error) {
	scheme, rest, _ := strings.Cut(loc, "://")
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return nil, fmt.Errorf("input %s: no bucket", loc)
	}
	fio, err := icebergio.LoadFS(ctx, cfg.Props(), scheme+"://"+bucket)
	if err != nil {
		return nil, fmt.Errorf("input %s: %w", loc, err)
	}
	if _, ok := fio.(icebergio.ListableIO); !ok {
		return nil, fmt.Errorf("input %s: the S3 file IO cannot list", loc)
	}
	return &S3{Bucket: bucket, Prefix: strings.Trim(prefix, "/"), scheme: scheme, io: fio}, nil
}

// uri returns the full s3:// location of name.
func (s *S3) uri(name string) string {
	if strings.HasPrefix(name, "s3://") || strings.HasPrefix(name, "s3a://") {
		return name
	}
	key := path.Join(s.Prefix, name)
	return s.scheme + "://" + s.Bucket + "/" + key
}

func (s *S3) Location(name string) string { return s.uri(name) }

// IO is the iceberg-go file IO the store reads through.
func (s *S3) IO() icebergio.IO { return s.io }

func (s *S3) ReadFile(_ context.Context, name string) ([]byte, error) {
	if rf, ok := s.io.(icebergio.ReadFileIO); ok {
		b, err := rf.ReadFile(s.uri(name))
		return b, mapNotExist(err)
	}
	f, err := s.io.Open(s.uri(name))
	if err != nil {
		return nil, mapNotExist(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, st.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

func (s *S3) list(dir string, recursive bool, skip func(string) bool) ([]Entry, error) {
	root := s.uri(dir)
	base := s.uri("")
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	var out []Entry
	err := s.io.(icebergio.ListableIO).WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, base)
		if d.IsDir() {
			if strings.TrimSuffix(p, "/") == strings.TrimSuffix(root, "/") {
				return nil
			}
			if !recursive || (skip != nil && skip(strings.TrimSuffix(rel, "/"))) {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, Entry{Name: rel, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, mapNotExist(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *S3) ReadDir(_ context.Context, dir string) ([]Entry, error) {
	out, err := s.list(dir, false, nil)
	if err == nil && len(out) == 0 {
		// Object stores have no empty directories: nothing listed is "not there".
		return nil, &fs.PathError{Op: "readdir", Path: s.uri(dir), Err: fs.ErrNotExist}
	}
	return out, err
}

func (s *S3) Walk(_ context.Context, dir string, skip func(string) bool) ([]Entry, error) {
	return s.list(dir, true, skip)
}

func (s *S3) Open(_ context.Context, name string) (File, int64, error) {
	f, err := s.io.Open(s.uri(name))
	if err != nil {
		return nil, 0, mapNotExist(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// mapNotExist keeps fs.ErrNotExist testable through the blob layer's errors.
func mapNotExist(err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if strings.Contains(err.Error(), "NoSuchKey") || strings.Contains(err.Error(), "NotFound") || strings.Contains(err.Error(), "code=NotFound") {
		return fmt.Errorf("%w (%v)", fs.ErrNotExist, err)
	}
	return err
}
