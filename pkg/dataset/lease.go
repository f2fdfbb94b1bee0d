package dataset

import (
	"errors"
	"fmt"
	"os"

	"github.com/energyscope/servingsnap/pkg/fileutil"
)

// LeasesDir holds one lease file per snapshot. A reader (a server, an
// inspector) holds a shared flock on the lease of every snapshot it has
// open; gc takes an exclusive flock before deleting a snapshot and skips
// it when a reader holds one. flock is released by the kernel when a
// process dies, so a crashed server never pins a snapshot forever, and no
// grace period has to be guessed.
const LeasesDir = "leases"

// LeasePath is the lease file of snapshot id, relative to the dataset.
func LeasePath(id uint64) string { return LeasesDir + "/" + FormatID(id) }

// Lease is a reader's hold on one snapshot.
type Lease struct{ l *fileutil.Lock }

// AcquireLease takes a shared lease on snapshot id. It creates the lease
// file if the dataset is writable; a read-only reader of a dataset without
// one proceeds without a lease (gc then cannot see it: gc is a writer's
// tool, and readers that cannot write are expected to open CURRENT).
func (d *Dir) AcquireLease(id uint64) (*Lease, error) {
	l, err := fileutil.TryShared(d.Path(LeasePath(id)), false)
	if errors.Is(err, os.ErrNotExist) {
		// A dataset published before leases existed: create it if we may.
		if err := os.MkdirAll(d.Path(LeasesDir), 0o755); err != nil && !errors.Is(err, os.ErrPermission) {
			return nil, err
		}
		l, err = fileutil.TryShared(d.Path(LeasePath(id)), true)
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
		return &Lease{}, nil
	}
	if err != nil {
		// An exclusive holder is gc deleting this very snapshot.
		return nil, fmt.Errorf("snapshot %d is being garbage-collected: %w", id, err)
	}
	return &Lease{l: l}, nil
}

// Release drops the lease.
func (l *Lease) Release() error {
	if l == nil || l.l == nil {
		return nil
	}
	return l.l.Release()
}
