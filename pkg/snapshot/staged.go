package snapshot

import (
	"fmt"

	"github.com/energyscope/servingsnap/pkg/arrowfile"
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

// openFiles maps and checks the data file and the index the manifest
// names (the part of Open after the lease and the manifest).
func (s *Snapshot) openFiles(opt Options) error {
	ds, m := s.Dataset, s.Manifest
	df, _ := m.FileByRole(manifest.RoleData)
	xf, _ := m.FileByRole(manifest.RoleIndex)
	for _, f := range []manifest.File{df, xf} {
		if err := checkSize(ds, f); err != nil {
			return err
		}
	}
	dataSum := ""
	if opt.VerifyData {
		dataSum = df.Checksum
	}
	var err error
	if s.data, err = arrowfile.MapVerified(ds.Path(df.Path), dataSum); err != nil {
		return corrupt.InFile(df.Path, err)
	}
	if s.index, err = arrowfile.LoadVerified(ds.Path(xf.Path), xf.Checksum); err != nil {
		return corrupt.InFile(xf.Path, err)
	}
	if err := s.loadData(df); err != nil {
		return corrupt.InFile(df.Path, fmt.Errorf("%s: %w", df.Path, err))
	}
	if err := s.loadIndex(xf); err != nil {
		return corrupt.InFile(xf.Path, fmt.Errorf("%s: %w", xf.Path, err))
	}
	return nil
}
