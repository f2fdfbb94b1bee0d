package vortexio

import (
	"errors"
	"fmt"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// ErrCorrupt is wrapped by every error caused by bytes that do not form a valid
// Vortex file (bad magic, out-of-range offset, inconsistent length, ...).
// Files are untrusted input, so these are ordinary errors, never panics. It
// is corrupt.ErrCorrupt, the sentinel every servingsnap package marks damage
// with.
var ErrCorrupt = corrupt.ErrCorrupt

// ErrUnsupported is wrapped by errors for valid Vortex content that this
// package does not implement (an encoding, layout or dtype id). The message
// names the id so that a failing file tells which decoder is missing.
var ErrUnsupported = errors.New("vortexio: unsupported")

// corruptf is corrupt.Errorf saying which kind of file is damaged.
func corruptf(format string, args ...any) error {
	return corrupt.Errorf("vortex file: "+format, args...)
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}
