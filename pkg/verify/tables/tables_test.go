package tables_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/servingsnap/internal/testiceberg"
	"github.com/energyscope/servingsnap/internal/testsnap"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
	"github.com/energyscope/servingsnap/pkg/verify"
	_ "github.com/energyscope/servingsnap/pkg/verify/tables"
)

// TestAgainstTables: --against reads a Delta or an Iceberg table as the
// builder does (deletion vectors, delete files, column mapping, partition
// values): a snapshot of the table is intact against it, at the version
// it was built from even after the table moved on; against another
// version of the same rows' table, it differs (not corrupt).
func TestAgainstTables(t *testing.T) {
	delta := filepath.Join("..", "..", "..", "testdata", "delta", "spark_dv")
	wh := t.TempDir()
	tables, err := testiceberg.Write(context.Background(), wh)
	if err != nil {
		t.Fatal(err)
	}
	ice := testiceberg.TableDir(wh, tables[0].Name)
	moved := filepath.Join(t.TempDir(), "spark_dv") // another table: compared at its latest
	if err := os.CopyFS(moved, os.DirFS(delta)); err != nil {
		t.Fatal(err)
	}
	v := func(n int64) *int64 { return &n }

	cases := []struct {
		name    string
		input   string
		build   func(*sortwrite.Options)
		against string // "" : the input
		status  string
		note    string
	}{
		{"delta latest", delta, nil, "", verify.StatusIntact, "at snapshot 8"},
		{"delta at the version built", delta, func(o *sortwrite.Options) { o.Lake.TableVersion = v(5) }, "", verify.StatusIntact, "at snapshot 5"},
		{"delta version 5 against another table's latest", delta, func(o *sortwrite.Options) { o.Lake.TableVersion = v(5) }, moved, verify.StatusDiffers, "at snapshot 8"},
		{"iceberg current", ice, nil, "", verify.StatusIntact, "iceberg table"},
		{"iceberg at the snapshot built", ice, func(o *sortwrite.Options) { o.Lake.SnapshotID = tables[0].BeforeSnapshotID }, "", verify.StatusIntact, "iceberg table"},
		{"iceberg before its deletes, against another table", ice, func(o *sortwrite.Options) { o.Lake.SnapshotID = tables[0].BeforeSnapshotID },
			testiceberg.TableDir(wh, tables[1].Name), verify.StatusDiffers, "iceberg table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := filepath.Join(t.TempDir(), "DS")
			testsnap.Build(t, tc.input, ds, tc.build)
			against := tc.against
			if against == "" {
				against = tc.input
			}
			rep, err := verify.Verify(ds, verify.Options{Against: against})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != tc.status || rep.InputRows == 0 {
				t.Errorf("status %q, input rows %d; want %q: %v", rep.Status, rep.InputRows, tc.status, rep.Findings)
			}
			if !strings.Contains(strings.Join(rep.Notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", rep.Notes, tc.note)
			}
		})
	}
}
