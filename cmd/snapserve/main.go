// Command snapserve is the Arrow Flight server of servingsnap on its own:
// the same server, flags and behaviour as `snapbuild serve` (docs/FLIGHT.md),
// in a binary that links no lake readers. Why a binary of its own: a
// server restart should cost milliseconds, and snapbuild links iceberg-go,
// whose package initialisation alone costs about 0.14 s and 32 MB at every
// start; snapserve starts without it (a test checks it links no iceberg-go).
//
// The main function only wires flags to packages; the logic lives in pkg/.
package main

import (
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/servecmd"
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
	serve := servecmd.Command(version)
	// The server's flags are the app's own here. A required flag at the
	// top level would also be demanded by the completion command, so
	// --root is checked by the action instead, with the same exit status
	// and message shape (docs/CLI.md, Conventions).
	flags := make([]cli.Flag, len(serve.Flags))
	for i, f := range serve.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			c := *sf
			c.Required = false
			c.Usage += " (required)"
			f = &c
		}
		flags[i] = f
	}
	return &cli.App{
		Name:    "snapserve",
		Usage:   serve.Usage,
		Version: version,
		Description: serve.Description + `

Exit status: 0 after a clean shutdown, 1 failure, 2 usage error.`,
		Flags: flags,
		Action: func(c *cli.Context) error {
			for _, f := range serve.Flags {
				if sf, ok := f.(*cli.StringFlag); ok && sf.Required && !c.IsSet(sf.Name) {
					return cliutil.Usagef("Required flag %q not set", sf.Name)
				}
			}
			return serve.Action(c)
		},
		Writer:    stdout,
		ErrWriter: stderr,
	}
}
