package corrupt_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

var errCause = errors.New("cause")

func TestMarkAndIs(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "data.arrow", Err: fs.ErrNotExist}
	for _, tc := range []struct {
		name    string
		err     error
		corrupt bool
		cause   error  // errors.Is(err, cause) must hold, when set
		pathErr bool   // errors.As reaches a *fs.PathError
		msg     string // exact message
		file    string // corrupt.File(err), "" for none
		wantNil bool
	}{
		{name: "plain error is not corrupt", err: errCause, msg: "cause"},
		{name: "nil stays nil", err: corrupt.Mark(nil), wantNil: true},
		{name: "InFile nil stays nil", err: corrupt.InFile("x", nil), wantNil: true},
		{name: "sentinel itself", err: corrupt.ErrCorrupt, corrupt: true, msg: "corrupt"},
		{name: "Mark keeps the cause", err: corrupt.Mark(errCause), corrupt: true, cause: errCause, msg: "corrupt: cause"},
		{name: "Mark keeps errors.As", err: corrupt.Mark(pathErr), corrupt: true, cause: fs.ErrNotExist, pathErr: true,
			msg: "corrupt: open data.arrow: file does not exist"},
		{name: "Mark twice says corrupt once", err: corrupt.Mark(corrupt.Mark(errCause)), corrupt: true, cause: errCause, msg: "corrupt: cause"},
		{name: "Errorf without a cause", err: corrupt.Errorf("footer length %d", 7), corrupt: true, msg: "corrupt: footer length 7"},
		{name: "Errorf wraps %w", err: corrupt.Errorf("stat: %w", pathErr), corrupt: true, cause: fs.ErrNotExist, pathErr: true,
			msg: "corrupt: stat: open data.arrow: file does not exist"},
		{name: "Errorf around a marked cause", err: corrupt.Errorf("open x: %w", corrupt.Errorf("bad magic")), corrupt: true,
			msg: "open x: corrupt: bad magic"},
		{name: "context around a marked error", err: fmt.Errorf("snapshot 2: %w", corrupt.Mark(errCause)), corrupt: true, cause: errCause,
			msg: "snapshot 2: corrupt: cause"},
		{name: "joined with a marked error", err: errors.Join(errCause, corrupt.Errorf("bad")), corrupt: true, cause: errCause, msg: "cause\ncorrupt: bad"},
		{name: "%v drops the mark", err: fmt.Errorf("ctx: %v", corrupt.Mark(errCause)), msg: "ctx: corrupt: cause"},
		{name: "InFile locates", err: fmt.Errorf("open: %w", corrupt.InFile("snapshots/000001/data.arrow", pathErr)), corrupt: true,
			cause: fs.ErrNotExist, pathErr: true, file: "snapshots/000001/data.arrow",
			msg: "open: corrupt: open data.arrow: file does not exist"},
		{name: "outermost file wins", err: corrupt.InFile("outer", corrupt.InFile("inner", errCause)), corrupt: true, cause: errCause,
			file: "outer", msg: "corrupt: cause"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantNil {
				if tc.err != nil {
					t.Fatalf("got %v, want nil", tc.err)
				}
				return
			}
			if got := corrupt.Is(tc.err); got != tc.corrupt {
				t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.corrupt)
			}
			if got := errors.Is(tc.err, corrupt.ErrCorrupt); got != tc.corrupt {
				t.Errorf("errors.Is(%v, ErrCorrupt) = %v, want %v", tc.err, got, tc.corrupt)
			}
			if tc.cause != nil && !errors.Is(tc.err, tc.cause) {
				t.Errorf("errors.Is(%v, %v) = false: the cause is lost", tc.err, tc.cause)
			}
			var pe *fs.PathError
			if got := errors.As(tc.err, &pe); got != tc.pathErr {
				t.Errorf("errors.As(%v, *fs.PathError) = %v, want %v", tc.err, got, tc.pathErr)
			}
			if got := tc.err.Error(); got != tc.msg {
				t.Errorf("message %q, want %q", got, tc.msg)
			}
			file, ok := corrupt.File(tc.err)
			if file != tc.file || ok != (tc.file != "") {
				t.Errorf("File = %q, %v, want %q", file, ok, tc.file)
			}
		})
	}
}

func TestMarkReturnsMarkedUnchanged(t *testing.T) {
	m := corrupt.Errorf("bad")
	if corrupt.Mark(m) != m {
		t.Fatal("Mark wrapped an error that was already marked")
	}
}
