package vortexio

import (
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every error caused by bytes that do not form a valid
// Vortex file (bad magic, out-of-range offset, inconsistent length, ...).
// Files are untrusted input, so these are ordinary errors, never panics.
var ErrCorrupt = errors.New("vortexio: corrupt file")

// ErrUnsupported is wrapped by errors for valid Vortex content that this
// package does not implement (an encoding, layout or dtype id). The message
// names the id so that a failing file tells which decoder is missing.
var ErrUnsupported = errors.New("vortexio: unsupported")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}
