package deltalog

import (
	"bytes"
	"context"

	"github.com/energyscope/servingsnap/pkg/lake/objstore"
)

// ParseParquetActions reads the actions of Parquet checkpoint bytes.
func ParseParquetActions(b []byte) ([]Action, error) {
	return readParquetActions(context.Background(), bytes.NewReader(b))
}

// loadRaw decodes without the cardinality and row checks (tests).
func (dv *DeletionVector) loadRaw(ctx context.Context, st objstore.Store) ([]uint64, error) {
	return dv.decode(ctx, st, 1<<40)
}
