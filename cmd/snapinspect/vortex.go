package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/inspect"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/vortexio"
)

func vortexCommand() *cli.Command {
	return &cli.Command{
		Name:      "vortex",
		Usage:     "describe a Vortex file (a snapshot's cold.vortex, or any): schema, row count, layout tree, encoding and size of every chunk",
		ArgsUsage: "FILE | ROOT/DATASET | SNAPSHOT-DIR",
		Description: `The debugging view of the Vortex codec: which layouts the file nests and which
encoding every chunk chose, with its byte size. Reads every chunk's header.

The operand is a Vortex file, a dataset directory (the cold file of the
snapshot CURRENT names, or of --snapshot N), or a snapshot directory
(snapshots/NNNNNN/, its cold.vortex). A snapshot without a cold file (not
tiered) fails with exit 1.

Examples:
   snapinspect vortex ROOT/DATASET
   snapinspect vortex ROOT/DATASET --snapshot 3 --json
   snapinspect vortex ROOT/DATASET/snapshots/000003/cold.vortex
   snapbuild convert data.arrow /tmp/x.vortex && snapinspect vortex /tmp/x.vortex`,
		Flags: globalFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("vortex: want one FILE or ROOT/DATASET argument (see snapinspect vortex --help)")
			}
			id, err := snapshotFlag(c)
			if err != nil {
				return err
			}
			path, m, err := vortexTarget(c.Args().First(), id)
			if err != nil {
				return err
			}
			f, err := vortexio.OpenFile(path)
			if err != nil {
				return err // a missing file exits 2, a damaged one 1
			}
			defer f.Close()
			if !wantJSON(c) {
				if m != nil {
					fmt.Fprintf(c.App.Writer, "cold file of snapshot %d of %s: %s\n", m.SnapshotID, m.Dataset, path)
				}
				return vortexio.Describe(c.App.Writer, f)
			}
			var tree strings.Builder
			if err := vortexio.Describe(&tree, f); err != nil {
				return err
			}
			enc, err := f.Encodings()
			if err != nil {
				return err
			}
			type column struct {
				Name     string `json:"name"`
				Type     string `json:"type"`
				Nullable bool   `json:"nullable"`
			}
			cols := []column{}
			for _, fl := range f.Schema().Fields() {
				cols = append(cols, column{fl.Name, fl.Type.String(), fl.Nullable})
			}
			doc := map[string]any{
				"file": path, "rows": f.NumRows(), "dtype": f.DType().String(),
				"columns": cols, "encodings": enc, "describe": strings.Split(strings.TrimSuffix(tree.String(), "\n"), "\n"),
				// The snapshot whose cold file it is (0 and "" for a file named directly).
				"dataset": "", "snapshot_id": uint64(0),
			}
			if m != nil {
				doc["dataset"], doc["snapshot_id"] = m.Dataset, m.SnapshotID
			}
			return cliutil.PrintJSON(c.App.Writer, doc)
		},
	}
}

// vortexTarget resolves the vortex command's operand to a file: the file
// itself; a snapshot directory's cold.vortex; or a dataset directory's
// snapshot's cold file (inspect.ColdFile), with its manifest. --snapshot
// applies to a dataset directory only.
func vortexTarget(arg string, id uint64) (string, *manifest.Manifest, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return "", nil, err // exit 2: a missing operand
	}
	isDataset := false
	if st.IsDir() {
		for _, name := range []string{dataset.CurrentFile, dataset.ManifestsDir, dataset.SnapshotsDir} {
			if _, err := os.Stat(filepath.Join(arg, name)); err == nil {
				isDataset = true
			}
		}
	}
	switch {
	case isDataset:
		return inspect.ColdFile(arg, id)
	case id != 0:
		return "", nil, usageErr("vortex: --snapshot needs a dataset directory, not %s", arg)
	case st.IsDir():
		p := filepath.Join(arg, coldfile.FileName)
		if _, err := os.Stat(p); err != nil {
			return "", nil, usageErr("vortex: %s is neither a dataset directory nor a snapshot directory holding %s", arg, coldfile.FileName)
		}
		return p, nil, nil
	}
	return arg, nil, nil
}
