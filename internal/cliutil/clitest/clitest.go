// Package clitest checks a binary's command line against the conventions
// of docs/CLI.md ("Conventions"), walking every command. Each binary's
// tests call Check, so a new command or flag that breaks a convention
// fails the build's tests.
package clitest

import (
	"bytes"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
)

// Check runs the app newApp builds through run (the binary's main, in
// process) and fails t for every break of the conventions:
//
//   - --help and --version exit 0; the version is not empty;
//   - an unknown command exits 2 with one line suggesting the nearest one;
//   - every command's --help exits 0, has an example and marks each
//     required flag "(required)" without a default, and shows no bare
//     "(default: 0)": a zero default says what it means ("latest");
//   - every command has --json, except those in noJSON (command name →
//     why not);
//   - a command whose first argument is ROOT/DATASET exits 2 saying a
//     dataset directory that is not there does not exist;
//   - an unknown flag, and a missing required flag, exit 2 with one line on
//     stderr naming it and nothing on stdout (no help dump); a misspelt
//     flag (two letters swapped) is answered with the flag meant;
//   - the completion command prints bash, zsh and fish scripts, and
//     --generate-bash-completion lists every command.
func Check(t *testing.T, newApp func(stdout, stderr io.Writer) *cli.App, run func(args []string, stdout, stderr io.Writer) int, noJSON map[string]string) {
	t.Helper()
	app := newApp(io.Discard, io.Discard)
	cliutil.Prepare(app)
	name := app.Name
	exec := func(args ...string) (int, string, string) {
		var o, e bytes.Buffer
		code := run(append([]string{name}, args...), &o, &e)
		return code, o.String(), e.String()
	}
	oneLine := func(what, stderr string) {
		t.Helper()
		if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, name+": ") {
			t.Errorf("%s: stderr is not one line %q: %q", what, name+": …", stderr)
		}
	}

	if code, out, _ := exec("--help"); code != 0 || !strings.Contains(out, "USAGE") {
		t.Errorf("%s --help: exit %d\n%s", name, code, out)
	} else {
		for _, f := range app.Flags {
			if line := flagLine(out, f.Names()[0]); zeroDefault.MatchString(line) {
				t.Errorf("%s --help: --%s shows a zero default; say what it means with DefaultText: %q", name, f.Names()[0], line)
			}
		}
	}
	if code, out, _ := exec("--version"); code != 0 || !regexp.MustCompile(`^`+name+` version \S+\n$`).MatchString(out) {
		t.Errorf("%s --version: exit %d, %q", name, code, out)
	}

	cmds := app.VisibleCommands()
	if len(cmds) > 1 {
		first := ""
		for _, c := range cmds {
			if len(c.Name) >= 4 && c.Name != "help" {
				first = c.Name
				break
			}
		}
		typo := first[:1] + first[2:3] + first[1:2] + first[3:] // "build" -> "biuld"
		code, out, errOut := exec(typo)
		if code != cliutil.ExitUsage || out != "" || !strings.Contains(errOut, `did you mean "`+first+`"`) {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 2 and a suggestion of %q", name, typo, code, out, errOut, first)
		}
		oneLine(name+" "+typo, errOut)
		code, out, errOut = exec("--generate-bash-completion")
		if code != 0 {
			t.Errorf("%s --generate-bash-completion: exit %d, stderr %q; want 0", name, code, errOut)
		}
		for _, c := range cmds {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.Name) + `(:|$)`).MatchString(out) {
				t.Errorf("%s --generate-bash-completion does not list %s:\n%s", name, c.Name, out)
			}
		}
	}
	if code, out, errOut := exec("--verison"); code != cliutil.ExitUsage || out != "" || !strings.Contains(errOut, "did you mean --version?") {
		t.Errorf("%s --verison: exit %d, stdout %q, stderr %q; want exit 2 and a suggestion of --version", name, code, out, errOut)
	}

	if app.Command("completion") == nil {
		t.Errorf("%s has no completion command", name)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if code, out, errOut := exec("completion", sh); code != 0 || !strings.Contains(out, "complete") {
			t.Errorf("%s completion %s: exit %d, %q %q", name, sh, code, out[:min(len(out), 200)], errOut)
		}
	}
	if code, _, errOut := exec("completion", "tcsh"); code != cliutil.ExitUsage {
		t.Errorf("%s completion tcsh: exit %d (%q), want 2", name, code, errOut)
	}

	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		path := name + " " + c.Name
		code, help, _ := exec(c.Name, "--help")
		if code != 0 || !strings.Contains(help, "USAGE") {
			t.Errorf("%s --help: exit %d\n%s", path, code, help)
			continue
		}
		if !strings.Contains(c.Description, "Example") {
			t.Errorf("%s --help shows no example", path)
		}
		hasJSON := false
		var req []string
		for _, f := range c.Flags {
			n := f.Names()[0]
			if n == "json" {
				hasJSON = true
			}
			line := flagLine(help, n)
			if line == "" && !isHidden(f) {
				t.Errorf("%s --help does not list --%s", path, n)
				continue
			}
			if zeroDefault.MatchString(line) {
				t.Errorf("%s --help: --%s shows a zero default; say what it means with DefaultText (\"latest\", \"CURRENT\", \"never\"): %q", path, n, line)
			}
			if cliutil.IsRequired(f) {
				req = append(req, n)
				if !strings.Contains(line, "(required)") || strings.Contains(line, "default:") {
					t.Errorf("%s --help: required --%s is not marked (required) without a default: %q", path, n, line)
				}
			}
		}
		if why, ok := noJSON[c.Name]; ok {
			if hasJSON {
				t.Errorf("%s has --json but is listed as without it (%s)", path, why)
			}
		} else if !hasJSON {
			t.Errorf("%s has no --json", path)
		}

		code, out, errOut := exec(c.Name, "--no-such-flag")
		if code != cliutil.ExitUsage || out != "" || !strings.Contains(errOut, "no-such-flag") {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q; want exit 2 and one line", path, code, out, errOut)
		}
		oneLine(path+" --no-such-flag", errOut)
		if f, typo := misspelt(c, app.Flags); typo != "" {
			code, out, errOut := exec(c.Name, typo)
			if want := "did you mean --" + f + "?"; code != cliutil.ExitUsage || out != "" || !strings.Contains(errOut, want) || !strings.Contains(errOut, typo) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", path, typo, code, out, errOut, want)
			}
			oneLine(path+" "+typo, errOut)
		}
		if args := missingDataset(t, c); args != nil {
			code, out, errOut := exec(args...)
			if code != cliutil.ExitUsage || out != "" || !strings.Contains(errOut, args[1]+" does not exist") {
				t.Errorf("%s of a missing dataset %q: exit %d, stdout %q, stderr %q; want exit 2 saying it does not exist", path, args, code, out, errOut)
			}
			oneLine(path+" of a missing dataset", errOut)
		}
		if len(req) > 0 {
			code, out, errOut := exec(c.Name)
			if code != cliutil.ExitUsage || out != "" || !strings.Contains(errOut, "--"+req[0]) {
				t.Errorf("%s without its required flags: exit %d, stdout %q, stderr %q; want exit 2 naming --%s, no help", path, code, out, errOut, req[0])
			}
			oneLine(path+" without required flags", errOut)
		}
	}
}

// zeroDefault is a help line's "(default: 0)" (or 0s): a zero that means
// "latest", "none" or "never" must say so.
var zeroDefault = regexp.MustCompile(`\(default: "?0s?"?\)`)

// missingDataset is a command line running c on a dataset directory that
// does not exist, when c's first argument is ROOT/DATASET (nil
// otherwise): its other arguments, optional ones too, and its required
// flags are given placeholder values, paths under a temporary directory.
func missingDataset(t *testing.T, c *cli.Command) []string {
	words := strings.Fields(c.ArgsUsage)
	if len(words) == 0 || words[0] != "ROOT/DATASET" {
		return nil
	}
	tmp := t.TempDir()
	args := []string{c.Name, filepath.Join(tmp, "MISSING", "DS")}
	for _, w := range words[1:] {
		switch {
		case strings.HasPrefix(w, "OUT"):
			args = append(args, filepath.Join(tmp, "out.csv"))
		default:
			args = append(args, "1")
		}
	}
	for _, f := range c.Flags {
		if !cliutil.IsRequired(f) {
			continue
		}
		v := "1"
		if _, ok := f.(*cli.StringFlag); ok {
			v = filepath.Join(tmp, f.Names()[0])
		}
		args = append(args, "--"+f.Names()[0], v)
	}
	return args
}

// flagLine is the line of the help's OPTIONS listing --name, "" if none.
func flagLine(help, name string) string {
	_, opts, ok := strings.Cut(help, "OPTIONS:")
	if !ok {
		return ""
	}
	for _, l := range strings.Split(opts, "\n") {
		for _, f := range strings.Fields(l) {
			f = strings.TrimSuffix(f, ",")
			if f == "--"+name || f == "-"+name {
				return l
			}
			if !strings.HasPrefix(f, "-") {
				break // past the names, into the value and usage
			}
		}
	}
	return ""
}

// misspelt picks a visible flag of c of four letters or more and
// misspells it by swapping its second and third letters ("--input" →
// "--ipnut"), choosing one whose misspelling is nearer to it than to any
// other flag; "" when c has none.
func misspelt(c *cli.Command, appFlags []cli.Flag) (name, typo string) {
	all := append(append([]cli.Flag{}, c.Flags...), appFlags...)
	for _, f := range c.Flags {
		n := f.Names()[0]
		if len(n) < 4 || isHidden(f) || n[1] == n[2] {
			continue
		}
		t := n[:1] + n[2:3] + n[1:2] + n[3:]
		if cliutil.SuggestFlag(all, t) == n {
			return n, "--" + t
		}
	}
	return "", ""
}

func isHidden(f cli.Flag) bool {
	if v, ok := f.(cli.VisibleFlag); ok {
		return !v.IsVisible()
	}
	return false
}
