// Command snapbuild cooks serving snapshots from lake tables (a Parquet
// folder, a Delta or an Iceberg table) and runs the tools around them: gen
// (sample lakes), build, split, publish, serve, history, rollback, gc, export,
// publish-copy, convert, compact and iceberg sync.
//
// The main function only wires flags to packages; the logic lives in pkg/.
package main

import (
	"io"
	"os"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/servecmd"

	"github.com/urfave/cli/v2"
)

// version is set at link time by make build and make install (-ldflags
// "-X main.version=$(git describe)"); without it, init reads the version
// the go command stamped into the binary (cliutil.Version).
var version string

func init() { version = cliutil.Version(version) }

func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }

// run runs one command line and returns the exit status (tests call it
// in-process); cliutil.Run applies the conventions of docs/CLI.md.
func run(args []string, stdout, stderr io.Writer) int {
	return cliutil.Run(newApp(stdout, stderr), "", args)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "snapbuild",
		Usage:   "cook immutable serving snapshots from a lake table (Parquet, Delta, Iceberg)",
		Version: version,
		Description: `Exit status: 0 ok, 1 failure (the message names the file, column, row or
vintage), 2 usage error or a missing operand. --json prints one JSON document
(field names in docs/CLI.md). Completion: snapbuild completion bash|zsh|fish.`,
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{
			genCommand(),
			buildCommand(),
			splitCommand(),
			publishCommand(),
			servecmd.Command(version),
			historyCommand(),
			rollbackCommand(),
			gcCommand(),
			exportCommand(),
			publishCopyCommand(),
			convertCommand(),
			compactCommand(),
			walCommand(),
			icebergCommand(),
		},
	}
}
