package main

import (
	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/pkg/vortexio"
)

func vortexCommand() *cli.Command {
	return &cli.Command{
		Name:      "vortex",
		Usage:     "describe a Vortex file: schema, row count, layout tree, encoding and size of every chunk",
		ArgsUsage: "FILE",
		Description: `The debugging view of the Vortex codec: which layouts the file nests and which
encoding every chunk chose, with its byte size. Reads every chunk's header.

Examples:
   snapinspect vortex cold.vortex
   snapbuild convert data.arrow /tmp/x.vortex && snapinspect vortex /tmp/x.vortex`,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("vortex: want one FILE argument")
			}
			f, err := vortexio.OpenFile(c.Args().First())
			if err != nil {
				return cli.Exit(err.Error(), exitNotFound)
			}
			defer f.Close()
			if err := vortexio.Describe(c.App.Writer, f); err != nil {
				return cli.Exit(err.Error(), exitNotFound)
			}
			return nil
		},
	}
}
