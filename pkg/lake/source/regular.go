package source

import (
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
	"github.com/energyscope/servingsnap/pkg/lake/parquetdir"
)

// checkRegular refuses a table whose local data files are not regular
// files. Opening a named pipe blocks until something writes to it (a FIFO
// called *.parquet hung a build forever), a socket cannot be opened at all,
// and a device reads without end: none is a Parquet file, and saying so
// before anything is opened is the only way not to hang. A symlink to a
// regular file is read as the file. Object stores hold only objects.
func checkRegular(t *Table) error {
	l, ok := t.Store.(objstore.Local)
	if !ok {
		return nil
	}
	for _, f := range t.Files {
		if err := parquetdir.CheckRegular(l.Location(f.Name)); err != nil {
			return err
		}
	}
	return nil
}
