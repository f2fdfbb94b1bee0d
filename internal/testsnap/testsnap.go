// Package testsnap builds sample snapshots for the tests of everything that
// reads them (read side, server, verifier, inspector). It is apart from
// testlake so the builder's own tests can use testlake without a cycle.
package testsnap

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/energyscope/servingsnap/pkg/lakegen"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

// Sample generates a synthetic lake of the given number of series (years
// 2015–2024, seed) and builds it into dataset dir ROOT/name. It returns the
// lake and dataset directories.
func Sample(t testing.TB, root, name string, series int, seed int64, mod func(*sortwrite.Options)) (lake, dataset string) {
	t.Helper()
	lake = filepath.Join(root, "lake-"+name)
	if _, err := lakegen.Generate(context.Background(), lakegen.Options{
		Out: lake, Series: series, FromYear: 2015, ToYear: 2024, Seed: seed, RowGroupRows: 4096,
	}); err != nil {
		t.Fatal(err)
	}
	dataset = filepath.Join(root, name)
	Build(t, lake, dataset, mod)
	return lake, dataset
}

// Build builds the lake into dataset dir, failing the test on error.
func Build(t testing.TB, lake, dataset string, mod func(*sortwrite.Options)) *sortwrite.Summary {
	t.Helper()
	opt := sortwrite.Options{Input: lake, Out: dataset, Parallel: 2}
	if mod != nil {
		mod(&opt)
	}
	sum, err := sortwrite.Build(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}
