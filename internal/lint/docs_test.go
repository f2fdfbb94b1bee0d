package lint

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// archPackages returns the packages docs/ARCHITECTURE.md's package table
// names: every backquoted name in the first column of the table under
// "## Packages" (a row may name several, "`a`, `b`"), module-relative.
func archPackages(doc string) ([]string, error) {
	var out []string
	inSection, inTable := false, false
	name := regexp.MustCompile("`([^`]+)`")
	sc := bufio.NewScanner(strings.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			inSection, inTable = strings.TrimSpace(h) == "Packages", false
			continue
		}
		if !inSection {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break // the first table of the section is the package table
			}
			continue
		}
		inTable = true
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, m[1])
		}
	}
	return out, sc.Err()
}

// TestArchitecturePackageTable keeps docs/ARCHITECTURE.md's package table
// equal to `go list ./pkg/... ./internal/...`: every package listed once,
// none that does not exist.
func TestArchitecturePackageTable(t *testing.T) {
	root, module := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := archPackages(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) == 0 {
		t.Fatal(`docs/ARCHITECTURE.md has no package table under "## Packages"`)
	}
	cmd := exec.Command("go", "list", "./pkg/...", "./internal/...")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(b)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, module+"/"))
	}
	for _, d := range missingFrom(pkgs, listed) {
		t.Errorf("docs/ARCHITECTURE.md's package table lacks %s (add a row saying what it does)", d)
	}
	for _, d := range missingFrom(listed, pkgs) {
		t.Errorf("docs/ARCHITECTURE.md's package table lists %s, which go list does not know", d)
	}
	seen := map[string]bool{}
	for _, p := range listed {
		if seen[p] {
			t.Errorf("docs/ARCHITECTURE.md's package table lists %s twice", p)
		}
		seen[p] = true
	}
}

// missingFrom returns the elements of want that have is missing, sorted.
func missingFrom(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	slices.Sort(out)
	return out
}

// TestArchPackages checks the table parser on a small document.
func TestArchPackages(t *testing.T) {
	doc := "# T\n\n## Packages\n\nText with `pkg/not-a-row`.\n\n| package | job |\n|---|---|\n" +
		"| `pkg/a` | job, naming `pkg/b` |\n| `internal/c`, `internal/d` | two |\n\nAfter `pkg/e`.\n\n| `pkg/f` | a later table |\n\n## Next\n\n| `pkg/g` | |\n"
	got, err := archPackages(doc)
	if want := []string{"pkg/a", "internal/c", "internal/d"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("archPackages = %v, %v; want %v", got, err, want)
	}
}
