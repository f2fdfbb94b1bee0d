package lint

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile checks what can be checked of the Dockerfile without a
// container runtime (CI has none; it is not built there): a multi-stage
// build of static binaries (CGO_ENABLED=0) whose final stage runs as a
// non-root user, and a build context (.dockerignore, COPY lines) holding
// every package the commands import.
func TestDockerfile(t *testing.T) {
	root, module := moduleRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	froms := regexp.MustCompile(`(?m)^FROM `).FindAllStringIndex(df, -1)
	if len(froms) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a multi-stage build", len(froms))
	}
	final := df[froms[len(froms)-1][0]:]
	if !regexp.MustCompile(`(?m)^RUN CGO_ENABLED=0 go build .*\./cmd/\.\.\.`).MatchString(df) {
		t.Error("the build stage does not build ./cmd/... with CGO_ENABLED=0 (static binaries)")
	}
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(final)
	if user == nil || user[1] == "root" || strings.HasPrefix(user[1], "0:") || user[1] == "0" {
		t.Errorf("the final stage runs as %v, want a non-root USER", user)
	}

	// Every module package the commands need must be in the context.
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^COPY ([a-z]+)/ `).FindAllStringSubmatch(df, -1) {
		copied[m[1]] = true
		if !strings.Contains(string(ignore), "!"+m[1]+"/") {
			t.Errorf(".dockerignore leaves %s/ out of the context, which the Dockerfile copies", m[1])
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, module+"/")
		if !ok {
			continue
		}
		if top, _, _ := strings.Cut(rel, "/"); !copied[top] {
			t.Errorf("the commands import %s, but the Dockerfile does not copy %s/", p, top)
		}
	}
}
