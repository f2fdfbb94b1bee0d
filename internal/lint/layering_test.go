// Package lint holds tests about the code base itself rather than about
// one package's behaviour.
package lint

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers orders the module's packages, lowest first, the way data flows:
// inputs and formats -> the dataset directory -> an open snapshot -> query
// planning -> the tools and the transport -> the commands. A package may
// import packages of its own layer or a lower one, never a higher one.
// Patterns are module-relative; "x/..." is x and everything below it.
//
// Every package of the module must match a pattern: a new package fails
// the test until it is placed here on purpose.
var layers = []struct {
	name string
	pkgs []string
}{
	{"base utilities", []string{"pkg/corrupt", "pkg/fileutil", "pkg/mapbuf", "pkg/period", "pkg/progress", "internal/bufpool", "internal/cliutil", "internal/gctune"}},
	// pkg/lake/... are the lake inputs: a Parquet folder's files in
	// publication order (parquetdir), where files live (objstore), the
	// table formats read over it (roaring < deltalog, iceberg), and source,
	// which resolves an input into one table snapshot for the builder.
	// Only the build side uses them (see forbidden), so the read side never
	// links iceberg-go or an S3 SDK.
	{"formats and codecs", []string{"pkg/manifest", "pkg/arrowfile", "pkg/datafile", "pkg/index", "pkg/vortexio/...", "pkg/coldfile/...", "pkg/lake/...", "pkg/lakegen", "pkg/wal", "pkg/shard", "pkg/parquetfile"}},
	{"dataset directory", []string{"pkg/dataset"}},
	// snapwrite is what every writer of a snapshot (the builder,
	// compaction) writes its files and assembles its manifest through;
	// the read side uses its description of a schema (ColumnsOf) to check
	// the files against their manifest.
	{"snapshot writer", []string{"pkg/snapwrite"}},
	// An open snapshot and the live delta are the two things a view
	// merges; neither knows the other.
	{"snapshot and delta", []string{"pkg/snapshot", "pkg/livedelta"}},
	{"query", []string{"pkg/query/..."}},
	// sqlq parses Flight SQL's restricted grammar into query.Requests:
	// above the read layer, below the transport that receives the text.
	{"sql grammar", []string{"pkg/sqlq"}},
	// sortwrite is here, beside the other tools, rather than low beside
	// pkg/dataset (which is all it needs above the formats): it is the
	// top of the build side, used only by commands and test helpers, and
	// placing it low would let the read side (snapshot, query) import the
	// builder.
	// compact writes snapshots from a query Reader; live is the write
	// path (WAL + delta) a transport drives.
	// icebergtable publishes a dataset's vintages (their portable copies)
	// as an Iceberg table: a tool over pkg/dataset, used by snapbuild.
	{"tools", []string{"pkg/inspect", "pkg/verify/...", "pkg/convert", "pkg/export", "pkg/sortwrite", "pkg/compact", "pkg/live", "pkg/icebergtable"}},
	// served is a served dataset's life (views, reloads, live writes,
	// compaction, faults) without a transport: what the Flight server
	// adapts, as flightsql's domain Server is apart from its gRPC wiring.
	{"served datasets", []string{"pkg/served"}},
	{"transport", []string{"pkg/serve/..."}},
	// bench/gobaseline is a standalone baseline program for the
	// benchmark harness; like the commands, nothing imports it.
	// internal/fakes3 is a test server program (S3 on loopback) the
	// interop suite starts; like the commands, nothing imports it.
	// internal/progressui draws pkg/progress on a terminal (mpb) for the
	// commands; only they link the terminal library.
	{"commands", []string{"cmd/...", "bench/...", "internal/fakes3", "internal/servecmd", "internal/progressui"}},
}

// testHelpers write lakes and snapshots for tests. They may import any
// package of the module but the commands (they build, so they import the
// build side), and only other test helpers may import them: tests are not
// checked here, and production code must not depend on test fixtures.
var testHelpers = []string{"internal/testlake", "internal/testsnap", "internal/testtls", "internal/testiceberg/...", "pkg/inspect/inspecttest", "internal/cliutil/clitest", "internal/datadriven"}

// forbidden lists imports that the layers alone would allow, or that are
// worth a message of their own. From, To and Except are patterns as in
// layers; "..." matches every package. To may also be an external import
// path.
var forbidden = []struct {
	from, to string
	except   []string
	why      string
}{
	{"pkg/serve/...", "pkg/inspect/...", nil, "the server and snapinspect are siblings over the read side; what both need moves down (pkg/query)"},
	{"...", "cmd/...", nil, "commands only wire flags to packages; nothing imports them"},
	{"pkg/snapshot", "pkg/serve/...", nil, "the read side does not know its transports"},
	{"pkg/snapshot", "pkg/query/...", nil, "queries plan over snapshots, not the other way round"},
	{"pkg/query/...", "pkg/serve/...", nil, "the query layer does not know its transports"},
	{"pkg/query/...", "pkg/inspect/...", nil, "the query layer does not know its transports"},
	{"pkg/sqlq", "google.golang.org/grpc/...", nil, "the SQL grammar is transport-free; pkg/serve maps its errors to status codes"},
	// bench/gobaseline is its own Flight server (the old design, kept as a
	// benchmark baseline), so it is a Flight boundary of its own.
	{"...", "github.com/apache/iceberg-go/...", []string{"pkg/lake/objstore", "pkg/lake/iceberg", "pkg/icebergtable", "internal/testiceberg/..."}, "iceberg-go (and the S3 SDK behind its file IO) is linked only where it is used: the object store, the Iceberg reader, the Iceberg table the vintages are published as (pkg/icebergtable, snapbuild only) and the test fixtures its writers make"},
	{"pkg/serve/...", "pkg/icebergtable", nil, "the server serves vintages from the dataset directory; publishing them to Iceberg is snapbuild's job, and snapserve must not link iceberg-go"},
	{"pkg/served", "pkg/icebergtable", nil, "the server serves vintages from the dataset directory; publishing them to Iceberg is snapbuild's job, and snapserve must not link iceberg-go"},
	{"pkg/snapshot", "pkg/lake/...", nil, "the read side does not read lakes"},
	{"pkg/query/...", "pkg/lake/...", nil, "the read side does not read lakes"},
	{"pkg/serve/...", "pkg/lake/...", nil, "the server does not read lakes"},
	{"pkg/served", "pkg/lake/...", nil, "the server does not read lakes"},
	{"pkg/served", "pkg/inspect/...", nil, "the server and snapinspect are siblings over the read side; what both need moves down (pkg/query)"},
	{"...", "google.golang.org/grpc/codes", []string{"pkg/serve/...", "bench/gobaseline"}, "gRPC status codes exist only at the Flight boundary; below it, return sentinel errors"},
	{"...", "google.golang.org/grpc/status", []string{"pkg/serve/...", "bench/gobaseline"}, "gRPC status codes exist only at the Flight boundary; below it, return sentinel errors"},
}

// importEdge is one import in one file. From is the importing package and
// Import the imported one, module-relative for the module's own packages,
// the full path otherwise.
type importEdge struct {
	From, File, Import string
}

// match reports whether the module-relative package p matches pattern.
func match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(patterns []string, p string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(pat, p) })
}

// layerOf returns the index in layers of package p, or -1.
func layerOf(p string) int {
	for i, l := range layers {
		if matchAny(l.pkgs, p) {
			return i
		}
	}
	return -1
}

// checkImports returns one message per violation: per unlisted package,
// and per file and import that breaks the layers, the test-helper rule or
// a forbidden pair. pkgs lists every package (module-relative), including
// those that import nothing; module-internal imports in edges are
// module-relative.
func checkImports(pkgs []string, edges []importEdge) []string {
	internal := map[string]bool{}
	var out []string
	for _, p := range pkgs {
		internal[p] = true
		if layerOf(p) < 0 && !matchAny(testHelpers, p) {
			out = append(out, fmt.Sprintf("%s: package is in no layer; add it to layers (or testHelpers) in internal/lint/layering_test.go, where it belongs in the import order", p))
		}
	}
	for _, e := range edges {
		where := fmt.Sprintf("%s imports %s", e.File, e.Import)
		for _, f := range forbidden {
			if match(f.from, e.From) && match(f.to, e.Import) && !matchAny(f.except, e.From) {
				out = append(out, fmt.Sprintf("%s: forbidden (%s -> %s): %s", where, f.from, f.to, f.why))
			}
		}
		if !internal[e.Import] {
			continue // external, or not a package of this module's tree
		}
		fromHelper, toHelper := matchAny(testHelpers, e.From), matchAny(testHelpers, e.Import)
		switch {
		case toHelper && !fromHelper:
			out = append(out, fmt.Sprintf("%s: %s is a test helper; only tests and other test helpers may import it", where, e.Import))
		case fromHelper:
			// Helpers may import the build side; cmd is covered by forbidden.
		default:
			from, to := layerOf(e.From), layerOf(e.Import)
			if from >= 0 && to > from {
				out = append(out, fmt.Sprintf("%s: layer %q (%d) may not import the higher layer %q (%d)", where, layers[from].name, from, layers[to].name, to))
			}
		}
	}
	slices.Sort(out)
	return out
}

// moduleRoot finds go.mod above the working directory and returns its
// directory and module path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s/go.mod has no module line", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// readImports parses the imports of every non-test .go file below root
// (go/parser, ImportsOnly; build tags are ignored, so every file counts),
// skipping testdata and hidden directories as the go tool does.
func readImports(root, module string) (pkgs []string, edges []importEdge, err error) {
	seen := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != root && err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		pkg := path.Dir(rel)
		if !seen[pkg] {
			seen[pkg] = true
			pkgs = append(pkgs, pkg)
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", rel, spec.Path.Value, err)
			}
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				imp = r
			}
			edges = append(edges, importEdge{From: pkg, File: rel, Import: imp})
		}
		return nil
	})
	return pkgs, edges, err
}

// TestLayering checks the module's real import graph.
func TestLayering(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs, edges, err := readImports(root, module)
	if err != nil {
		t.Fatal(err)
	}
	// Guard against a walk that silently reads nothing.
	if !slices.Contains(pkgs, "pkg/snapshot") || !slices.Contains(edges, importEdge{"pkg/snapshot", "pkg/snapshot/snapshot.go", "pkg/dataset"}) {
		t.Fatalf("the import graph misses pkg/snapshot -> pkg/dataset (%d packages, %d imports read from %s)", len(pkgs), len(edges), root)
	}
	for _, v := range checkImports(pkgs, edges) {
		t.Error(v)
	}
}

// TestLayeringCatches feeds the checker a synthetic graph with one
// violation of each kind, and a few allowed imports, and expects exactly
// the violations.
func TestLayeringCatches(t *testing.T) {
	pkgs := []string{"pkg/corrupt", "pkg/manifest", "pkg/snapshot", "pkg/query", "pkg/inspect", "pkg/serve", "pkg/sortwrite",
		"internal/testsnap", "cmd/snapbuild", "pkg/shiny"}
	edges := []importEdge{
		// allowed
		{"pkg/manifest", "pkg/manifest/manifest.go", "pkg/corrupt"},
		{"pkg/serve", "pkg/serve/plan.go", "pkg/query"},
		{"pkg/serve", "pkg/serve/service.go", "google.golang.org/grpc/status"},
		{"pkg/inspect", "pkg/inspect/latest.go", "pkg/sortwrite"}, // same layer
		{"internal/testsnap", "internal/testsnap/testsnap.go", "pkg/sortwrite"},
		{"cmd/snapbuild", "cmd/snapbuild/serve.go", "pkg/serve"},
		// violations
		{"pkg/corrupt", "pkg/corrupt/corrupt.go", "pkg/manifest"},
		{"pkg/snapshot", "pkg/snapshot/snapshot.go", "pkg/serve"},
		{"pkg/serve", "pkg/serve/plan.go", "pkg/inspect"},
		{"pkg/query", "pkg/query/plan.go", "google.golang.org/grpc/codes"},
		{"pkg/serve", "pkg/serve/helpers.go", "internal/testsnap"},
		{"internal/testsnap", "internal/testsnap/testsnap.go", "cmd/snapbuild"},
	}
	got := checkImports(pkgs, edges)
	want := []string{
		`internal/testsnap/testsnap.go imports cmd/snapbuild: forbidden (... -> cmd/...): commands only wire flags to packages; nothing imports them`,
		`pkg/corrupt/corrupt.go imports pkg/manifest: layer "base utilities" (0) may not import the higher layer "formats and codecs" (1)`,
		`pkg/query/plan.go imports google.golang.org/grpc/codes: forbidden (... -> google.golang.org/grpc/codes): gRPC status codes exist only at the Flight boundary; below it, return sentinel errors`,
		`pkg/serve/helpers.go imports internal/testsnap: internal/testsnap is a test helper; only tests and other test helpers may import it`,
		`pkg/serve/plan.go imports pkg/inspect: forbidden (pkg/serve/... -> pkg/inspect/...): the server and snapinspect are siblings over the read side; what both need moves down (pkg/query)`,
		`pkg/shiny: package is in no layer; add it to layers (or testHelpers) in internal/lint/layering_test.go, where it belongs in the import order`,
		`pkg/snapshot/snapshot.go imports pkg/serve: forbidden (pkg/snapshot -> pkg/serve/...): the read side does not know its transports`,
		`pkg/snapshot/snapshot.go imports pkg/serve: layer "snapshot and delta" (4) may not import the higher layer "transport" (9)`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
