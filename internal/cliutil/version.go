package cliutil

import "runtime/debug"

// Version is the version the four binaries report (--version, the
// manifests' tool field, the server's build_info): linked, when the build
// set it (make build and make install pass -ldflags "-X main.version=…",
// from git describe); otherwise what the go command stamped into the
// binary, so that go install ./cmd/... and a plain go build report a real
// version too: the module version (a tag, or a pseudo-version of the
// commit, "+dirty" for uncommitted changes), else the VCS revision. "dev"
// only when the binary carries neither.
func Version(linked string) string {
	if linked != "" {
		return linked
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "devel-" + rev
}
