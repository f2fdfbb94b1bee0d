package cliutil

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "5b13614abcdef0123456789"}}
	cases := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"module version (go install m@v, or a pseudo-version of the checkout)", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261201093800-5b13614abcde+dirty"}}, "v0.0.0-20261201093800-5b13614abcde+dirty"},
		{"devel with a revision", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, "devel-5b13614abcde"},
		{"devel, modified", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "devel-5b13614abcde-dirty"},
		{"nothing stamped", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	}
	for _, c := range cases {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := Version("1.2.3"); got != "1.2.3" {
		t.Errorf("linked version: %q", got)
	}
}
