// Package cliutil is the command-line convention the four binaries share
// (docs/CLI.md, Conventions): how arguments are parsed (urfave/cli stops at
// the first positional argument, and people type flags after arguments, so
// every binary normalises its arguments the same way), exit statuses,
// errors, help for required flags, unknown commands, shell completion, the
// number format for people, and the version.
package cliutil

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// NormalizeArgs rewrites a command line into the shape urfave/cli parses,
// so that people may write it the way the help shows it:
//
//   - the dataset may come before the command: "snapinspect ROOT/DS series
//     ID" is "snapinspect series ROOT/DS ID";
//   - without a command, defaultCmd runs: "snapinspect ROOT/DS" is
//     "snapinspect summary ROOT/DS";
//   - flags may follow positional arguments: "series ROOT/DS ID --from
//     2020" (Go's flag package stops at the first positional argument);
//   - global flags may follow the command, and command flags may precede
//     it.
//
// Every flag ends up right after the command name (or after the program
// name when there is no command and no argument), except flags only the app defines
// (--version), which stay before it. Arguments after "--" are positional
// whatever they look like, and a "--" is kept when a positional argument
// starts with '-'. With -h or --help only the command (if any) and the
// help flag are kept. "help" as the first word is left to urfave/cli.
func NormalizeArgs(app *cli.App, defaultCmd string, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args // too short to reorder, or a shell asking what to complete
	}
	takesValue := map[string]bool{}
	note := func(f cli.Flag, set map[string]bool) {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			set[n] = true
			if !isBool {
				takesValue[n] = true
			}
		}
	}
	appFlags := map[string]bool{}
	for _, f := range app.Flags {
		note(f, appFlags)
	}
	note(cli.HelpFlag, appFlags)
	note(cli.VersionFlag, appFlags)
	commands := map[string]*cli.Command{}
	cmdFlags := map[*cli.Command]map[string]bool{}
	for _, c := range app.Commands {
		for _, n := range c.Names() {
			commands[n] = c
		}
		set := map[string]bool{}
		for _, f := range c.Flags {
			note(f, set)
		}
		note(cli.HelpFlag, set)
		cmdFlags[c] = set
	}

	var flags [][]string // each flag with its separate value, if any
	var pos []string     // positional arguments
	plain := -1          // positional arguments before "--"; -1: no "--"
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			plain = len(pos)
			pos = append(pos, rest[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			tok := []string{a}
			if name := flagName(a); !strings.Contains(a, "=") && takesValue[name] && i+1 < len(rest) {
				tok = append(tok, rest[i+1])
				i++
			}
			flags = append(flags, tok)
			continue
		}
		pos = append(pos, a)
	}
	if plain < 0 {
		plain = len(pos)
	}
	if plain > 0 && (pos[0] == "help" || pos[0] == "h") {
		return args
	}
	at := -1
	for k := 0; k < 2 && k < plain; k++ {
		if _, ok := commands[pos[k]]; ok {
			at = k
			break
		}
	}
	help := false
	for _, f := range flags {
		if n := flagName(f[0]); n == "help" || n == "h" {
			help = true
		}
	}
	out := []string{args[0]}
	var name string
	var others []string
	switch {
	case at >= 0:
		name = pos[at]
		others = append(append([]string{}, pos[:at]...), pos[at+1:]...)
	case help:
		// Help for the app, whatever else is on the line.
		return append(out, "--help")
	case len(pos) > 0 && defaultCmd != "":
		name, others = defaultCmd, pos
	default:
		for _, f := range flags {
			out = append(out, f...)
		}
		return appendPositional(out, pos)
	}
	cmd := commands[name]
	if help {
		// Help for the command; urfave/cli would read a positional
		// argument as a help topic.
		return append(out, name, "--help")
	}
	var after []string
	for _, f := range flags {
		if n := flagName(f[0]); appFlags[n] && !cmdFlags[cmd][n] {
			out = append(out, f...)
		} else {
			after = append(after, f...)
		}
	}
	out = append(out, name)
	out = append(out, after...)
	return appendPositional(out, others)
}

// flagName is the name of a flag token: "--from=2020" → "from".
func flagName(tok string) string {
	n := strings.TrimLeft(tok, "-")
	if i := strings.IndexByte(n, '='); i >= 0 {
		n = n[:i]
	}
	return n
}

func appendPositional(out, pos []string) []string {
	for _, p := range pos {
		if strings.HasPrefix(p, "-") {
			out = append(out, "--")
			break
		}
	}
	return append(out, pos...)
}
