package source

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/lake/iceberg"
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
)

type icebergTable struct {
	t *iceberg.Table
}

func openIceberg(ctx context.Context, opt Options) (*Table, error) {
	if opt.TableVersion != nil {
		return nil, usagef("--table-version selects a Delta version; for an Iceberg table use --snapshot-id, --as-of or --ref")
	}
	n := 0
	for _, set := range []bool{opt.SnapshotID != 0, !opt.AsOf.IsZero(), opt.Ref != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, usagef("--snapshot-id, --as-of and --ref each select a snapshot: give one")
	}
	io := iceberg.Options{
		CatalogURI: opt.Catalog.URI, Table: opt.Catalog.Table, Warehouse: opt.Catalog.Warehouse,
		Token: opt.Catalog.Token, Credential: opt.Catalog.Credential,
		IOProps:    opt.S3.Props(),
		SnapshotID: opt.SnapshotID, AsOf: opt.AsOf, Ref: opt.Ref,
	}
	for k, v := range opt.Catalog.Props {
		io.IOProps[k] = v
	}
	source := opt.Input
	if opt.Catalog.URI != "" {
		if opt.Catalog.Table == "" {
			return nil, usagef("--catalog-uri needs --table NAMESPACE.NAME")
		}
		source = strings.TrimSuffix(opt.Catalog.URI, "/") + "#" + opt.Catalog.Table
	} else if strings.HasSuffix(opt.Input, ".metadata.json") || strings.HasSuffix(opt.Input, ".metadata.json.gz") {
		io.MetadataLocation = absLocation(opt.Input)
	} else {
		st, err := objstore.Open(ctx, opt.Input, opt.S3)
		if err != nil {
			return nil, err
		}
		name, err := latestMetadata(ctx, st)
		if err != nil {
			return nil, err
		}
		io.MetadataLocation = st.Location(name)
	}
	it, err := iceberg.Open(ctx, io)
	if err != nil {
		return nil, err
	}
	st, err := objstore.Open(ctx, it.Location, opt.S3)
	if err != nil {
		it.Close()
		return nil, err
	}
	t := &Table{
		Kind: KindIceberg, Source: source, Location: it.Location, MetadataLocation: it.MetadataLocation,
		SnapshotID: strconv.FormatInt(it.SnapshotID, 10), Version: it.SequenceNumber, Timestamp: it.Timestamp,
		Ref: it.Ref, Store: st, iceberg: &icebergTable{t: it},
	}
	for i, f := range it.Files {
		t.Files = append(t.Files, &File{Rel: relTo(it.Location, f.Path), Name: f.Path, Size: f.Size, iceTask: i})
	}
	return t, nil
}

// absLocation makes a local metadata path absolute (iceberg-go resolves
// relative paths against its own working directory otherwise).
func absLocation(p string) string {
	if strings.Contains(p, "://") {
		return p
	}
	st, err := objstore.Open(context.Background(), path.Dir(p), objstore.S3Config{})
	if err != nil {
		return p
	}
	return st.Location(path.Base(p))
}

// latestMetadata finds a table directory's current metadata file: the one
// metadata/version-hint.text names, else the highest-numbered
// metadata/*.metadata.json (vN.metadata.json or NNNNN-uuid.metadata.json).
func latestMetadata(ctx context.Context, st objstore.Store) (string, error) {
	ents, err := st.ReadDir(ctx, "metadata")
	if err != nil {
		return "", fmt.Errorf("%s: not an Iceberg table (no metadata/ directory): %w", st.Location(""), err)
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[path.Base(e.Name)] = true
	}
	if b, err := st.ReadFile(ctx, "metadata/version-hint.text"); err == nil {
		hint := strings.TrimSpace(string(b))
		for _, cand := range []string{"v" + hint + ".metadata.json", "v" + hint + ".gz.metadata.json", hint, hint + ".metadata.json"} {
			if have[cand] {
				return "metadata/" + cand, nil
			}
		}
		return "", fmt.Errorf("%s: version-hint.text says %q, but metadata/ has no such metadata file", st.Location(""), hint)
	}
	best, bestN := "", int64(-1)
	for name := range have {
		if !strings.HasSuffix(name, ".metadata.json") && !strings.HasSuffix(name, ".metadata.json.gz") {
			continue
		}
		digits := strings.TrimPrefix(name, "v")
		end := 0
		for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
			end++
		}
		n, err := strconv.ParseInt(digits[:end], 10, 64)
		if err != nil {
			continue
		}
		if n > bestN || n == bestN && name > best {
			best, bestN = name, n
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s: metadata/ holds no version-hint.text and no numbered *.metadata.json", st.Location(""))
	}
	return "metadata/" + best, nil
}

func (t *icebergTable) records(ctx context.Context, f *File) ([]arrow.RecordBatch, error) {
	return t.t.Read(ctx, f.iceTask)
}

func (t *icebergTable) close() error { return t.t.Close() }

// Bucket says which bucket of column f holds, when the table partitions
// it by Iceberg's bucket(B, column): the bucket and B; ok false for any
// other file (or table kind).
func (t *Table) Bucket(f *File, column string) (bucket, buckets int, ok bool) {
	if t.iceberg == nil {
		return 0, 0, false
	}
	return t.iceberg.t.Bucket(f.iceTask, column)
}
