// Package tables lets snapverify --against read Delta and Iceberg tables:
// importing it registers pkg/lake/source as pkg/verify's table opener. It
// is a package apart so that what links pkg/verify for its fast and deep
// checks alone (the server's compactions) does not link the lake readers
// and iceberg-go.
package tables

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/verify"
)

func init() { verify.RegisterTableOpener(open) }

// open resolves dir as snapbuild build --input does, at the snapshot the
// lineage built names when dir is that table and the snapshot is still
// there, else at its latest.
func open(ctx context.Context, dir string, built manifest.Lineage) ([]verify.TableFile, verify.TableReader, string, error) {
	tbl, err := source.Open(ctx, source.Options{Input: dir})
	if err != nil {
		return nil, nil, "", err
	}
	var notes string
	if built.Kind == tbl.Kind && built.Location == tbl.Location && built.LakeSnapshotID != "" && built.LakeSnapshotID != tbl.SnapshotID {
		opt := source.Options{Input: dir}
		if tbl.Kind == source.KindDelta {
			opt.TableVersion = built.TableVersion
		} else if id, err := strconv.ParseInt(built.LakeSnapshotID, 10, 64); err == nil {
			opt.SnapshotID = id
		}
		if at, err := source.Open(ctx, opt); err == nil {
			tbl.Close()
			tbl = at
		} else {
			notes = fmt.Sprintf("the %s table no longer has snapshot %s the snapshot was built from (%v): compared with its latest; ", tbl.Kind, built.LakeSnapshotID, err)
		}
	}
	notes += fmt.Sprintf("compared with %s table %s at snapshot %s", tbl.Kind, tbl.Location, tbl.SnapshotID)
	files := make([]verify.TableFile, len(tbl.Files))
	for i, f := range tbl.Files {
		files[i] = verify.TableFile{Rel: f.Rel, Size: f.Size}
	}
	return files, reader{tbl}, notes, nil
}

// reader reads a table's files by their index in tbl.Files.
type reader struct{ tbl *source.Table }

func (r reader) EachBatch(ctx context.Context, file int, columns []string, fn func(arrow.RecordBatch) error) error {
	return r.tbl.EachBatch(ctx, r.tbl.Files[file], columns, fn)
}

func (r reader) Close() error { return r.tbl.Close() }
