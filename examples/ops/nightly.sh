#!/usr/bin/env bash
# The nightly cycle for one dataset: build (staged) -> verify -> publish ->
# the server picks it up -> gc.
#
# `snapbuild build --no-publish` writes the new snapshot completely (files
# fsynced, manifest written) but leaves CURRENT alone, so no server sees it;
# `snapverify --snapshot N --deep` checks it; only then does `snapbuild
# publish --id N` flip CURRENT. A bad input is never served, not even for the
# second a server takes to notice a new CURRENT.
#
# The build itself refuses an empty export (--allow-empty overrides) and a
# snapshot whose series or rows fall below half or rise above twice the live
# one's (--max-change 0.5, the default; 0 disables): set BUILD_FLAGS for a
# night that really is different, e.g. BUILD_FLAGS="--max-change 0".
#
# Usage: nightly.sh LAKE_DIR ROOT/DATASET [KEEP]
#   KEEP        vintages kept besides CURRENT (rollback targets), default 7
#   STATE_DIR   where the build's JSON summary goes, default /var/lib/servingsnap:
#               never inside ROOT, which the server reads as datasets
#   BUILD_FLAGS extra flags for snapbuild build (word-split)
set -euo pipefail
lake=$1
dataset=$2
keep=${3:-7}
bin=${SNAPBUILD_BIN:-/usr/local/bin}
state=${STATE_DIR:-/var/lib/servingsnap}
mkdir -p "$state"
summary="$state/$(basename "$dataset").build.json"

# --lock-timeout: if yesterday's run (or a manual gc) still holds the dataset,
# fail tonight's instead of queueing behind it.
# shellcheck disable=SC2086 # BUILD_FLAGS is a list of flags
"$bin/snapbuild" build --input "$lake" --out "$dataset" --no-publish --lock-timeout 1h ${BUILD_FLAGS:-} --json > "$summary"

# The staged snapshot's id: the summary's top-level "snapshot_id".
id=$(sed -n 's/^  "snapshot_id": \([0-9][0-9]*\),$/\1/p' "$summary" | head -n 1)
if [ -z "$id" ]; then
  echo "nightly: no snapshot_id in $summary" >&2
  exit 1
fi

if ! "$bin/snapverify" --snapshot "$id" --deep "$dataset"; then
  echo "nightly: snapshot $id does not verify; it stays unpublished, CURRENT is unchanged" >&2
  exit 1
fi

# publish re-runs the fast checks under the dataset's lock, then flips CURRENT.
"$bin/snapbuild" publish --id "$id" --lock-timeout 1h "$dataset"

# A running `snapbuild serve` notices the new CURRENT by itself (it polls
# CURRENT); nothing to signal. Old vintages that a server still has open are
# skipped by gc and collected on a later night.
"$bin/snapbuild" gc --keep "$keep" "$dataset"
