// Package inspect answers the questions snapinspect asks of a dataset
// directory: what a snapshot holds (Summarize), the rows of some series
// (WriteSeries), their latest values (Latest), which vintages exist
// (History) and what changed between two of them (Diff). Each report has a
// text form for people and a JSON form whose field names are documented in
// docs/CLI.md and never renamed.
//
// Everything reads through pkg/snapshot (validated open, binary-search
// lookups, zero-copy row slices); nothing here builds a per-series map of
// a whole dataset.
package inspect

import (
	"errors"
	"fmt"
	"strings"

	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/snapshot"
)

// notFoundError is a snapshot.ErrNotFound (the one not-found sentinel, also
// query.ErrNotFound) whose message says it all: a missing snapshot, series
// or category.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == snapshot.ErrNotFound }

func notFound(format string, a ...any) error {
	return &notFoundError{fmt.Sprintf(format, a...)}
}

// Dataset names the dataset directory after checking that it exists.
func Dataset(dir string) (*dataset.Dir, error) {
	ds, err := dataset.Open(dir)
	if err != nil {
		return nil, err
	}
	// A missing directory is a dataset.NotExistError (fs.ErrNotExist: the
	// commands' usage exit status), not snapshot.ErrNotFound.
	if err := ds.CheckExists(); err != nil {
		return nil, err
	}
	return ds, nil
}

// Resolve returns id, or the id CURRENT names when id is 0, after checking
// that its manifest exists (a dataset.NotExistError naming the vintages
// present when it does not).
func Resolve(ds *dataset.Dir, id uint64) (uint64, error) {
	if id == 0 {
		cur, err := ds.CurrentID()
		if errors.Is(err, dataset.ErrNoCurrent) {
			return 0, fmt.Errorf("%s: %w: nothing published (no CURRENT)%s", ds.Dir, snapshot.ErrNotFound, haveIDs(ds))
		}
		return cur, err
	}
	if err := ds.CheckVintage(id); err != nil {
		return 0, err // names the vintages present
	}
	return id, nil
}

// haveIDs lists the vintages present, for error messages.
func haveIDs(ds *dataset.Dir) string {
	ids, err := ds.IDs()
	if err != nil || len(ids) == 0 {
		return " (no manifests)"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return " (have " + strings.Join(s, ", ") + ")"
}

// Open opens vintage id of the dataset at dir, or the snapshot CURRENT
// names when id is 0. The data file is not checksummed (snapverify does
// that); the index is, and its buffers are proven safe to read
// (openChecked).
func Open(dir string, id uint64) (*snapshot.Snapshot, error) {
	ds, err := Dataset(dir)
	if err != nil {
		return nil, err
	}
	id, err = Resolve(ds, id)
	if err != nil {
		return nil, err
	}
	return openChecked(ds.Dir, id)
}

// currentID is what CURRENT names, 0 if it is absent or unreadable.
func currentID(ds *dataset.Dir) uint64 {
	id, err := ds.CurrentID()
	if err != nil {
		return 0
	}
	return id
}
