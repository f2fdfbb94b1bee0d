package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
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
		Flags: []cli.Flag{jsonFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("vortex: want one FILE argument (see snapinspect vortex --help)")
			}
			f, err := vortexio.OpenFile(c.Args().First())
			if err != nil {
				return err // a missing file exits 2, a damaged one 1
			}
			defer f.Close()
			if !wantJSON(c) {
				return vortexio.Describe(c.App.Writer, f)
			}
			var tree strings.Builder
			if err := vortexio.Describe(&tree, f); err != nil {
				return err
			}
			enc, err := f.Encodings()
			if err != nil {
				return err
			}
			type column struct {
				Name     string `json:"name"`
				Type     string `json:"type"`
				Nullable bool   `json:"nullable"`
			}
			cols := []column{}
			for _, fl := range f.Schema().Fields() {
				cols = append(cols, column{fl.Name, fl.Type.String(), fl.Nullable})
			}
			return cliutil.PrintJSON(c.App.Writer, map[string]any{
				"file": c.Args().First(), "rows": f.NumRows(), "dtype": f.DType().String(),
				"columns": cols, "encodings": enc, "describe": strings.Split(strings.TrimSuffix(tree.String(), "\n"), "\n"),
			})
		},
	}
}
