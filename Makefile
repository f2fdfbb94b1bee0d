# servingsnap — every command a developer or CI needs.
#
#   make demo   generate a sample lake (synthetic + real EIA), build, query
#   make test   every test: Go (race detector, fuzz seeds) and Python interop
#   make vet    go vet, gofmt, staticcheck and deadcode (pinned; installed into bin/tools)
#
# Python is used by the demo (pyarrow), the interop and doc tests and the
# benchmark peers. One venv, .venv, holds it; each target installs only the
# pinned requirements it needs, in layers (python/requirements-*.txt):
#   demo   pyarrow, the servingsnap package         make demo
#   test   + pytest, duckdb, polars, vortex-data,    make test, make venv
#          pyiceberg, hatchling; python/servingsnap
#   bench  + duckdb, polars, numpy, matplotlib      make bench*

GO        ?= go
PYTHON    ?= python3
VENV      := .venv
VPY       := $(VENV)/bin/python
BIN       := bin
OUT       := out
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
FUZZTIME  ?= 10s
PREFIX    ?= /usr/local
DESTDIR   ?=

.PHONY: all build install test test-go test-interop vet demo venv venv-demo venv-bench fuzz fuzz-smoke soak soak-lifecycle bench bench-quick bench-build bench-report bench-report-check clean

all: build

build:
	@echo "== compiling snapbuild, snapserve, snapinspect, snapverify (./cmd/...) into $(BIN)/"
	@echo "   the first build also compiles Arrow, gRPC, iceberg-go and the AWS SDK: a few minutes, silent; later builds take seconds"
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

# Copy the binaries to $(DESTDIR)$(PREFIX)/bin (make install PREFIX=$$HOME/.local needs no root).
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BIN)/snapbuild $(BIN)/snapserve $(BIN)/snapinspect $(BIN)/snapverify $(DESTDIR)$(PREFIX)/bin/

PIP       := $(VPY) -m pip install --disable-pip-version-check --progress-bar off

$(VENV)/.demo: python/requirements-demo.txt
	@echo "== Python packages for the demo (python/requirements-demo.txt) into $(VENV)/"
	$(PYTHON) -m venv $(VENV)
	$(PIP) -r python/requirements-demo.txt
	touch $@

$(VENV)/.test: $(VENV)/.demo python/requirements-test.txt python/requirements-lake.txt
	@echo "== Python packages for the tests (python/requirements-test.txt) into $(VENV)/"
	$(PIP) -r python/requirements-test.txt
	$(PIP) -r python/requirements-lake.txt
	touch $@

$(VENV)/.bench: $(VENV)/.demo python/requirements-bench.txt
	@echo "== Python packages for the benchmark (python/requirements-bench.txt) into $(VENV)/"
	$(PIP) -r python/requirements-bench.txt
	touch $@

# The Python package, rebuilt into the venv whenever its sources change.
$(VENV)/.servingsnap: $(VENV)/.demo python/servingsnap/pyproject.toml $(wildcard python/servingsnap/src/servingsnap/*.py)
	@echo "== the servingsnap Python package (python/servingsnap) into $(VENV)/"
	$(PIP) --no-build-isolation --no-deps --force-reinstall ./python/servingsnap
	touch $@

venv-demo: $(VENV)/.demo $(VENV)/.servingsnap
venv: $(VENV)/.test
venv-bench: $(VENV)/.bench

# The linters, pinned, installed on first use into bin/tools (a fresh clone or
# CI machine needs only Go and the module proxy). The version is in the file
# name, so changing it here installs the new one.
STATICCHECK_VERSION := v0.8.2
DEADCODE_VERSION    := v0.52.0
TOOLS       := $(BIN)/tools
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
DEADCODE    := $(TOOLS)/deadcode-$(DEADCODE_VERSION)

$(STATICCHECK):
	@mkdir -p $(TOOLS)
	GOBIN=$(abspath $(TOOLS)) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/staticcheck $@

$(DEADCODE):
	@mkdir -p $(TOOLS)
	GOBIN=$(abspath $(TOOLS)) $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)
	mv $(TOOLS)/deadcode $@

# go vet, gofmt, staticcheck (tests included) and deadcode: no function
# unreachable from a main or a test. Code only tests use lives in _test.go
# files (export_test.go when it reaches into a package's internals).
vet: $(STATICCHECK) $(DEADCODE)
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(STATICCHECK) ./...
	@out=$$($(DEADCODE) -test ./...) || { echo "$$out"; exit 1; }; \
	  test -z "$$out" || { echo "$$out"; echo "deadcode: unreachable functions: delete them (code only tests use goes in a _test.go file)"; exit 1; }

test: vet test-go test-interop bench-report-check

# -tags invariants: snapshot handles garbage-collected unreleased panic.
test-go:
	$(GO) test -race -count=1 -tags invariants ./...

test-interop: build venv $(VENV)/.servingsnap
	SNAPBUILD=$(abspath $(BIN))/snapbuild $(VPY) -m pytest -q tests/interop tests/vortex tests/docs
	SNAPBUILD=$(abspath $(BIN))/snapbuild $(VPY) -m pytest -q python/servingsnap/tests

# Run every fuzz target for FUZZTIME each (CI runs the seed corpora via
# test-go; this explores).
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg || exit 1; \
	  done; \
	done

# A short coverage-guided run of the parsers of outside bytes (CI runs it
# after the seed corpora): Vortex files, tickets, manifests, periods, Arrow
# IPC footers, WAL segments, SQL statements, DoPut string columns, Delta deletion vectors, commits
# and checkpoints, and the Vortex writer (write → read → equal)
# (scripts/fuzz-smoke.sh says how a fuzzer deadline is told apart from a
# failure).
SMOKE_FUZZTIME ?= 15s
fuzz-smoke:
	GO=$(GO) bash scripts/fuzz-smoke.sh $(SMOKE_FUZZTIME) \
	  ./pkg/vortexio:FuzzReader ./pkg/vortexio:FuzzWriterRoundTrip ./pkg/serve:FuzzParseTicket ./pkg/verify/manifestcheck:FuzzParseManifest \
	  ./pkg/serve:FuzzServer ./pkg/period:FuzzParse ./pkg/arrowfile:FuzzCheckFooter ./pkg/wal:FuzzReplay ./pkg/live:FuzzReplayResealed ./pkg/sqlq:FuzzParse \
	  ./pkg/lake/roaring:FuzzDecodeDelta ./pkg/lake/deltalog:FuzzParseActions ./pkg/lake/deltalog:FuzzParseParquetActions \
	  ./pkg/shard:FuzzParseMap ./pkg/shard:FuzzParseCluster ./pkg/verify/arrowcheck:FuzzData ./pkg/serve:FuzzValidateStrings ./pkg/wal:FuzzParseCheckpoint \
	  ./pkg/serve:FuzzParseTokens

demo: build venv-demo
	bash examples/demo.sh

# Serving benchmark (bench/README.md): start-up, memory, latency, build, sizes and scaling of
# snapbuild serve against servers that build their state at start, PROFILE=quick|default|large,
# BENCH_INVOCATIONS times (results DATE-PROFILE, DATE-PROFILE-2, ...: the spread across
# invocations); then `make bench-report` puts the figures into the docs.
PROFILE ?= default
BENCH_INVOCATIONS ?= 2
bench: build venv-bench
	@for i in $$(seq 1 $(BENCH_INVOCATIONS)); do \
	  tag=$(PROFILE); [ $$i -gt 1 ] && tag=$(PROFILE)-$$i; \
	  echo "== invocation $$i of $(BENCH_INVOCATIONS): bench/results/*-$$tag.*"; \
	  $(VPY) bench/harness.py --profile $(PROFILE) --tag $$tag --bin $(BIN)/snapbuild --go $(GO) --out bench/results || exit 1; \
	done

# Rewrite every <!-- bench:NAME --> region of README.md, bench/README.md and docs/*.md from the
# committed bench/results/*.json (bench/report.py; standard library only).
bench-report:
	$(PYTHON) bench/report.py --profile $(PROFILE)

# CI: fail when a quoted figure is not what the committed runs generate.
bench-report-check:
	$(PYTHON) bench/report.py --profile default --check

# The seed profile (bench/README.md, "The seed profile"): two 2.82M-series lakes built under
# --memory 6GiB, served cold and warm, written to (DoPut of 1M rows) and compacted, against the
# Go rebuild under a memory limit. Hours and ~40 GiB of disk at full size; FRACTION=0.01 runs it
# at a hundredth (results named DATE-seed-fF). Results: bench/results/DATE-seed[-fF].{md,json}.
.PHONY: bench-seed
bench-seed: build venv-bench
	flock /tmp/servingsnap-bench.lock $(VPY) bench/harness.py --profile seed --bin $(BIN)/snapbuild --go $(GO) --out bench/results $(if $(FRACTION),--fraction $(FRACTION))

# CI smoke test of the harness: every section on a 2k-series lake; results in out/bench.
bench-quick: build venv-bench
	$(VPY) bench/harness.py --profile quick --bin $(BIN)/snapbuild --go $(GO) --out $(OUT)/bench

# Tier benchmark (bench/README.md, "Tier benchmark"): sizes, server memory after 10k
# mixed queries, one-series latency cold and warm, the Go Vortex read and build time of all-hot
# against hot+cold (--hot-since, --hot-rows) and --format vortex; PROFILE=quick|default. Results:
# bench/results/DATE-tiers.{md,json} (DATE-tiers-quick.* for quick). SNAPSERVE=path tests another server.
.PHONY: bench-tiers
bench-tiers: build venv-bench
	$(VPY) bench/tiers.py --profile $(PROFILE) --bin $(BIN)/snapbuild --go $(GO) --out bench/results $(if $(SNAPSERVE),--snapserve $(SNAPSERVE))

# Parquet copies of a snapshot (make bench's build section alone, on the default lake): build,
# build --portable's copy and a whole-snapshot export against DuckDB's COPY ... ORDER BY, in the
# same invocation. Results: bench/results/DATE-copies.{md,json}.
.PHONY: bench-copies
bench-copies: build venv-bench
	flock /tmp/servingsnap-bench.lock $(VPY) bench/harness.py --profile copies --sections build --bin $(BIN)/snapbuild --go $(GO) --out bench/results

# The Python package (python/servingsnap): open and one-series lookup + slice at 2.8M series.
# Results: bench/results/DATE-python-package.json.
.PHONY: bench-python
bench-python: build venv-bench
	flock /tmp/servingsnap-bench.lock $(VPY) bench/pkgread.py --bin $(BIN)/snapbuild --out bench/results

# Sharded builds of one unbucketed lake (20k series, ~3M rows, generated under $(OUT) once), N = 1, 2, 4:
# N build --shard jobs against split + build --from-split (bytes read, CPU, critical path).
# Results: bench/results/DATE-shard-split.{md,json}.
.PHONY: bench-shard-split
bench-shard-split: build
	flock /tmp/servingsnap-bench.lock python3 bench/shard_split.py --bin $(BIN)/snapbuild --lake $(OUT)/shard-split-lake --out bench/results

# The read floor (bench/README.md, "Caveats"): one-series p50/p99 of snapserve against a server
# sending the same answers pre-encoded (bench/readfloor) and of the Go rebuild peer, same root and tickets, 100k series.
# Warm, then cold (every input evicted before each start, no warm-up), like make bench's rows.
# Results: bench/results/DATE-read-floor.txt and DATE-read-floor-cold.txt.
.PHONY: bench-read-floor
bench-read-floor: build venv-bench
	flock /tmp/servingsnap-bench.lock $(VPY) bench/readfloor.py --runs 21 --bin $(BIN)/snapbuild --go $(GO) --out bench/results
	flock /tmp/servingsnap-bench.lock $(VPY) bench/readfloor.py --runs 21 --cold --bin $(BIN)/snapbuild --go $(GO) --out bench/results

# Per-query CPU, collections and page faults of snapserve and the Go rebuild over the same tickets.
.PHONY: bench-server-trace
bench-server-trace: build venv-bench
	flock /tmp/servingsnap-bench.lock $(VPY) bench/servertrace.py --bin $(BIN)/snapbuild --go $(GO) --out bench/results

# Build benchmark: 15M rows / 100k series against DuckDB's sort-and-write.
bench-build: build venv-bench
	$(GO) test -run '^$$' -bench BenchmarkBuild -benchtime 3x ./pkg/sortwrite
	$(VPY) bench/build_vs_duckdb.py --bin $(BIN)/snapbuild --runs 3

clean:
	rm -rf $(BIN) $(OUT)

# Soak test (docs/OPERATIONS.md "Soak test"; not in CI): a server process
# under 8 clients, a flip every 2 s (builds, rollbacks, gc) and clients that
# stop reading, for SOAK_DURATION (default 10m). It prints one SOAK {json}
# line: requests ok and failed, the RssAnon slope, fds and mappings against
# their baseline.
SOAK_DURATION ?= 10m
soak:
	bash scripts/soak.sh $(SOAK_DURATION)

# The lifecycle soak (tests/lifecycle, docs/OPERATIONS.md "One truth for a dataset"):
# LIFECYCLE_STEPS random steps for each of LIFECYCLE_SEEDS (writes, compactions, builds of two
# lakes, publishes, rollbacks, gc, discards, restarts, hand-overs, kill -9) against real
# snapserve processes and a replica, every answer compared with an oracle; `make test` runs a
# bounded run of the same test. The figures are the last lines; the whole log is kept in
# out/soak-lifecycle.log.
LIFECYCLE_STEPS ?= 3000
LIFECYCLE_SEEDS ?= 11,12,13,14,15
soak-lifecycle:
	@mkdir -p $(OUT)
	LIFECYCLE_STEPS=$(LIFECYCLE_STEPS) LIFECYCLE_SEEDS=$(LIFECYCLE_SEEDS) $(GO) test -count=1 -timeout 4h -v -run TestLifecycle ./tests/lifecycle/ > $(OUT)/soak-lifecycle.log 2>&1; \
	  status=$$?; grep -E 'seed [0-9]+:|total:|--- FAIL|serves what|changed the answer|published over' $(OUT)/soak-lifecycle.log; exit $$status
