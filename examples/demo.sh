#!/usr/bin/env bash
# The main job on built-in samples, end to end: generate a synthetic lake and
# the real EIA lake, cook a snapshot of each, and query a series back.
# Run through `make demo` (which builds bin/ and the Python venv first).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
PY=${PY:-.venv/bin/python}
OUT=${OUT:-out/demo}

rm -rf "$OUT"
mkdir -p "$OUT"

echo "== 1. generate lakes"
"$BIN/snapbuild" gen --out "$OUT/lake-synthetic" --series 2000 --seed 1
"$BIN/snapbuild" gen --eia data/eia-prices --out "$OUT/lake-eia"

echo "== 2. build snapshots"
"$BIN/snapbuild" build --input "$OUT/lake-synthetic" --out "$OUT/snapshots/SYN"
"$BIN/snapbuild" build --input "$OUT/lake-eia" --out "$OUT/snapshots/EIA"

echo "== 3. verify (deep structure, and against the lake it came from)"
"$BIN/snapverify" --deep "$OUT/snapshots/SYN"
"$BIN/snapverify" --deep --against "$OUT/lake-eia" "$OUT/snapshots/EIA"

echo "== 4. inspect"
"$BIN/snapinspect" "$OUT/snapshots/EIA"
"$BIN/snapinspect" "$OUT/snapshots/EIA" latest --category "Natural Gas"

echo "== 5. query: read the snapshot files with pyarrow (zero-copy memory map)"
"$PY" examples/python/read_snapshot.py "$OUT/snapshots/EIA" PET.RBRTE.M --last 5
"$PY" examples/python/read_snapshot.py "$OUT/snapshots/SYN" --first-series --last 3

echo "demo OK: snapshots under $OUT/snapshots"
