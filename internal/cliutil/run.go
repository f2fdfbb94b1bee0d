package cliutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

// Exit statuses of the four binaries (docs/CLI.md, Conventions).
const (
	ExitOK      = 0 // done; for a check, nothing found
	ExitFailure = 1 // the command ran and failed or found something: corruption, a difference (diff --exit-code), an unknown series, a rejected input
	ExitUsage   = 2 // the command could not run as asked: usage (unknown command or flag, missing or extra arguments, bad values) or an operand that does not exist or cannot be read
)

// Usagef is a usage error: exit status 2, the message on one line.
func Usagef(format string, a ...any) error {
	return cli.Exit(fmt.Sprintf(format, a...), ExitUsage)
}

// ExitCode maps an error a command returned to its exit status: what a
// cli.Exit says; 1 for corruption; 2 for a missing or unreadable operand
// (fs.ErrNotExist, fs.ErrPermission: a dataset directory, vintage, input
// or file that is not there); 1 otherwise.
func ExitCode(err error) int {
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ec):
		return ec.ExitCode()
	case errors.Is(err, corrupt.ErrCorrupt):
		return ExitFailure
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return ExitUsage
	}
	return ExitFailure
}

// required remembers the flags Prepare took the Required mark from, for
// the help text and the check before each action.
var required sync.Map // cli.Flag -> true

// Prepare applies the conventions every binary shares (docs/CLI.md,
// Conventions) to app and all its commands:
//
//   - a usage error (bad flag, bad value) is one line on stderr and exit 2,
//     without the help text; an unknown flag names the nearest one;
//   - a missing required flag likewise, for every command alike (urfave/cli
//     prints the whole help for some commands and not others); help marks
//     such flags "(required)" and shows no default for them;
//   - bool flags show no "(default: false)";
//   - shell completion: --generate-bash-completion and the completion
//     command (bash, zsh, fish).
//
// Run calls it; tests that build an app call it too.
func Prepare(app *cli.App) {
	cli.FlagStringer = flagString
	app.EnableBashCompletion = true
	app.ExitErrHandler = func(*cli.Context, error) {} // Run reports errors and picks the status
	if app.OnUsageError == nil {
		app.OnUsageError = onUsageError
	}
	if app.Command("completion") == nil {
		app.Commands = append(app.Commands, completionCommand(app))
	}
	// At the top level, complete command names (urfave/cli's default reads
	// os.Args to guess whether a flag is being typed); commands keep the
	// default, which completes their flags after a "-".
	app.BashComplete = func(c *cli.Context) {
		for _, cmd := range c.App.VisibleCommands() {
			if cmd.Name != "help" {
				fmt.Fprintln(c.App.Writer, cmd.Name)
			}
		}
	}
	var walk func(prefix string, cs []*cli.Command)
	walk = func(prefix string, cs []*cli.Command) {
		for _, c := range cs {
			if c.OnUsageError == nil {
				c.OnUsageError = onUsageError
			}
			requireFlags(prefix+" "+c.Name, c)
			walk(prefix+" "+c.Name, c.Subcommands)
		}
	}
	walk(app.Name, app.Commands)
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	if name, ok := strings.CutPrefix(err.Error(), flagNotDefined); ok {
		return unknownFlag(c, name)
	}
	return Usagef("%v (see %s --help)", err, commandPath(c))
}

// flagNotDefined begins the error of Go's flag package (which urfave/cli
// parses with) for a flag the command does not define.
const flagNotDefined = "flag provided but not defined: -"

// unknownFlag is the usage error for a flag c's command (or app) does not
// define, with the nearest flag it does when one is close:
// `unknown flag --inptu; did you mean --input? (see snapbuild build --help)`.
func unknownFlag(c *cli.Context, name string) error {
	flags := c.App.Flags
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		flags = append(append([]cli.Flag{}, c.Command.Flags...), c.App.Flags...)
	}
	if s := SuggestFlag(flags, name); s != "" {
		return Usagef("unknown flag %s; did you mean %s? (see %s --help)", dashed(name), dashed(s), commandPath(c))
	}
	return Usagef("unknown flag %s (see %s --help)", dashed(name), commandPath(c))
}

// dashed is a flag name as typed: "-s", "--input".
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// SuggestFlag is the name of the visible flag among flags (or --help)
// nearest to name, as Suggest finds commands, or "" when none is close.
func SuggestFlag(flags []cli.Flag, name string) string {
	var names []string
	for _, f := range flags {
		if !isHidden(f) {
			names = append(names, f.Names()...)
		}
	}
	names = append(names, "help")
	return nearest(names, func(n string) string { return n }, name)
}

func isHidden(f cli.Flag) bool {
	v, ok := f.(cli.VisibleFlag)
	return ok && !v.IsVisible()
}

// commandPath is "snapbuild gc" for gc's context, "snapbuild" for the app's.
func commandPath(c *cli.Context) string {
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		return c.App.Name + " " + c.Command.Name
	}
	return c.App.Name
}

// requireFlags moves the Required mark of c's flags from urfave/cli to a
// check made before c's action, so that a missing flag is a one-line
// usage error that names every missing flag.
func requireFlags(path string, c *cli.Command) {
	var req []cli.Flag
	for _, f := range c.Flags {
		if unrequire(f) {
			required.Store(f, true)
			req = append(req, f)
		}
	}
	if len(req) == 0 || c.Action == nil {
		return
	}
	act := c.Action
	c.Action = func(ctx *cli.Context) error {
		var missing []string
		for _, f := range req {
			if !ctx.IsSet(f.Names()[0]) {
				missing = append(missing, "--"+f.Names()[0])
			}
		}
		if len(missing) > 0 {
			what := "flag"
			if len(missing) > 1 {
				what = "flags"
			}
			return Usagef("%s: missing required %s %s (see %s --help)", c.Name, what, strings.Join(missing, ", "), path)
		}
		return act(ctx)
	}
}

// unrequire clears f's Required field and reports whether it was set.
func unrequire(f cli.Flag) bool {
	was := false
	switch f := f.(type) {
	case *cli.StringFlag:
		was, f.Required = f.Required, false
	case *cli.IntFlag:
		was, f.Required = f.Required, false
	case *cli.Int64Flag:
		was, f.Required = f.Required, false
	case *cli.Uint64Flag:
		was, f.Required = f.Required, false
	case *cli.DurationFlag:
		was, f.Required = f.Required, false
	case *cli.StringSliceFlag:
		was, f.Required = f.Required, false
	case *cli.BoolFlag:
		was, f.Required = f.Required, false
	case *cli.Float64Flag:
		was, f.Required = f.Required, false
	default:
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			panic(fmt.Sprintf("cliutil: required flag %s of type %T: add the type to unrequire", f.Names()[0], f))
		}
	}
	return was
}

// IsRequired reports whether Prepare found f marked Required.
func IsRequired(f cli.Flag) bool {
	_, ok := required.Load(f)
	return ok
}

// flagString is the help line of a flag: "--to ID\tsnapshot ID to make
// current (required)", "--parallel value\treader goroutines (default:
// number of CPUs)".
func flagString(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return ""
	}
	placeholder, usage := "", df.GetUsage()
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			placeholder = usage[i+1 : i+1+j]
			usage = usage[:i] + placeholder + usage[i+2+j:]
		}
	}
	if df.TakesValue() && placeholder == "" {
		placeholder = "value"
	}
	var names []string
	for _, n := range df.Names() {
		if len(n) == 1 {
			names = append(names, "-"+n)
		} else {
			names = append(names, "--"+n)
		}
	}
	s := strings.Join(names, ", ")
	if df.TakesValue() {
		s += " " + placeholder
	}
	if _, isSlice := f.(*cli.StringSliceFlag); isSlice {
		s += " [ " + s + " ]"
	}
	_, isBool := f.(*cli.BoolFlag)
	switch d := df.GetDefaultText(); {
	case IsRequired(f):
		usage += " (required)"
	case isBool, d == "", d == `""`, d == "[]":
	default:
		usage += " (default: " + d + ")"
	}
	return s + "\t" + strings.TrimSpace(usage)
}

// Run prepares app, runs it on args (normalised by NormalizeArgs with
// defaultCmd), reports an error as one line "NAME: message" on the app's
// ErrWriter, and returns the exit status (ExitCode). An unknown command is
// a usage error suggesting the nearest one.
func Run(app *cli.App, defaultCmd string, args []string) int {
	Prepare(app)
	if app.ErrWriter == nil {
		app.ErrWriter = os.Stderr
	}
	unknown := ""
	app.CommandNotFound = func(_ *cli.Context, name string) { unknown = name }
	err := app.Run(NormalizeArgs(app, defaultCmd, args))
	if err == nil && unknown != "" {
		err = UnknownCommand(app, unknown)
	}
	if err == nil {
		return ExitOK
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(app.ErrWriter, "%s: %s\n", app.Name, msg)
	}
	return ExitCode(err)
}

// UnknownCommand is the usage error for a command name app does not have,
// with the nearest command when one is close.
func UnknownCommand(app *cli.App, name string) error {
	if s := Suggest(app, name); s != "" {
		return Usagef("unknown command %q; did you mean %q? (see %s --help)", name, s, app.Name)
	}
	return Usagef("unknown command %q (see %s --help)", name, app.Name)
}

// Suggest is the visible command of app nearest to name (by edit distance,
// or of which name is a prefix), or "" when none is close.
func Suggest(app *cli.App, name string) string {
	var names []string
	canonical := map[string]string{}
	for _, c := range app.VisibleCommands() {
		for _, n := range c.Names() {
			names = append(names, n)
			canonical[n] = c.Name
		}
	}
	return nearest(names, func(n string) string { return canonical[n] }, name)
}

// nearest is the candidate nearest to name by edit distance (a prefix of
// two or more letters counts as one edit), mapped through canon, or ""
// when none is within max(1, min(2, len/3)) edits (a one-letter name:
// only in another case).
func nearest(cands []string, canon func(string) string, name string) string {
	best, bestD := "", -1
	lower := strings.ToLower(name)
	for _, n := range cands {
		d := distance(lower, n)
		if strings.HasPrefix(n, lower) && len(name) >= 2 {
			d = min(d, 1)
		}
		limit := max(1, min(2, len(n)/3))
		if len(n) == 1 {
			limit = 0 // "-S" may mean "-s"; "-x" does not mean "-i"
		}
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = canon(n), d
		}
	}
	return best
}

// distance is the Damerau–Levenshtein (optimal string alignment) distance
// of a and b, so "biuld" is one edit from "build".
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// PrintJSON is how every --json prints: one indented document.
func PrintJSON(w io.Writer, v any) error {
	return writeJSON(w, v)
}
