#!/usr/bin/env bash
# The nightly cycle for one dataset: build -> verify -> (flip) -> server picks it up -> gc.
#
# `snapbuild build` flips CURRENT itself once every file is durable; if the
# deep verification of the new snapshot fails, we roll CURRENT back to the
# snapshot that was live before, so a bad input never stays served.
#
# Usage: nightly.sh LAKE_DIR ROOT/DATASET [KEEP]
#   KEEP      vintages kept besides CURRENT (rollback targets), default 7
#   STATE_DIR where the build's JSON summary goes, default /var/lib/servingsnap:
#             never inside ROOT, which the server reads as datasets
set -euo pipefail
lake=$1
dataset=$2
keep=${3:-7}
bin=${SNAPBUILD_BIN:-/usr/local/bin}
state=${STATE_DIR:-/var/lib/servingsnap}
mkdir -p "$state"

before=$(sed -n 's#^manifests/\([0-9]*\)\.json$#\1#p' "$dataset/CURRENT" 2>/dev/null || true)

# --lock-timeout: if yesterday's run (or a manual gc) still holds the dataset,
# fail tonight's instead of queueing behind it.
"$bin/snapbuild" build --input "$lake" --out "$dataset" --lock-timeout 1h --json > "$state/$(basename "$dataset").build.json"

if ! "$bin/snapverify" --deep "$dataset"; then
  echo "nightly: verification of the new snapshot failed" >&2
  if [ -n "$before" ]; then
    "$bin/snapbuild" rollback --to "$((10#$before))" --reason "nightly verify failed" "$dataset"
  fi
  exit 1
fi

# A running `snapbuild serve` notices the new CURRENT by itself (it polls
# CURRENT); nothing to signal. Old vintages that a server still has open are
# skipped by gc and collected on a later night.
"$bin/snapbuild" gc --keep "$keep" "$dataset"
