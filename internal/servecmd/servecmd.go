// Package servecmd is the Arrow Flight server's command line, shared by
// `snapbuild serve` and the `snapserve` binary. snapserve exists because a
// server must start in milliseconds: snapbuild links the lake readers, and
// iceberg-go's package initialisation alone costs about 0.14 s of CPU and
// 32 MB of allocations at every start of any binary that links it; the
// server needs none of it (pkg/serve does not read lakes), so snapserve
// links only what serving needs (a test checks that it links no iceberg-go).
package servecmd

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/energyscope/servingsnap/internal/cliutil"
	"github.com/energyscope/servingsnap/internal/gctune"
	"github.com/energyscope/servingsnap/pkg/serve"
	"github.com/energyscope/servingsnap/pkg/served"
	"github.com/energyscope/servingsnap/pkg/shard"
)

// Command is "snapbuild serve" and "snapserve": the Arrow Flight server
// (pkg/serve, docs/FLIGHT.md). version is the binary's.
func Command(version string) *cli.Command {
	d := serve.DefaultLimits
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve the snapshots under a root directory over Arrow Flight",
		ArgsUsage: " ",
		Description: `Serves every dataset under --root (each a directory with a CURRENT file) over
Arrow Flight: ListFlights, GetFlightInfo, GetSchema, DoGet of a JSON ticket,
DoAction "status" and "reload". Start-up maps each current snapshot and reads
its index; nothing is built per row. docs/FLIGHT.md describes the tickets and
errors.

Every --reload-interval the server reads each dataset's CURRENT; a new
snapshot is opened and validated (every file checksummed) while the old one
keeps being served, then swapped in. The old one is unmapped when its last
running request ends. A snapshot that fails to validate is not served (log,
DoAction status, servingsnap_reload_failures_total). DoAction "reload" (body:
a dataset name, or empty for all) checks at once.

With --token-file (or --token-env, for containers) every call needs a
bearer token; a line TOKEN scopes=read,write,admin datasets=A,B limits its
token to those scopes (read: queries and listings, write: DoPut, admin:
reload, compact, discard) and datasets; a bare TOKEN line may do everything
(docs/FLIGHT.md, Authentication). /metrics and /healthz take no token.

Once listening, one JSON line goes to stdout with the bound addresses (handy
with port 0); logs go to stderr. SIGTERM or SIGINT stops accepting calls and
lets running streams finish for --shutdown-timeout.

A tiered snapshot (build --hot-since, --hot-rows or --format vortex) keeps
older rows in cold.vortex; a query touching them decodes the series' cold
rows, kept under --cold-cache (one LRU shared by every dataset) so repeated
reads do not decode again.

A sharded dataset (built with build --shards) is served under its own name:
GetFlightInfo returns one endpoint per shard the query touches, located by
--cluster; --shards says which shards this server holds (docs/FLIGHT.md,
Sharded datasets).

Examples:
   snapbuild serve --root snapshots --addr 127.0.0.1:8815
   snapbuild serve --root snapshots --addr 0.0.0.0:8815 --http-addr 127.0.0.1:9815 \
       --token-file /etc/servingsnap/tokens --tls-cert cert.pem --tls-key key.pem
   snapbuild serve --root snapshots --addr 0.0.0.0:8815 --shards 1 --cluster cluster.json
   snapserve --root snapshots --addr 127.0.0.1:8815   (the same server, without the lake readers: faster start)`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root", Usage: "directory holding the dataset directories `ROOT`", Required: true},
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8815", Usage: "Flight (gRPC) listen address `HOST:PORT`; port 0 picks a free one"},
			&cli.StringFlag{Name: "http-addr", Usage: "metrics (/metrics) and health (/healthz) listen address `HOST:PORT`; empty: none"},
			&cli.StringFlag{Name: "token-file", Usage: "require a bearer token from `FILE`: one a line, TOKEN [scopes=read,write,admin] [datasets=A,B] (a bare TOKEN: every scope and dataset); # comments", TakesFile: true},
			&cli.StringFlag{Name: "token-env", Usage: "require a bearer token from environment variable `NAME`, lines as in --token-file separated by newlines or ';' (with --token-file: both sets)"},
			&cli.StringFlag{Name: "tls-cert", Usage: "TLS certificate `PEM` file (with --tls-key)", TakesFile: true},
			&cli.StringFlag{Name: "tls-key", Usage: "TLS private key `PEM` file (with --tls-cert)", TakesFile: true},
			&cli.IntFlag{Name: "max-ticket-bytes", Value: d.MaxTicketBytes, Usage: "largest ticket or query command accepted"},
			&cli.IntFlag{Name: "max-series", Value: d.MaxSeries, Usage: "most series one request may list or match"},
			&cli.Int64Flag{Name: "max-rows", Value: d.MaxRows, Usage: "most rows one response may hold"},
			&cli.Int64Flag{Name: "batch-bytes", Value: d.BatchBytes, Usage: "target size of one streamed record batch (keep under the clients' gRPC receive limit, 4 MiB by default)"},
			&cli.BoolFlag{Name: "read-only", Usage: "a replica: refuse DoPut and never take a dataset's write-ahead log; follow the writer's log instead (its writes are served within --follow-interval)"},
			&cli.DurationFlag{Name: "follow-interval", Value: served.DefaultFollowInterval, Usage: "how often a dataset whose log another server writes (a --read-only replica's, a standby's) reads what was appended"},
			&cli.Int64Flag{Name: "max-put-rows", Value: d.MaxPutRows, Usage: "most rows one DoPut record batch may hold"},
			&cli.StringFlag{Name: "max-put-bytes", Value: "256MiB", Usage: "most bytes of record batches all DoPuts may hold at once (more wait, then fail)"},
			&cli.StringFlag{Name: "grpc-window", Value: "0", Usage: "gRPC flow-control window `SIZE` of each stream (a connection's: 4 times it), e.g. 4MiB for DoPut over a long round trip (0: gRPC's own, 64KiB grown by its bandwidth estimate)", DefaultText: "gRPC's own"},
			&cli.StringFlag{Name: "max-inflight-bytes", Value: "128MiB", Usage: "most bytes all DoGet streams may hold unsent at once; a stream that finds them spent waits up to --stream-timeout, then fails with ResourceExhausted (0: no budget)"},
			&cli.DurationFlag{Name: "stream-timeout", Value: d.StreamTimeout, Usage: "end a DoGet stream (closing its connection) whose client has read nothing for this long (0: never)"},
			&cli.DurationFlag{Name: "lease-timeout", Value: d.LeaseTimeout, Usage: "end a DoGet stream still reading a snapshot replaced this long ago, so old vintages are unmapped and gc can delete them (0: never)"},
			&cli.StringFlag{Name: "max-prepared-bytes", Value: "64MiB", Usage: "most bytes all open Flight SQL prepared statements (text and bound parameters) may hold; past it preparing or binding fails with ResourceExhausted (0: no limit)"},
			&cli.StringFlag{Name: "max-prepared-bytes-per-client", Value: "16MiB", Usage: "most bytes the open prepared statements of one client connection may hold (0: no limit); they are released when the connection closes"},
			&cli.DurationFlag{Name: "prepared-ttl", Value: d.PreparedTTL, Usage: "release a prepared statement unused for this long (0: only when closed or its connection ends)"},
			&cli.Int64Flag{Name: "compact-rows", Usage: "compact a dataset when its live delta holds this many rows (0: never by rows)", DefaultText: "never by rows"},
			&cli.StringFlag{Name: "compact-bytes", Value: "0", Usage: "compact when the delta holds this much memory, e.g. 512MiB (0: never by size)", DefaultText: "never by size"},
			&cli.DurationFlag{Name: "compact-age", Usage: "compact when the oldest write not yet folded in is this old, e.g. 1h (0: never by age)", DefaultText: "never by age"},
			&cli.IntFlag{Name: "vintages", Value: served.DefaultVintages, Usage: "retained vintages besides the served one each dataset keeps open (mapped, gc lease held) for tickets with \"vintage\" and SQL FOR VERSION AS OF, least recently used out (0: none)"},
			&cli.StringFlag{Name: "cold-cache", Value: "256MiB", Usage: "memory budget `SIZE` of decoded cold rows (tiered snapshots' cold.vortex), one LRU for the whole server, e.g. 1GiB (0: no cache, every cold read decodes)"},
			&cli.StringFlag{Name: "gc-headroom", Value: "256MiB", Usage: "keep the Go collector's heap goal at least `SIZE` above the live heap while the server takes writes and for 30 s after (fewer collections while the heap is small, the delta and requests only; a GOGC in the environment overrides it; 0: the runtime's own GOGC=100)"},
			&cli.StringFlag{Name: "gc-read-headroom", Value: "16MiB", Usage: "the heap goal's headroom `SIZE` while the server takes no writes: a request's garbage collected every few hundred requests rather than every few dozen, for at most this much garbage held (0: the runtime's own GOGC=100)"},
			&cli.StringFlag{Name: "prefetch", Value: "auto", Usage: "once the first query is answered, read the served snapshots into the page cache in the background, within `SIZE`: every index, then data files, each whole or not at all (auto: a quarter of MemAvailable at start; 0 or off: none, pages are read as queries first touch them)"},
			&cli.BoolFlag{Name: "verify", Usage: "checksum every data file at start-up (reads all of it; reloads always do)"},
			&cli.DurationFlag{Name: "reload-interval", Value: time.Second, Usage: "how often to check each dataset's CURRENT for a new snapshot; 0 disables (DoAction reload still works)"},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "how long running streams may finish after SIGTERM"},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "log format: `text` or json"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log level: debug (every call), info, warn or error"},
			&cli.StringFlag{Name: "shards", Usage: "serve only shards `LIST` (e.g. 0,2 or 0-3) of every sharded dataset under --root; default: every shard found"},
			&cli.StringFlag{Name: "cluster", Usage: "JSON `FILE` of where each shard is served: {\"shards\": {\"0\": [\"grpc://host:port\"], ...}}", TakesFile: true},
			&cli.DurationFlag{Name: "cluster-check-interval", Value: serve.DefaultLocationCheckInterval, Usage: "how often each --cluster location of each shard is health-checked (gRPC health); one found down is left out of GetFlightInfo's endpoints until a check finds it up (0: never check, list every location)"},
			&cli.DurationFlag{Name: "cluster-check-timeout", Value: serve.DefaultLocationCheckTimeout, Usage: "how long one health check of a --cluster location may take before the location counts as down"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("serve takes no arguments, got %q (use --root)", c.Args().Slice()), 2)
			}
			log, err := newLogger(c.String("log-format"), c.String("log-level"))
			if err != nil {
				return cli.Exit("serve: "+err.Error(), 2)
			}
			cfg := serve.Config{
				Root:     c.String("root"),
				Addr:     c.String("addr"),
				HTTPAddr: c.String("http-addr"),
				TLSCert:  c.String("tls-cert"),
				TLSKey:   c.String("tls-key"),
				Options: serve.Options{
					Limits: serve.Limits{
						MaxTicketBytes: c.Int("max-ticket-bytes"),
						MaxSeries:      c.Int("max-series"),
						MaxRows:        c.Int64("max-rows"),
						BatchBytes:     c.Int64("batch-bytes"),
					},
					VerifyData:     c.Bool("verify"),
					ReadOnly:       c.Bool("read-only"),
					ReloadInterval: c.Duration("reload-interval"),
					FollowInterval: c.Duration("follow-interval"),
					Logger:         log,
					Version:        version,
				},
				ShutdownTimeout: c.Duration("shutdown-timeout"),
			}
			if cfg.ReloadInterval < 0 {
				return cli.Exit("serve: --reload-interval must be ≥ 0", 2)
			}
			if cfg.FollowInterval <= 0 {
				return cli.Exit("serve: --follow-interval must be > 0", 2)
			}
			cfg.Limits.MaxPutRows = c.Int64("max-put-rows")
			if cfg.Limits.MaxInFlightBytes, err = cliutil.ParseSize(c.String("max-inflight-bytes")); err != nil {
				return cli.Exit("serve: --max-inflight-bytes: "+err.Error(), 2)
			}
			cfg.Limits.StreamTimeout, cfg.Limits.LeaseTimeout = c.Duration("stream-timeout"), c.Duration("lease-timeout")
			if cfg.Limits.StreamTimeout < 0 || cfg.Limits.LeaseTimeout < 0 {
				return cli.Exit("serve: --stream-timeout and --lease-timeout must be ≥ 0", 2)
			}
			if cfg.Limits.MaxPutBytes, err = cliutil.ParseSize(c.String("max-put-bytes")); err != nil {
				return cli.Exit("serve: --max-put-bytes: "+err.Error(), 2)
			}
			if err := preparedLimits(&cfg.Limits, c.String("max-prepared-bytes"), c.String("max-prepared-bytes-per-client"), c.Duration("prepared-ttl")); err != nil {
				return cli.Exit("serve: "+err.Error(), 2)
			}
			cfg.Compact.Rows, cfg.Compact.Age = c.Int64("compact-rows"), c.Duration("compact-age")
			if cfg.Compact.Bytes, err = cliutil.ParseSize(c.String("compact-bytes")); err != nil {
				return cli.Exit("serve: --compact-bytes: "+err.Error(), 2)
			}
			window, err := cliutil.ParseSize(c.String("grpc-window"))
			if err != nil || window > 1<<29 {
				return cli.Exit(fmt.Sprintf("serve: --grpc-window: %q: want a size from 0 to 512MiB", c.String("grpc-window")), 2)
			}
			cfg.WindowBytes = int(window)
			if cfg.Vintages = c.Int("vintages"); cfg.Vintages < 0 {
				return cli.Exit(fmt.Sprintf("serve: --vintages %d: want 0 or more", cfg.Vintages), 2)
			} else if cfg.Vintages == 0 {
				cfg.Vintages = -1 // none
			}
			if cfg.ColdCacheBytes, err = cliutil.ParseSize(c.String("cold-cache")); err != nil {
				return cli.Exit("serve: --cold-cache: "+err.Error(), 2)
			}
			if cfg.PrefetchBytes, err = parsePrefetch(c.String("prefetch")); err != nil {
				return cli.Exit("serve: --prefetch: "+err.Error(), 2)
			}
			headroom, err := cliutil.ParseSize(c.String("gc-headroom"))
			if err != nil {
				return cli.Exit("serve: --gc-headroom: "+err.Error(), 2)
			}
			if cfg.Limits.BatchBytes <= 0 {
				return cli.Exit("serve: --batch-bytes must be positive", 2)
			}
			if c.IsSet("shards") {
				if cfg.Shards, err = shard.ParseList(c.String("shards")); err != nil {
					return cli.Exit("serve: --"+err.Error(), 2)
				}
			}
			if f := c.String("cluster"); f != "" {
				if cfg.Cluster, err = shard.ReadCluster(f); err != nil {
					return cli.Exit("serve: --cluster: "+err.Error(), 2)
				}
			}
			cfg.LocationCheckInterval, cfg.LocationCheckTimeout = c.Duration("cluster-check-interval"), c.Duration("cluster-check-timeout")
			if cfg.LocationCheckInterval < 0 || cfg.LocationCheckTimeout <= 0 {
				return cli.Exit("serve: --cluster-check-interval must be ≥ 0 and --cluster-check-timeout > 0", 2)
			}
			if cfg.LocationCheckInterval == 0 {
				cfg.LocationCheckInterval = -1 // never
			}
			if cfg.Tokens, err = readTokens(c.String("token-file"), c.String("token-env")); err != nil {
				return cli.Exit("serve: "+err.Error(), 2)
			}
			readHeadroom, err := cliutil.ParseSize(c.String("gc-read-headroom"))
			if err != nil {
				return cli.Exit("serve: --gc-read-headroom: "+err.Error(), 2)
			}
			defer gctune.Start(headroom, readHeadroom).Stop()
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			t0 := time.Now()
			srv, err := serve.New(cfg)
			if err != nil {
				return err
			}
			ready := map[string]any{
				"event": "listening", "flight": srv.FlightURI(), "datasets": srv.Service().Datasets(),
				"startup_ms": float64(time.Since(t0).Microseconds()) / 1000,
			}
			if a := srv.HTTPAddr(); a != nil {
				ready["http"] = "http://" + a.String()
			}
			line, _ := json.Marshal(ready)
			fmt.Fprintln(c.App.Writer, string(line))
			attrs := []any{"flight", srv.FlightURI(), "datasets", len(srv.Service().Datasets()),
				"startup_ms", ready["startup_ms"], "reload_interval", cfg.ReloadInterval.String(), "auth", cfg.Tokens != nil, "tls", cfg.TLSCert != ""}
			if h, ok := ready["http"]; ok {
				attrs = append(attrs, "http", h)
			}
			log.Info("listening", attrs...)
			return srv.Serve(ctx)
		},
	}
}

// parsePrefetch reads --prefetch: "auto" (serve.PrefetchAuto), "off" or
// a size (0: none).
func parsePrefetch(v string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "auto":
		return serve.PrefetchAuto, nil
	case "off":
		return 0, nil
	}
	n, err := cliutil.ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("%w (or auto, off)", err)
	}
	return n, nil
}

// preparedLimits sets the prepared statements' budgets and TTL from their
// flags.
func preparedLimits(l *serve.Limits, total, perClient string, ttl time.Duration) error {
	var err error
	if l.MaxPreparedBytes, err = cliutil.ParseSize(total); err != nil {
		return fmt.Errorf("--max-prepared-bytes: %w", err)
	}
	if l.MaxPreparedBytesPerClient, err = cliutil.ParseSize(perClient); err != nil {
		return fmt.Errorf("--max-prepared-bytes-per-client: %w", err)
	}
	if ttl < 0 {
		return fmt.Errorf("--prepared-ttl %s: want 0 or more", ttl)
	}
	l.PreparedTTL = ttl
	return nil
}

// readTokens reads --token-file and --token-env (either may be empty);
// nil without either.
func readTokens(file, env string) (*serve.Tokens, error) {
	var lines []serve.TokenLine
	if file != "" {
		l, err := serve.ReadTokenLines(file)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		lines = append(lines, l...)
	}
	if env != "" {
		l, err := serve.EnvTokenLines(env)
		if err != nil {
			return nil, fmt.Errorf("--token-env: %w", err)
		}
		lines = append(lines, l...)
	}
	if lines == nil {
		return nil, nil
	}
	t, err := serve.NewTokenSet(lines...)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return t, nil
}

func newLogger(format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
