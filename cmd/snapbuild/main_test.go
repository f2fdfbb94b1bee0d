package main

import (
	"errors"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestExitCode(t *testing.T) {
	cases := []struct {
		err  error
		want int
	}{
		{errors.New(`Required flags "input, out" not set`), 2},
		{cli.Exit("usage", 2), 2},
		{errors.New("year=2019/part-0.parquet row group 0 row 3: bad period"), 1},
	}
	for _, tc := range cases {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
