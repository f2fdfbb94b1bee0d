package cliutil

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// completionCommand prints a shell completion script for app. The scripts
// ask the binary itself what to complete (urfave/cli's
// --generate-bash-completion protocol: commands, and flags after a "-"),
// and fall back to file names, so they never go stale.
func completionCommand(app *cli.App) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: fmt.Sprintf(`Prints a script that completes %[1]s's commands and flags (and file names
for arguments). Load it in the current shell, or install it once.

Examples:
   source <(%[1]s completion bash)                               # bash, this shell
   %[1]s completion bash > /etc/bash_completion.d/%[1]s          # bash, for good
   %[1]s completion zsh > "${fpath[1]}/_%[1]s"                    # zsh
   %[1]s completion fish > ~/.config/fish/completions/%[1]s.fish  # fish`, app.Name),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return Usagef("completion: name one shell: bash, zsh or fish (see %s completion --help)", app.Name)
			}
			return WriteCompletion(c.App.Writer, app, c.Args().First())
		},
	}
}

// WriteCompletion writes the completion script of app for shell.
func WriteCompletion(w io.Writer, app *cli.App, shell string) error {
	fn := "_" + strings.NewReplacer("-", "_", ".", "_").Replace(app.Name) + "_complete"
	bash := fmt.Sprintf(`# %[1]s completion for bash (and zsh through bashcompinit): it asks %[1]s itself.
%[2]s() {
  local cur="${COMP_WORDS[COMP_CWORD]}" out
  if [[ "$cur" == -* ]]; then
    out=$("${COMP_WORDS[@]:0:COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    out=$("${COMP_WORDS[@]:0:COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  fi
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "$out" -- "$cur"))
}
complete -o bashdefault -o default -F %[2]s %[1]s
`, app.Name, fn)
	switch shell {
	case "bash":
		_, err := io.WriteString(w, bash)
		return err
	case "zsh":
		_, err := fmt.Fprintf(w, "#compdef %s\nautoload -U +X bashcompinit && bashcompinit\n%s", app.Name, bash)
		return err
	case "fish":
		return writeFish(w, app)
	}
	return Usagef("completion: unknown shell %q: want bash, zsh or fish", shell)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeFish writes fish completions: the commands, then each command's
// flags once it is on the line, then the app's flags.
func writeFish(w io.Writer, app *cli.App) error {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
	var b strings.Builder
	fmt.Fprintf(&b, "# %s completion for fish\n", app.Name)
	flags := func(cond string, fs []cli.Flag) {
		for _, f := range fs {
			if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
				continue
			}
			fmt.Fprintf(&b, "complete -c %s", app.Name)
			if cond != "" {
				fmt.Fprintf(&b, " -n %s", q(cond))
			}
			for _, n := range f.Names() {
				if len(n) == 1 {
					fmt.Fprintf(&b, " -s %s", n)
				} else {
					fmt.Fprintf(&b, " -l %s", n)
				}
			}
			if df, ok := f.(cli.DocGenerationFlag); ok {
				if df.TakesValue() {
					b.WriteString(" -r")
				}
				fmt.Fprintf(&b, " -d %s", q(strings.ReplaceAll(df.GetUsage(), "`", "")))
			}
			b.WriteString("\n")
		}
	}
	for _, c := range app.VisibleCommands() {
		if c.Name == "help" {
			continue
		}
		fmt.Fprintf(&b, "complete -c %s -f -n __fish_use_subcommand -a %s -d %s\n", app.Name, c.Name, q(c.Usage))
		flags("__fish_seen_subcommand_from "+c.Name, c.Flags)
	}
	flags("", app.Flags)
	_, err := io.WriteString(w, b.String())
	return err
}
