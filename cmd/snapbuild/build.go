package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/progressui"
	"github.com/energyscope/servingsnap/pkg/coldfile"
	"github.com/energyscope/servingsnap/pkg/datafile"
	"github.com/energyscope/servingsnap/pkg/dataset"
	"github.com/energyscope/servingsnap/pkg/export"
	"github.com/energyscope/servingsnap/pkg/icebergtable"
	"github.com/energyscope/servingsnap/pkg/lake/objstore"
	"github.com/energyscope/servingsnap/pkg/lake/source"
	"github.com/energyscope/servingsnap/pkg/manifest"
	"github.com/energyscope/servingsnap/pkg/shard"
	"github.com/energyscope/servingsnap/pkg/sortwrite"
)

func buildCommand() *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "cook a serving snapshot from a Parquet folder, a Delta table or an Iceberg table",
		ArgsUsage: " ",
		Description: `Reads the table at --input, sorts all rows by (series id, period), and
publishes a new snapshot of the dataset at --out (ROOT/DATASET): data.arrow,
index.arrow and a manifest, made visible by an atomic flip of
ROOT/DATASET/CURRENT. A second build makes the next snapshot, with the
previous one as its parent.

--input is a local directory or s3://bucket/prefix. A directory holding
_delta_log/ is read as a Delta table, one holding metadata/ as an Iceberg
table (so is a *.metadata.json file, or --catalog-uri with --table): only
the files of the chosen version are read, with deletes applied. Any other
directory is a folder of Parquet files (hive year=N folders or flat), every
*.parquet read; --raw-files reads a table directory that way too.

--if-changed exits with status 3, building nothing, when the table's
snapshot is the one CURRENT was built from, with the same tier policy
(for cron).

--hot-since YYYY-MM-DD and/or --hot-rows N tier the snapshot: each
series' recent rows (and always its last) stay in the mapped data.arrow,
older ones go to cold.vortex, decoded only by queries that reach them;
--format vortex puts every row in cold.vortex (docs/FORMAT.md §9).

--shards N (or --shard I/N for one of them) builds a sharded dataset: shard
I is the ordinary dataset directory ROOT/DATASET.shard-000I holding the
series whose xxhash64(series id) mod N is I (or Iceberg's bucket with
--shard-function iceberg-bucket), and ROOT/DATASET/SHARDS.json names the N
shards (docs/FORMAT.md, Shard map). A shard job reads only its buckets'
files of an Iceberg table partitioned by bucket(B, series_id), or with
--shard-by-partition COL:B of a Delta table or hive-style Parquet folder
partitioned by a column holding that bucket (N dividing B). Of another
lake each job reads the whole input, unless with --from-split DIR it reads
only its pieces of a snapbuild split (see snapbuild split --help).

Publishing safety: an input of no rows is refused unless --allow-empty;
a snapshot whose series or rows fall below (1-RATIO) or rise above
1/(1-RATIO) times CURRENT's is refused (--max-change, default 0.5: half to
twice; 0 disables). --no-publish writes the snapshot completely but leaves
CURRENT alone: check it with snapverify --snapshot N, then make it live
with snapbuild publish ROOT/DATASET --id N. SIGINT or SIGTERM stops a build
at any phase: what it staged is removed, nothing is published, exit 1.

Live writes (a server's DoPut): by default they keep shadowing the new
snapshot until a compaction folds them. --supersede-writes retires the ones
acknowledged before the build started (the lake now holds what they
revised); later ones still shadow it. HISTORY records either. A build that
drops or retypes a column live writes carry is refused under the lock,
naming the column and the way out; a column it adds is null in their rows
(docs/OPERATIONS.md "One truth for a dataset").

Examples:
   snapbuild build --input lake/ --out snapshots/PET
   snapbuild build --input lake/ --out snapshots/PET --period-column date --on-duplicate=last --json
   snapbuild build --input lake/ --out snapshots/PET --shard $JOB_COMPLETION_INDEX/3
   snapbuild build --input delta/prices --out snapshots/PET --shard 1/4 --shard-function iceberg-bucket --shard-by-partition sid_bucket:16
   snapbuild build --from-split /shared/split --out snapshots/PET --shard $JOB_COMPLETION_INDEX/4
   snapbuild build --input lake/ --out snapshots/PET --no-publish --json
   snapbuild build --input lake/ --out snapshots/PET --supersede-writes
   snapbuild build --input lake/ --out snapshots/PET --hot-since 2024-01-01 --portable
   snapbuild build --input s3://bucket/tables/prices --out snapshots/PET --table-version 12
   snapbuild build --input warehouse/db/prices --out snapshots/PET --snapshot-id 3051729675574597004
   snapbuild build --catalog-uri http://127.0.0.1:8181 --table db.prices --out snapshots/PET --if-changed`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "input", Aliases: []string{"i"}, Usage: "the table: a Parquet folder, Delta or Iceberg table `DIR` (or s3://bucket/prefix), or an Iceberg *.metadata.json"},
			&cli.BoolFlag{Name: "raw-files", Usage: "read a Delta or Iceberg table directory's Parquet files as a plain folder (every file, whatever the log says)"},
			&cli.Int64Flag{Name: "table-version", Usage: "Delta: build version `N` instead of the latest", DefaultText: "latest"},
			&cli.StringFlag{Name: "as-of", Usage: "Delta or Iceberg: build the latest version committed at or before `TIME` (RFC 3339, or YYYY-MM-DD[THH:MM:SS] in UTC)"},
			&cli.Int64Flag{Name: "snapshot-id", Usage: "Iceberg: build snapshot `ID` instead of the current one", DefaultText: "latest"},
			&cli.StringFlag{Name: "ref", Usage: "Iceberg: build the head of branch or tag `NAME`"},
			&cli.StringFlag{Name: "catalog-uri", Usage: "Iceberg REST catalog `URL` (with --table instead of --input)"},
			&cli.StringFlag{Name: "table", Usage: "Iceberg table `NAMESPACE.NAME` in the REST catalog"},
			&cli.StringFlag{Name: "warehouse", Usage: "REST catalog warehouse `NAME`"},
			&cli.StringFlag{Name: "catalog-token", EnvVars: []string{"SNAPBUILD_CATALOG_TOKEN"}, Usage: "REST catalog bearer `TOKEN`"},
			&cli.StringFlag{Name: "catalog-credential", EnvVars: []string{"SNAPBUILD_CATALOG_CREDENTIAL"}, Usage: "REST catalog OAuth2 client credential `ID:SECRET`"},
			&cli.StringFlag{Name: "s3-endpoint", EnvVars: []string{"AWS_ENDPOINT_URL_S3"}, Usage: "S3-compatible endpoint `URL` (path-style addressing); default: AWS"},
			&cli.StringFlag{Name: "s3-region", Usage: "S3 `REGION`; default: from the AWS configuration (AWS_REGION, ~/.aws/config)"},
			&cli.BoolFlag{Name: "if-changed", Usage: "build only if the table's snapshot differs from the one CURRENT was built from; exit 3 otherwise"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "dataset directory `ROOT/DATASET`", Required: true},
			&cli.StringFlag{Name: "series-column", Value: "series_id", Usage: "input column holding the series id"},
			&cli.StringFlag{Name: "period-column", Value: "period", Usage: "input column holding the period (date, timestamp or YYYY[-MM[-DD]], YYYY-Qn, YYYY-Www strings)"},
			&cli.StringFlag{Name: "value-column", Value: "value", Usage: "input column holding the numeric value"},
			&cli.StringFlag{Name: "on-duplicate", Value: "error", Usage: "what to do with two rows of one (series, period): `error` or last (keep the later input's row)"},
			&cli.IntFlag{Name: "batch-rows", Value: datafile.DefaultBatchRows, Usage: "target rows per data record batch (cut at series boundaries)"},
			&cli.IntFlag{Name: "parallel", Usage: "reader goroutines", DefaultText: "number of CPUs"},
			&cli.BoolFlag{Name: "portable", Usage: "also write portable.parquet: every row with its series id and attributes, for DuckDB, Spark, Trino or polars (see publish-copy)"},
			&cli.BoolFlag{Name: "iceberg", Usage: "with --portable: also commit the vintage to the dataset's Iceberg table (created in ROOT/DATASET/iceberg on first use; see snapbuild iceberg sync)"},
			&cli.StringFlag{Name: "iceberg-catalog-uri", Usage: "with --iceberg: the Iceberg REST catalog `URL` to publish to instead of ROOT/DATASET/iceberg"},
			&cli.StringFlag{Name: "iceberg-table", Usage: "with --iceberg-catalog-uri: the table `NAMESPACE.NAME`"},
			&cli.StringFlag{Name: "iceberg-warehouse", Usage: "with --iceberg-catalog-uri: the catalog's warehouse `NAME`"},
			&cli.Int64Flag{Name: "portable-row-group-rows", Value: export.PortableRowGroupRows, Usage: "with --portable: target rows per Parquet row group (cut at the next series boundary)"},
			&cli.StringFlag{Name: "format", Value: "arrow", Usage: "data file format: `arrow` (mapped, sliced zero-copy) or vortex (every row in cold.vortex, decoded per query)"},
			&cli.StringFlag{Name: "hot-since", Usage: "tier the snapshot: rows before `YYYY-MM-DD` go to cold.vortex, the rest stay in the mapped data file (with --hot-rows: a row either keeps is hot)"},
			&cli.Int64Flag{Name: "hot-rows", Usage: "tier the snapshot: the last `N` rows of every series stay in the mapped data file, older ones go to cold.vortex", DefaultText: "not tiered by rows"},
			&cli.BoolFlag{Name: "json", Usage: "print the summary as JSON"},
			&cli.IntFlag{Name: "shards", Usage: "split the dataset into `N` shards by --shard-function(series id) mod N and build them all, one after another (docs/OPERATIONS.md, Sharding)", DefaultText: "not sharded"},
			&cli.StringFlag{Name: "shard", Usage: "build one shard `I/N` only (I may be $JOB_COMPLETION_INDEX), so a scheduler runs the N builds in parallel"},
			&cli.StringFlag{Name: "from-split", Usage: "with --shard I/N: build shard I from its pieces in the split directory `DIR` (snapbuild split, every part done) instead of reading --input", TakesFile: true},
			&cli.StringFlag{Name: "shard-function", Value: shard.HashXXH64, Usage: "with --shards/--shard: the series' shard is `F`(series id) mod N, F " + shard.HashXXH64 + " or " + shard.HashIcebergBucket + " (Iceberg's bucket transform, murmur3_x86_32: a lake partitioned by bucket(B, series_id) holds each shard's rows in its own files); recorded in SHARDS.json"},
			&cli.StringFlag{Name: "shard-by-partition", Usage: "with --shards/--shard on a Delta table or hive-style Parquet folder: partition column `COL:B` holds each row's bucket of B under --shard-function (N dividing B), so a shard build reads only its buckets' files and checks each row is in its file's bucket"},
			&cli.StringFlag{Name: "memory", Usage: "memory budget `SIZE` (512MiB, 6GiB): over it the build sorts in runs spilled to the staging area and merges them", DefaultText: "90% of available memory"},
			progressui.Flag(),
			&cli.BoolFlag{Name: "mixed-period-types", Usage: "accept a period column that is integer in some files and text or a date in others (a type conflict otherwise)"},
			&cli.BoolFlag{Name: "allow-empty", Usage: "publish an empty snapshot when the input holds no rows (refused otherwise)"},
			&cli.Float64Flag{Name: "max-change", Value: sortwrite.DefaultMaxChange, Usage: "refuse a snapshot whose series or rows fall below (1-`RATIO`) or rise above 1/(1-RATIO) times CURRENT's; 0 disables"},
			&cli.BoolFlag{Name: "no-publish", Usage: "write the snapshot but do not flip CURRENT (then: snapverify --snapshot N, snapbuild publish --id N)"},
			&cli.BoolFlag{Name: "supersede-writes", Usage: "retire the dataset's live writes acknowledged before the build started: once published they stop shadowing the new snapshot (later writes still do)"},
			lockTimeoutFlag(),
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile to `FILE`", Hidden: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("build takes no arguments, got %q (use --input and --out)", c.Args().Slice()), 2)
			}
			if p := c.String("cpuprofile"); p != "" {
				f, err := os.Create(p)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			lake, err := lakeOptions(c)
			if err != nil {
				return cli.Exit(err.Error(), 2)
			}
			if err := checkFromSplit(c); err != nil {
				return err
			}
			var memory int64
			if m := c.String("memory"); m != "" {
				if memory, err = cliutil.ParseSize(m); err != nil || memory <= 0 {
					return cli.Exit(fmt.Sprintf("--memory %q: want a positive size such as 512MiB or 6GiB", m), 2)
				}
			}
			if r := c.Float64("max-change"); r < 0 || r >= 1 {
				return cliutil.Usagef("--max-change %g: want a ratio in [0, 1) (0.5 allows half to twice CURRENT's series and rows; 0 disables the check)", r)
			}
			tiers, err := tierPolicy(c)
			if err != nil {
				return err
			}
			var extra []sortwrite.ExtraFile
			if c.Bool("portable") {
				n := c.Int64("portable-row-group-rows")
				if n < 1 {
					return cliutil.Usagef("--portable-row-group-rows %d: want a positive number of rows", n)
				}
				extra = append(extra, export.PortableStep(export.PortableOptions{RowGroupRows: n}))
			}
			opt := sortwrite.Options{
				Extra:            extra,
				Input:            c.String("input"),
				Lake:             lake,
				IfChanged:        c.Bool("if-changed"),
				Out:              c.String("out"),
				SeriesColumn:     c.String("series-column"),
				PeriodColumn:     c.String("period-column"),
				ValueColumn:      c.String("value-column"),
				OnDuplicate:      c.String("on-duplicate"),
				BatchRows:        c.Int("batch-rows"),
				Parallel:         c.Int("parallel"),
				Tool:             "servingsnap " + version,
				Lock:             lockOptions(c, c.String("out")),
				MemoryLimit:      memory,
				AllowEmpty:       c.Bool("allow-empty"),
				MixedPeriodTypes: c.Bool("mixed-period-types"),
				MaxChange:        c.Float64("max-change"),
				NoPublish:        c.Bool("no-publish"),
				SupersedeWrites:  c.Bool("supersede-writes"),
				Tiers:            tiers,
				FromSplit:        c.String("from-split"),
			}
			if c.Bool("iceberg") && !c.Bool("portable") {
				return cliutil.Usagef("--iceberg publishes the portable copy: add --portable")
			}
			if err := checkIcebergFlags(c, "iceberg-"); err != nil {
				return err
			}
			if c.IsSet("iceberg-catalog-uri") && !c.Bool("iceberg") {
				return cliutil.Usagef("--iceberg-catalog-uri goes with --iceberg")
			}
			ctx, stopSignals := interruptible(c.Context)
			defer stopSignals()
			if c.Bool("iceberg") && (c.IsSet("shards") || c.IsSet("shard")) {
				return cliutil.Usagef("--iceberg publishes one dataset's vintages; a sharded dataset's shards are separate datasets: run snapbuild iceberg sync on each shard directory")
			}
			if err := wantIceberg(c, &opt); err != nil {
				return err
			}
			if c.IsSet("shards") || c.IsSet("shard") {
				return buildShards(ctx, c, opt)
			}
			if c.IsSet("shard-by-partition") {
				return cliutil.Usagef("--shard-by-partition goes with --shard I/N or --shards N")
			}
			if err := refuseSharded(opt.Out); err != nil {
				return err
			}
			rep, stop, err := progressui.Start(c.String("progress"), c.App.ErrWriter, "build")
			if err != nil {
				return err
			}
			opt.Progress = rep
			opt.Lock = lockOptionsTo(c, opt.Out, progressui.Writer(rep, c.App.ErrWriter))
			sum, err := sortwrite.Build(ctx, opt)
			stop()
			if errors.Is(err, sortwrite.ErrUnchanged) {
				if c.Bool("json") {
					enc := json.NewEncoder(os.Stdout)
					enc.SetIndent("", "  ")
					enc.Encode(sum)
				} else {
					fmt.Printf("unchanged: %s %s snapshot %s is the one snapshot %d was built from; nothing built\n",
						sum.Lineage.Kind, sum.Lineage.Location, sum.Lineage.LakeSnapshotID, sum.SnapshotID)
				}
				return cli.Exit("", exitUnchanged)
			}
			if errors.Is(err, source.ErrUsage) {
				return cliutil.Usagef("%v (see snapbuild build --help)", err)
			}
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c, sum)
			}
			printSummary(c.App.Writer, sum)
			return nil
		},
	}
}

// wantIceberg sets opt.Published when the build commits to an Iceberg
// table: with --iceberg, or for a dataset that already has one.
func wantIceberg(c *cli.Context, opt *sortwrite.Options) error {
	d, err := dataset.Open(opt.Out)
	if err != nil {
		return err
	}
	_, has, err := icebergtable.LoadConfig(d)
	if err != nil {
		return err
	}
	if c.Bool("iceberg") || has {
		cfg := icebergConfig(c, "iceberg-")
		cfg.Token, cfg.Credential = c.String("catalog-token"), c.String("catalog-credential")
		opt.Published = buildPublished(c, cfg)
	}
	return nil
}

func printSummary(w io.Writer, s *sortwrite.Summary) {
	fmt.Fprintf(w, "snapshot %d of %s (parent %d): %s\n", s.SnapshotID, s.Dataset, s.ParentID, s.Manifest)
	if !s.Published {
		fmt.Fprintf(w, "  NOT published (--no-publish): CURRENT still names %d; check it with snapverify --snapshot %d, then snapbuild publish %s --id %d\n", s.ParentID, s.SnapshotID, filepath.Dir(filepath.Dir(s.Manifest)), s.SnapshotID)
	}
	fmt.Fprintf(w, "  rows        %s in %s series (%s duplicates dropped)\n", count(s.Rows), count(s.Series), count(s.DuplicatesDropped))
	fmt.Fprintf(w, "  inputs      %s files, %s (read %s)\n", count(s.Inputs), humanBytes(s.InputBytes), humanBytes(s.BytesRead))
	fmt.Fprintf(w, "  data cols   %s\n", strings.Join(s.DataColumns, ", "))
	fmt.Fprintf(w, "  attributes  %s\n", strings.Join(s.Attributes, ", "))
	tiered := false
	for _, f := range s.Files {
		tiered = tiered || f.Role == manifest.RoleCold
	}
	for _, f := range s.Files {
		switch {
		case tiered && (f.Role == manifest.RoleData || f.Role == manifest.RoleCold):
			// A tiered build: say how the rows were split.
			fmt.Fprintf(w, "  %-11s %s (%s, %s %s rows)\n", f.Role, f.Path, humanBytes(f.Size), count(f.Rows), f.Tier)
		default:
			fmt.Fprintf(w, "  %-11s %s (%s)\n", f.Role, f.Path, humanBytes(f.Size))
		}
	}
	if tiered {
		fmt.Fprintf(w, "  index/rows  %.2f%% (index / data + cold)\n", 100*s.IndexDataRatio)
	} else {
		fmt.Fprintf(w, "  index/data  %.2f%%\n", 100*s.IndexDataRatio)
	}
	p := s.Phases
	extra := ""
	if p.Extra > 0 {
		extra = fmt.Sprintf(", extra files %.2fs", p.Extra)
	}
	after := ""
	if p.Published > 0 {
		after = fmt.Sprintf(", iceberg %.2fs", p.Published)
	}
	fmt.Fprintf(w, "  time        %.2fs (scan %.2fs, read %.2fs, sort %.2fs, write %.2fs%s, publish %.2fs%s)\n",
		s.Seconds, p.Scan, p.Read, p.Sort, p.Write, extra, p.Publish, after)
	if s.External {
		fmt.Fprintf(w, "  memory      external sort under %s: %s runs, %s spilled, peak RSS %s\n",
			humanBytes(s.MemoryBudget), count(s.Runs), humanBytes(s.SpillBytes), humanBytes(s.PeakRSS))
	} else {
		fmt.Fprintf(w, "  memory      in memory (budget %s), peak RSS %s\n", humanBytes(s.MemoryBudget), humanBytes(s.PeakRSS))
	}
}

// The one number format for people (docs/CLI.md, Conventions).
func humanBytes(n int64) string { return cliutil.Bytes(n) }

func count[T ~int | ~int64](n T) string { return cliutil.Count(int64(n)) }

// exitUnchanged is the exit status of a build --if-changed skipped: not
// a failure (1) nor a usage error (2).
const exitUnchanged = 3

// lakeOptions gathers the table-selection flags.
func lakeOptions(c *cli.Context) (source.Options, error) {
	o := source.Options{
		RawFiles:   c.Bool("raw-files"),
		SnapshotID: c.Int64("snapshot-id"),
		Ref:        c.String("ref"),
		Catalog: source.CatalogOptions{
			URI:        c.String("catalog-uri"),
			Table:      c.String("table"),
			Warehouse:  c.String("warehouse"),
			Token:      c.String("catalog-token"),
			Credential: c.String("catalog-credential"),
		},
		S3: objstore.S3Config{Endpoint: c.String("s3-endpoint"), Region: c.String("s3-region")},
	}
	if c.IsSet("table-version") {
		v := c.Int64("table-version")
		o.TableVersion = &v
	}
	if s := c.String("as-of"); s != "" {
		t, err := parseTime(s)
		if err != nil {
			return o, err
		}
		o.AsOf = t
	}
	n := 0
	for _, f := range []string{"table-version", "as-of", "snapshot-id", "ref"} {
		if c.IsSet(f) {
			n++
		}
	}
	if n > 1 {
		return o, fmt.Errorf("--table-version, --as-of, --snapshot-id and --ref each select a version: give one")
	}
	if o.RawFiles && n > 0 {
		return o, fmt.Errorf("--raw-files reads files, not a version of a table: drop the version flag")
	}
	return o, nil
}

// parseTime reads --as-of: RFC 3339, or a date or date-time in UTC.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--as-of %q: want RFC 3339 (2024-05-01T12:00:00Z) or YYYY-MM-DD[THH:MM:SS] (UTC)", s)
}

// tierPolicy reads --format, --hot-since and --hot-rows.
func tierPolicy(c *cli.Context) (coldfile.Policy, error) {
	f := c.String("format")
	if f != "arrow" && f != coldfile.FormatVortex {
		return coldfile.Policy{}, cliutil.Usagef("--format %q: want arrow or vortex", f)
	}
	if f == coldfile.FormatVortex && (c.IsSet("hot-since") || c.IsSet("hot-rows")) {
		return coldfile.Policy{}, cliutil.Usagef("--format vortex puts every row in cold.vortex: it takes no --hot-since or --hot-rows")
	}
	if n := c.Int64("hot-rows"); c.IsSet("hot-rows") && n < 1 {
		return coldfile.Policy{}, cliutil.Usagef("--hot-rows %d: want a positive number of rows", n)
	}
	if d := c.String("hot-since"); c.IsSet("hot-since") && d == "" {
		return coldfile.Policy{}, cliutil.Usagef("--hot-since \"\": want a date YYYY-MM-DD")
	}
	p, err := coldfile.PolicyOf(c.String("hot-since"), c.Int64("hot-rows"), map[bool]string{true: f}[f == coldfile.FormatVortex])
	if err != nil {
		return p, cliutil.Usagef("--%v", err)
	}
	return p, nil
}
