// Package corrupt is the one way servingsnap says "these bytes are damaged".
//
// Every package that checks what it reads (the manifest and CURRENT, Arrow
// IPC and Vortex files, a snapshot as a whole) marks the errors it returns
// for damaged input with ErrCorrupt. A caller several layers up then asks
// one question, errors.Is(err, corrupt.ErrCorrupt) (or Is(err)), whichever
// package found the damage, instead of knowing one sentinel per package or
// matching message text.
//
// Marking adds the sentinel to the error's chain; it does not replace the
// cause, so errors.Is and errors.As still reach it (a *fs.PathError, a
// checksum sentinel, a wrapped decoding error). This follows Pebble's
// base.MarkCorruptionError and base.IsCorruptionError. FileError adds
// where the damage is, as Prometheus's wlog.CorruptionErr does.
//
// The package imports only the standard library and sits at the bottom of
// the import graph, so every format package can use it.
package corrupt

import (
	"errors"
	"fmt"
)

// ErrCorrupt is in the chain of every corruption error. Test with
// errors.Is or Is.
var ErrCorrupt = errors.New("corrupt")

// marked is an error marked as corruption: it unwraps to both ErrCorrupt
// and its cause.
type marked struct {
	msg   string
	cause error
}

func (e *marked) Error() string   { return e.msg }
func (e *marked) Unwrap() []error { return []error{ErrCorrupt, e.cause} }

// Mark returns err marked as corruption, keeping err as its cause. The
// message gains a "corrupt: " prefix, so that it says "corrupt" once: an
// error that is already marked is returned as it is. Mark(nil) is nil.
func Mark(err error) error {
	if err == nil || Is(err) {
		return err
	}
	return &marked{msg: "corrupt: " + err.Error(), cause: err}
}

// Errorf is Mark(fmt.Errorf(format, a...)): %w wraps causes as fmt.Errorf
// does, and they stay reachable with errors.Is and errors.As.
func Errorf(format string, a ...any) error {
	return Mark(fmt.Errorf(format, a...))
}

// Is reports whether err is a corruption error.
func Is(err error) bool { return errors.Is(err, ErrCorrupt) }

// FileError is a corruption located in one file. Path names the file the
// way its reporter knows it (for a snapshot's files: relative to the
// dataset directory, as the manifest lists them). The message is Err's,
// which is expected to name the file already.
type FileError struct {
	Path string
	Err  error // always marked: Is(Err) holds
}

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// InFile marks err as corruption (see Mark) of the file at path.
// InFile(path, nil) is nil.
func InFile(path string, err error) error {
	if err == nil {
		return nil
	}
	return &FileError{Path: path, Err: Mark(err)}
}

// File returns the path of the outermost FileError in err's chain.
func File(err error) (string, bool) {
	var fe *FileError
	if errors.As(err, &fe) {
		return fe.Path, true
	}
	return "", false
}
