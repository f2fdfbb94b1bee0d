//go:build !linux

package arrowfile

import "context"

// ReadAhead does nothing where POSIX_FADV_WILLNEED is not available: the
// pages come in as they are first read.
func (m *Mapped) ReadAhead(ctx context.Context, chunk int64) error { return nil }
