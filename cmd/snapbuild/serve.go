package main

import "github.com/urfave/cli/v2"

// serveCommand is replaced by the Flight server (issue 4).
func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve snapshots over Arrow Flight (not yet implemented)",
		Action: func(c *cli.Context) error {
			return cli.Exit("serve is not implemented yet", 2)
		},
	}
}
