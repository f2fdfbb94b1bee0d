package inspect

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/snapshot"
	"github.com/energyscope/servingsnap/pkg/verify/arrowcheck"
)

// openChecked opens vintage id and proves its index safe to read before
// anything here reads a value of it: arrow-go trusts the buffers of the
// file, and an index with one bad string offset (its checksums resealed)
// made snapinspect panic. The index has one row per series, so the check
// is cheap next to reading it; the data batches are checked too (O(1) per
// fixed-width column, one pass over the offsets of a string column). A panic
// inside Open itself (a malformed footer arrow-go does not guard) becomes
// an error too, naming the snapshot.
func openChecked(dir string, id uint64) (s *snapshot.Snapshot, err error) {
	defer func() {
		if r := recover(); r != nil {
			if s != nil {
				s.Close()
			}
			s, err = nil, corrupt.Errorf("snapshot %d: opening it panicked (a malformed file): %v", id, r)
		}
	}()
	s, err = snapshot.OpenID(dir, id, snapshot.Options{})
	if err != nil {
		return nil, err
	}
	if err := checkIndex(s); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// checkIndex returns a corruption error naming the file when a buffer of
// the open snapshot's index or data batches is malformed.
func checkIndex(s *snapshot.Snapshot) error {
	name := func(role, def string) string {
		if f, ok := s.Manifest.FileByRole(role); ok {
			return f.Path
		}
		return def
	}
	if err := arrowcheck.Record(s.Index().Record()); err != nil {
		return corrupt.Errorf("%s: malformed index (snapverify says more): %v", name(manifest.RoleIndex, "index.arrow"), err)
	}
	for i := 0; i < s.NumBatches(); i++ {
		if err := arrowcheck.Record(s.Batch(i)); err != nil {
			return corrupt.Errorf("%s: batch %d: malformed data (snapverify says more): %v", name(manifest.RoleData, "data.arrow"), i, err)
		}
	}
	return nil
}

// pieceChecker proves the decoded cold pieces a report reads safe to
// read, as openChecked proves the mapped batches: a tiered snapshot's
// cold rows are decoded from cold.vortex when first read (not at open),
// so each cold piece is checked when read (one pass over the series'
// decoded rows, the order of the reading itself; nothing is remembered,
// so memory does not grow with the series read). The mapped hot batches
// were checked at open and are passed through.
type pieceChecker struct {
	s   *snapshot.Snapshot
	hot map[arrow.RecordBatch]bool
}

func newPieceChecker(s *snapshot.Snapshot) *pieceChecker {
	c := &pieceChecker{s: s, hot: make(map[arrow.RecordBatch]bool, s.NumBatches())}
	for i := 0; i < s.NumBatches(); i++ {
		c.hot[s.Batch(i)] = true
	}
	return c
}

// check returns a corruption error naming the cold file when rec, a
// piece's batch, is malformed.
func (c *pieceChecker) check(rec arrow.RecordBatch) error {
	if c.hot[rec] {
		return nil
	}
	if err := arrowcheck.Record(rec); err != nil {
		name := coldfile.FileName
		if f, ok := c.s.Manifest.FileByRole(manifest.RoleCold); ok {
			name = f.Path
		}
		return corrupt.Errorf("%s: malformed decoded rows (snapverify --deep says more): %v", name, err)
	}
	return nil
}
