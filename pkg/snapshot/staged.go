package snapshot

import (
	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// OpenStaged opens the files a builder has just written into a staging
// directory, described by the manifest it is about to publish, so that a
// build step after the write (the portable copy) can read the snapshot
// through the same validated read path a server uses, before anything is
// visible. m's file paths are relative to dir. The handle holds no lease
// (nothing can gc a staging directory under its writer's lock) and must
// be closed before the directory is renamed.
func OpenStaged(dir string, m *manifest.Manifest, opt Options) (_ *Snapshot, err error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	ds := &dataset.Dir{Dir: dir, Name: m.Dataset}
	s := &Snapshot{Dataset: ds, Manifest: m}
	s.refs.Store(1)
	defer func() {
		if r := recover(); r != nil {
			err = corrupt.Errorf("staged snapshot %d: malformed Arrow file: %v", m.SnapshotID, r)
		}
		if err != nil {
			s.closeFiles()
		}
	}()
	if err := s.openFiles(opt); err != nil {
		return nil, err
	}
	trackLeaks(s)
	return s, nil
}
