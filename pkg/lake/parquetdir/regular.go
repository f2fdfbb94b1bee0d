package parquetdir

import (
	"fmt"
	"io/fs"
	"os"
)

// CheckRegular returns an error naming path and what it is when path (a
// symlink is followed) is not a regular file: a directory, named pipe,
// socket or device. List and pkg/lake/source call it for every data file
// before anything opens one: opening a named pipe blocks until something
// writes to it (a FIFO called *.parquet hung a build forever), a socket
// cannot be opened, and a device reads without end.
func CheckRegular(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s: not a regular file (%s): only regular files are read from a lake", path, ModeName(st.Mode()))
}

// ModeName says what kind of file a mode describes, for messages.
func ModeName(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "mode " + m.Type().String()
}
