// Command snapbuild cooks serving snapshots from lake tables and runs the
// tools around them: gen (sample lakes), build, serve, history, rollback,
// gc and convert.
//
// The main function only wires flags to packages; the logic lives in pkg/.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/energyscope/servingsnap/internal/cliutil"

	"github.com/urfave/cli/v2"
)

// version is set at link time by make build and make install (-ldflags
// "-X main.version=$(git describe)"); without it, init reads the version
// the go command stamped into the binary (cliutil.Version).
var version string

func init() { version = cliutil.Version(version) }

func main() {
	app := &cli.App{
		Name:    "snapbuild",
		Usage:   "cook immutable serving snapshots from a Parquet lake",
		Version: version,
		// A bad flag value is a usage error: exit 2, like a missing flag.
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("%v (see --help)", err), 2)
		},
		Commands: []*cli.Command{
			genCommand(),
			buildCommand(),
			serveCommand(),
			historyCommand(),
			rollbackCommand(),
			gcCommand(),
			exportCommand(),
			convertCommand(),
			compactCommand(),
		},
	}
	for _, c := range app.Commands {
		if c.OnUsageError == nil {
			c.OnUsageError = app.OnUsageError
		}
	}
	if err := app.Run(cliutil.NormalizeArgs(app, "", os.Args)); err != nil {
		fmt.Fprintf(os.Stderr, "snapbuild: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// exitCode maps an error to a process exit status: 2 for usage errors,
// 1 for everything else.
func exitCode(err error) int {
	if ec, ok := err.(cli.ExitCoder); ok {
		return ec.ExitCode()
	}
	if strings.HasPrefix(err.Error(), "Required flag") {
		return 2 // urfave/cli's missing-flag error has no exported type
	}
	if errors.Is(err, fs.ErrNotExist) {
		return 2 // a dataset, vintage or input that is not there: a wrong operand
	}
	return 1
}
