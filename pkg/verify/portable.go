package verify

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/query"
)

// parquetMagic begins and ends every Parquet file.
var parquetMagic = []byte("PAR1")

// checkPortable checks the portable copy, if the manifest lists one (its
// size and checksum were checked with every other file): fast, the
// Parquet magic at both ends; deep, every row read back with pqarrow
// against the snapshot's rows (export.CheckPortable).
func (v *verifier) checkPortable() {
	f, ok := v.m.FileByRole(manifest.RolePortable)
	if !ok {
		return
	}
	v.ran()
	fh, err := os.Open(v.ds.Path(f.Path))
	if err != nil {
		v.add(CheckPortable, f.Path, "", "cannot open: %v", unwrapPath(err))
		return
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		v.add(CheckPortable, f.Path, "", "%v", unwrapPath(err))
		return
	}
	head, tail := make([]byte, 4), make([]byte, 4)
	if st.Size() < 8 {
		v.add(CheckPortable, f.Path, "", "%d bytes is too short for a Parquet file", st.Size())
		return
	}
	if _, err := fh.ReadAt(head, 0); err != nil {
		v.add(CheckPortable, f.Path, "offset 0", "cannot read: %v", unwrapPath(err))
		return
	}
	if _, err := fh.ReadAt(tail, st.Size()-4); err != nil && err != io.EOF {
		v.add(CheckPortable, f.Path, "end", "cannot read: %v", unwrapPath(err))
		return
	}
	if !bytes.Equal(head, parquetMagic) || !bytes.Equal(tail, parquetMagic) {
		v.add(CheckPortable, f.Path, "offset 0", "file begins with %q and ends with %q, want the Parquet magic %q at both ends", head, tail, parquetMagic)
		return
	}
	if !v.opt.Deep {
		return
	}
	v.ran()
	r, err := query.FromSnapshot(v.m.Dataset, v.snap)
	if err != nil {
		v.add(CheckPortable, f.Path, "", "cannot read the snapshot's rows: %v", err)
		return
	}
	rows, err := export.CheckPortable(context.Background(), r, fh, nil)
	if err != nil {
		v.add(CheckPortable, f.Path, "", "%v", err)
		return
	}
	if rows != f.Rows {
		v.add(CheckPortable, f.Path, "", "%d rows, manifest says %d", rows, f.Rows)
	}
}
