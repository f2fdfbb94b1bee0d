package inspect

import (
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
