package cliutil

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/pkg/corrupt"
)

func TestExitCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{cli.Exit("usage", 2), 2},
		{fmt.Errorf("open x: %w", fs.ErrNotExist), 2},
		{fmt.Errorf("open x: %w", fs.ErrPermission), 2},
		{fmt.Errorf("data.arrow: %w", corrupt.Errorf("stat: %w", fs.ErrNotExist)), 1}, // damage inside a dataset is a finding
		{errors.New("year=2019/part-0.parquet row group 0 row 3: bad period"), 1},
	}
	for _, c := range cases {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	app := &cli.App{Commands: []*cli.Command{{Name: "build"}, {Name: "gc"}, {Name: "history"}, {Name: "series"}, {Name: "serve"}}}
	for in, want := range map[string]string{"biuld": "build", "buidl": "build", "histroy": "history", "hist": "history",
		"seris": "series", "srve": "serve", "gcc": "gc", "xyzzy": "", "PET": "", "snapshots/PET": ""} {
		if got := Suggest(app, in); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSuggestFlag(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "input", Aliases: []string{"i"}},
		&cli.StringFlag{Name: "out"},
		&cli.BoolFlag{Name: "json"},
		&cli.BoolFlag{Name: "secret", Hidden: true},
		&cli.Uint64Flag{Name: "snapshot", Aliases: []string{"s"}},
	}
	for in, want := range map[string]string{"inptu": "input", "inpt": "input", "jsn": "json", "JSON": "json",
		"snapshto": "snapshot", "snap": "snapshot", "S": "s", "hepl": "help", "secrte": "", "no-such-flag": "", "x": ""} {
		if got := SuggestFlag(flags, in); got != want {
			t.Errorf("SuggestFlag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNumbers(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 15064982: "15,064,982", -1234567: "-1,234,567"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{12: "12 B", 536130: "523.6 KiB", 3 << 30: "3.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
