package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/icebergtable"
	"github.com/energyscope/servingsnap/pkg/manifest"
)

// icebergCommand is `snapbuild iceberg sync`: make the dataset's Iceberg
// table agree with its vintages and CURRENT.
func icebergCommand() *cli.Command {
	// One command with a verb rather than urfave/cli subcommands, so the
	// arguments are normalised like every other command's (flags may
	// follow the dataset).
	return &cli.Command{
		Name:      "iceberg",
		Usage:     "iceberg sync: make the dataset's Iceberg table agree with its vintages and CURRENT (idempotent)",
		ArgsUsage: "sync ROOT/DATASET",
		Description: `Every vintage with a portable copy (build --portable) becomes one Iceberg
snapshot whose only data file is that copy, referenced where it lies (never
rewritten), tagged vintage-NNNNNN, its summary carrying the vintage's id,
parent and lake lineage; the branch main names CURRENT's snapshot (guarded
by the snapshot main named before); vintages gc removed lose their tag and
snapshot (metadata only: Iceberg deletes no file). The first sync creates
the table: by default a Hadoop-catalog table in ROOT/DATASET/iceberg (its
metadata/version-hint.text names the newest metadata file), or with
--catalog-uri and --table a table in a REST catalog; ROOT/DATASET/ICEBERG.json
records which, and from then on every build, publish, rollback and gc of
the dataset commits to the table under the dataset's lock, right after its
flip of CURRENT. CURRENT stays the truth: sync repairs a table a crash left
behind, and running it again changes nothing. docs/OPERATIONS.md, "The
Iceberg table".

Examples:
   snapbuild iceberg sync snapshots/PET
   snapbuild iceberg sync --catalog-uri http://127.0.0.1:8181 --table serving.pet snapshots/PET --json`,
		Flags: append(icebergCatalogFlags(""),
			&cli.StringFlag{Name: "catalog-token", EnvVars: []string{"SNAPBUILD_CATALOG_TOKEN"}, Usage: "REST catalog bearer `TOKEN`"},
			&cli.StringFlag{Name: "catalog-credential", EnvVars: []string{"SNAPBUILD_CATALOG_CREDENTIAL"}, Usage: "REST catalog OAuth2 client credential `ID:SECRET`"},
			lockTimeoutFlag(), &cli.BoolFlag{Name: "json", Usage: "print JSON (docs/CLI.md)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 || c.Args().First() != "sync" {
				return cliutil.Usagef("iceberg takes the verb sync and the dataset directory: snapbuild iceberg sync ROOT/DATASET")
			}
			d, err := dataset.Open(c.Args().Get(1))
			if err != nil {
				return err
			}
			if err := d.CheckExists(); err != nil {
				return err
			}
			if err := checkIcebergFlags(c, ""); err != nil {
				return err
			}
			w, err := d.LockForWriteWith(c.Context, lockOptions(c, d.Dir))
			if err != nil {
				return err
			}
			defer w.Close()
			if _, err := d.CurrentID(); err != nil {
				return err
			}
			res, err := icebergtable.SyncLocked(c.Context, d, icebergConfig(c, ""))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, res)
			}
			printSync(c.App.Writer, res)
			return nil
		},
	}
}

// icebergCatalogFlags are the flags that name a REST catalog table to
// publish to; build prefixes them with "iceberg-" (its --catalog-uri and
// --table name the input).
func icebergCatalogFlags(prefix string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: prefix + "catalog-uri", Usage: "publish to the Iceberg REST catalog at `URL` instead of the Hadoop table in ROOT/DATASET/iceberg"},
		&cli.StringFlag{Name: prefix + "table", Usage: "with --" + prefix + "catalog-uri: the table `NAMESPACE.NAME`"},
		&cli.StringFlag{Name: prefix + "warehouse", Usage: "with --" + prefix + "catalog-uri: the catalog's warehouse `NAME`"},
	}
}

// icebergConfig reads icebergCatalogFlags. The zero Config (no flag) lets
// the dataset's ICEBERG.json decide, or the Hadoop table for a new one.
// Tokens come from --catalog-token / --catalog-credential and their
// environment variables, never from ICEBERG.json.
func icebergConfig(c *cli.Context, prefix string) icebergtable.Config {
	cfg := icebergtable.Config{Token: c.String("catalog-token"), Credential: c.String("catalog-credential")}
	if uri := c.String(prefix + "catalog-uri"); uri != "" {
		cfg.Catalog, cfg.CatalogURI, cfg.Table, cfg.Warehouse = icebergtable.CatalogREST, uri, c.String(prefix+"table"), c.String(prefix+"warehouse")
	}
	return cfg
}

// checkIcebergFlags refuses a table without a catalog and the reverse.
func checkIcebergFlags(c *cli.Context, prefix string) error {
	uri, tbl := c.String(prefix+"catalog-uri"), c.String(prefix+"table")
	if (uri == "") != (tbl == "") {
		return cli.Exit(fmt.Sprintf("--%scatalog-uri and --%stable go together", prefix, prefix), 2)
	}
	return nil
}

// followFlip keeps the dataset's Iceberg table in step after a flip of
// CURRENT (publish, rollback, gc), under the write lock the caller holds:
// nothing when the dataset has no table (no ICEBERG.json). Its error says
// the flip happened and how to repair the table.
func followFlip(ctx context.Context, c *cli.Context, d *dataset.Dir) error {
	if _, ok, err := icebergtable.LoadConfig(d); err != nil || !ok {
		return err
	}
	// rollback, gc and publish have no catalog flags: a REST catalog's
	// credentials come from the environment.
	cfg := icebergtable.Config{Token: os.Getenv("SNAPBUILD_CATALOG_TOKEN"), Credential: os.Getenv("SNAPBUILD_CATALOG_CREDENTIAL")}
	res, err := icebergtable.SyncLocked(ctx, d, cfg)
	if err != nil {
		return fmt.Errorf("%s: the Iceberg table did not follow (CURRENT did; snapbuild iceberg sync %s repairs it): %w", d.Name, d.Dir, err)
	}
	if res.MainNote != "" {
		fmt.Fprintf(c.App.ErrWriter, "%s: iceberg: %s\n", d.Name, res.MainNote)
	}
	return nil
}

// buildPublished is build's sortwrite.Options.Published with --iceberg: the
// first build creates the table with cfg, later ones find it in
// ICEBERG.json.
func buildPublished(c *cli.Context, cfg icebergtable.Config) func(context.Context, *dataset.Dir, *manifest.Manifest) error {
	return func(ctx context.Context, d *dataset.Dir, m *manifest.Manifest) error {
		res, err := icebergtable.SyncLocked(ctx, d, cfg)
		if err != nil {
			return fmt.Errorf("iceberg table (snapbuild iceberg sync %s repairs it): %w", d.Dir, err)
		}
		if res.MainNote != "" {
			fmt.Fprintf(c.App.ErrWriter, "%s: iceberg: %s\n", d.Name, res.MainNote)
		}
		return nil
	}
}

func printSync(w io.Writer, r *icebergtable.Result) {
	ids := func(v []uint64) string {
		if len(v) == 0 {
			return "none"
		}
		s := make([]string, len(v))
		for i, id := range v {
			s[i] = fmt.Sprint(id)
		}
		return strings.Join(s, ", ")
	}
	state := "in step"
	if r.Changed {
		state = "updated"
	}
	fmt.Fprintf(w, "%s: iceberg table %s (%s)\n", r.Dataset, r.Table, state)
	fmt.Fprintf(w, "  added     %s\n  tagged    %s\n  removed   %s\n", ids(r.Added), ids(r.Tagged), ids(r.Removed))
	if r.Main != 0 {
		fmt.Fprintf(w, "  main      vintage %d (CURRENT)\n", r.Main)
	} else {
		fmt.Fprintf(w, "  main      %s\n", r.MainNote)
	}
	if len(r.NoPortable) > 0 {
		fmt.Fprintf(w, "  no portable copy (not in the table): %s\n", ids(r.NoPortable))
	}
}
