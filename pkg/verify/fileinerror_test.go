package verify

import (
	"errors"
	"fmt"
	"testing"

	"github.com/energyscope/servingsnap/pkg/corrupt"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// TestFileInError: an Open error is located by the *corrupt.FileError in
// its chain, not by the file names its message happens to contain.
func TestFileInError(t *testing.T) {
	const data, index = "snapshots/000001/data.arrow", "snapshots/000001/index.arrow"
	v := &verifier{
		m: &manifest.Manifest{Files: []manifest.File{{Path: data}, {Path: index}}},
		r: &Report{Manifest: "manifests/000001.json"},
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("open: %w", corrupt.InFile(index, errors.New("checksum mismatch"))), index},
		{corrupt.InFile(data, fmt.Errorf("%s: 3 record batches, manifest says 2", data)), data},
		// The message names the data file, but nothing locates the damage there.
		{corrupt.Errorf("%s: mentioned, not located", data), v.r.Manifest},
		// A file the manifest does not list is not a finding about a file.
		{corrupt.InFile("elsewhere.arrow", errors.New("x")), v.r.Manifest},
		{errors.New("lease: resource temporarily unavailable"), v.r.Manifest},
	} {
		if got := v.fileInError(tc.err); got != tc.want {
			t.Errorf("fileInError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
